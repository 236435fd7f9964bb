"""OpenAI Agents SDK: a model-input filter and run wrappers that inject recalled memory.

Usage::

    from asyncrecall.integrations import openai_agents as recall

    prefetcher = RecallPrefetcher(memory)
    result = await recall.run(prefetcher, agent, "how do I deploy?", key="thread-1")
    # or: streamed = recall.run_streamed(prefetcher, agent, text, key="thread-1")

The SDK has no run-start or run-end hook that can edit the input, so :func:`run` and
:func:`run_streamed` wrap ``Runner.run`` / ``Runner.run_streamed``: they adopt the
recall the app already started for ``key`` (``prefetcher.start(key, text)`` as soon as
the message arrives) or start one, and cancel it however the run ends (``finally``;
the run task's done-callback for a streamed run).

Before every model call, :class:`RecallInputFilter` (the run's
``RunConfig.call_model_input_filter``, chained after yours) takes the settled block
once: before the user's message on the first call, or after the last tool output of a
later call. The SDK does not keep what a filter returns, so the block is put back at
the same anchor on every later call of the run; when the anchor is absent (server-
managed conversations send only the new items), nothing is re-inserted. The block is
not saved in a session: the next user message recalls afresh.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Literal

from agents import Agent, RunConfig, Runner, RunResult, RunResultStreaming
from agents.run_config import CallModelData, ModelInputData

from asyncrecall.integrations._common import adopt_or_start, end_reason, finish, prompt_text
from asyncrecall.prefetch import InjectionPoint, RecallPrefetcher

__all__ = ["TOOL_OUTPUT_TYPES", "RecallInputFilter", "run", "run_streamed"]

#: Input item types that carry a tool's result back to the model.
TOOL_OUTPUT_TYPES = frozenset(
    {
        "function_call_output",
        "computer_call_output",
        "shell_call_output",
        "local_shell_call_output",
        "apply_patch_call_output",
        "custom_tool_call_output",
        "mcp_approval_response",
    }
)

_Filter = Callable[[CallModelData[Any]], Any]


class RecallInputFilter:
    """The ``call_model_input_filter`` of one run: inject once, re-insert on every call.

    ``inner`` is the filter the run config already had; it runs first.
    """

    def __init__(
        self, prefetcher: RecallPrefetcher, key: str, *, inner: _Filter | None = None
    ) -> None:
        self.prefetcher = prefetcher
        self.key = key
        self.inner = inner
        self._memory: dict[str, Any] | None = None
        self._anchor: tuple[Literal["before", "after"], Any] | None = None

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        model_data = data.model_data
        if self.inner is not None:
            updated = self.inner(data)
            model_data = await updated if inspect.isawaitable(updated) else updated
        items: list[Any] = list(model_data.input)
        if self._memory is None:
            point = _point(items)
            block = self.prefetcher.take(self.key, point) if point is not None else None
            if block is not None:
                self._memory = {"role": "user", "content": block.text}
                last = items[-1]
                self._anchor = (
                    ("before", dict(last)) if point == "user_query" else ("after", last["call_id"])
                )
        if self._memory is not None and self._anchor is not None:
            at = _position(items, self._anchor)
            if at is not None:
                items.insert(at, self._memory)
        return ModelInputData(input=items, instructions=model_data.instructions)


async def run(
    prefetcher: RecallPrefetcher,
    starting_agent: Agent[Any],
    input: str | list[Any],
    *,
    key: str,
    run_config: RunConfig | None = None,
    **kwargs: Any,
) -> RunResult:
    """``Runner.run`` with background recall for conversation ``key``."""
    recall = adopt_or_start(prefetcher, key, _user_text(input))
    config = _config(prefetcher, key, run_config)
    await asyncio.sleep(0)  # one tick: a recall with no I/O settles here
    error: BaseException | None = None
    try:
        return await Runner.run(starting_agent, input, run_config=config, **kwargs)
    except BaseException as exc:
        error = exc
        raise
    finally:
        finish(prefetcher, key, recall, end_reason(error))


def run_streamed(
    prefetcher: RecallPrefetcher,
    starting_agent: Agent[Any],
    input: str | list[Any],
    *,
    key: str,
    run_config: RunConfig | None = None,
    **kwargs: Any,
) -> RunResultStreaming:
    """``Runner.run_streamed`` with background recall for conversation ``key``.

    Needs a running event loop. The recall is cancelled when the run's task ends:
    completed, failed, or cancelled (``result.cancel()``).
    """
    recall = adopt_or_start(prefetcher, key, _user_text(input))
    config = _config(prefetcher, key, run_config)
    try:
        result = Runner.run_streamed(starting_agent, input, run_config=config, **kwargs)
    except BaseException as exc:
        finish(prefetcher, key, recall, end_reason(exc))
        raise
    task = result.run_loop_task
    if task is None:  # pragma: no cover - the SDK always starts the run's task
        finish(prefetcher, key, recall, "error")
        return result

    def done(task: asyncio.Task[Any]) -> None:
        error = asyncio.CancelledError() if task.cancelled() else task.exception()
        finish(prefetcher, key, recall, end_reason(error))

    task.add_done_callback(done)
    return result


def _config(prefetcher: RecallPrefetcher, key: str, run_config: RunConfig | None) -> RunConfig:
    base = run_config if run_config is not None else RunConfig()
    inner = base.call_model_input_filter
    return dataclasses.replace(
        base, call_model_input_filter=RecallInputFilter(prefetcher, key, inner=inner)
    )


def _user_text(input: Any) -> str:
    """The text of the run's new user message: the string, or the last user item."""
    if isinstance(input, str):
        return input
    if isinstance(input, Sequence):
        for item in reversed(input):
            if isinstance(item, dict) and item.get("role") == "user":
                return prompt_text(item.get("content"))
    return ""


def _is_tool_output(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") in TOOL_OUTPUT_TYPES


def _point(items: Sequence[Any]) -> InjectionPoint | None:
    """What the call's last item is: a tool's output, the user's message, or neither."""
    if not items:
        return None
    last = items[-1]
    if _is_tool_output(last) and "call_id" in last:
        return "tool_result"
    if (
        isinstance(last, dict)
        and last.get("role") == "user"
        and last.get("type", "message") == ("message")
    ):
        return "user_query"
    return None


def _position(items: Sequence[Any], anchor: tuple[Literal["before", "after"], Any]) -> int | None:
    """Where the block goes in this call's items, or ``None`` if its anchor is absent."""
    side, mark = anchor
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if side == "before" and item == mark:
            return i
        if side == "after" and _is_tool_output(item) and item.get("call_id") == mark:
            return i + 1
    return None

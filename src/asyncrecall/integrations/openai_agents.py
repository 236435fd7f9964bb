"""OpenAI Agents SDK: a model-input filter and run wrappers that inject recalled memory.

Usage::

    from asyncrecall.integrations import openai_agents as recall

    prefetcher = RecallPrefetcher(memory)
    result = await recall.run(prefetcher, agent, "how do I deploy?", key="thread-1")
    # or: streamed = recall.run_streamed(prefetcher, agent, text, key="thread-1")

The SDK has no run-start or run-end hook that can edit the input, so :func:`run` and
:func:`run_streamed` wrap ``Runner.run`` / ``Runner.run_streamed``: they adopt the
recall the app already started for ``key`` and this message
(:func:`asyncrecall.integrations.start_recall` as soon as the message arrives) or start
one, and cancel it however the run ends (``finally``; the run task's done-callback for a
streamed run).

Before every model call, :class:`RecallInputFilter` (the run's
``RunConfig.call_model_input_filter``, chained after yours) takes the settled block
once: before the user's message on the first call, or after the last tool output of a
later call. The SDK does not keep what a filter returns, so the block is put back at
the same anchor on every later call of the run; when the anchor is absent (server-
managed conversations send only the new items), nothing is re-inserted.

The block is in no history the next message sends (neither ``result.to_input_list()``
nor a session), so at run end its files are taken back out of the conversation's
surfaced set: the next message's recall may offer them again, and the model is never
left with memory it was shown once and then lost.
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
from asyncrecall.prefetch import InjectionPoint, MemoryBlock, PendingRecall, RecallPrefetcher

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
        #: The block this run showed, if any (the files go back to unshown at run end).
        self.block: MemoryBlock | None = None
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
                self.block = block
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
    config, shown = _config(prefetcher, key, run_config)
    recall = None
    error: BaseException | None = None
    try:
        recall = adopt_or_start(prefetcher, key, _user_text(input))
        await asyncio.sleep(0)  # one tick: a recall with no I/O settles here
        return await Runner.run(starting_agent, input, run_config=config, **kwargs)
    except BaseException as exc:
        error = exc
        raise
    finally:
        _end(prefetcher, key, recall, shown, error)


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
    config, shown = _config(prefetcher, key, run_config)
    recall = None
    try:
        recall = adopt_or_start(prefetcher, key, _user_text(input))
        result = Runner.run_streamed(starting_agent, input, run_config=config, **kwargs)
    except BaseException as exc:
        _end(prefetcher, key, recall, shown, exc)
        raise
    task = result.run_loop_task
    if task is None:  # pragma: no cover - the SDK always starts the run's task
        _end(prefetcher, key, recall, shown, RuntimeError("no run task"))
        return result

    def done(task: asyncio.Task[Any]) -> None:
        error = asyncio.CancelledError() if task.cancelled() else task.exception()
        _end(prefetcher, key, recall, shown, error)

    task.add_done_callback(done)
    return result


def _config(
    prefetcher: RecallPrefetcher, key: str, run_config: RunConfig | None
) -> tuple[RunConfig, RecallInputFilter]:
    base = run_config if run_config is not None else RunConfig()
    inner = base.call_model_input_filter
    shown = RecallInputFilter(prefetcher, key, inner=inner)
    return dataclasses.replace(base, call_model_input_filter=shown), shown


def _end(
    prefetcher: RecallPrefetcher,
    key: str,
    recall: PendingRecall | None,
    shown: RecallInputFilter,
    error: BaseException | None,
) -> None:
    """The run is over: drop its recall, and take the files of the block it showed back
    out of the surfaced set, since the SDK kept the block in no history that the next
    message sends (neither ``to_input_list()`` nor a session)."""
    finish(prefetcher, key, recall, end_reason(error))
    if shown.block is not None:
        prefetcher.unsurface(key, shown.block.paths)


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

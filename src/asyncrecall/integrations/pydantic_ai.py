"""Pydantic AI: a capability that injects memory recalled in the background.

Usage::

    from asyncrecall.integrations.pydantic_ai import AsyncRecall

    prefetcher = RecallPrefetcher(memory)
    agent = Agent(model, capabilities=[AsyncRecall(prefetcher)])
    await agent.run("how do I deploy?", conversation_id="thread-1")

The conversation key is the run's ``conversation_id`` (pass your own with
``conversation_id=``, or ``key=`` a function of the run context). The app may call
:func:`asyncrecall.integrations.start_recall` as soon as the message arrives, before
``agent.run``: the run adopts that recall (it is for the same message text) instead of
starting one.

* ``wrap_run``: adopts the recall started for this message or starts one, gives the
  loop one tick (a recall with no I/O settles there), and in its ``finally`` cancels the
  recall however the run ends (success, error, cancel, breaking out of ``iter()``).
* ``before_model_request``: if settled, the block goes into the request's
  :class:`~pydantic_ai.messages.ModelRequest` as a ``UserPromptPart``: before the
  user's prompt on the first request, after every tool return on a later one. The part
  is added to the request object the run's history holds, so it stays in
  ``result.all_messages()`` and is re-sent on later requests (the prompt-cache prefix
  stays stable).

A block counts as shown only while it stays in the history the next call sends: the app
passes ``message_history=result.all_messages()`` to the next run. When the history a run
is given lacks a block shown earlier in the conversation (none given, the app's own
store of the chat, trimmed), that block's files are un-surfaced at the run's start, so
its recall may offer them again.

Not for durable execution (Temporal, DBOS, Prefect): a background task is not
deterministic workflow code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    RetryPromptPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext

from asyncrecall.integrations._common import (
    adopt_or_start,
    end_reason,
    finish,
    prompt_text,
    record_shown,
)
from asyncrecall.prefetch import InjectionPoint, RecallPrefetcher

__all__ = ["AsyncRecall"]


@dataclass
class AsyncRecall(AbstractCapability[Any]):
    """Background memory recall for a Pydantic AI agent (a capability).

    ``prefetcher`` holds the memory and the conversations; ``key`` maps a run to its
    conversation key (default: the run's ``conversation_id``).
    """

    prefetcher: RecallPrefetcher
    key: Callable[[RunContext[Any]], str] | None = None

    # One instance serves every run, with no copy per run (the framework keeps its runs'
    # contexts alive for a while, and with them what they hold): each hook reads the
    # run's key off the run's context.

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> Any:
        """Adopt or start the recall; cancel it however the run ends."""
        key = self._key_for(ctx)
        prefetcher = self.prefetcher
        recall = None
        error: BaseException | None = None
        try:
            history = _history_text(ctx.messages)
            recall = adopt_or_start(prefetcher, key, prompt_text(ctx.prompt), history=history)
            await asyncio.sleep(0)  # one tick: a recall with no I/O settles here
            return await handler()
        except BaseException as exc:
            error = exc
            raise
        finally:
            finish(prefetcher, key, recall, end_reason(error))

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Put the settled memory block into the request about to be sent (never waits)."""
        messages = request_context.messages
        if not messages or not isinstance(messages[-1], ModelRequest):
            return request_context
        key = self._key_for(ctx)
        request = messages[-1]
        point = _point(request)
        if point is None:
            return request_context
        block = self.prefetcher.take(key, point)
        if block is None:
            return request_context
        memory = UserPromptPart(block.text)
        parts = list(request.parts)
        if point == "user_query":  # first, before the user's own text
            at = next((i for i, p in enumerate(parts) if isinstance(p, UserPromptPart)), 0)
            parts.insert(at, memory)
        else:  # after every tool return: they must follow the tool calls directly
            parts.append(memory)
        # The request object is the one the run's history holds: the part persists.
        request.parts = parts
        record_shown(self.prefetcher, key, block)
        return request_context

    def _key_for(self, ctx: RunContext[Any]) -> str:
        if self.key is not None:
            return self.key(ctx)
        return ctx.conversation_id or ctx.run_id or "default"

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not spec-serializable: it holds a live prefetcher."""
        return None


def _point(request: ModelRequest) -> InjectionPoint | None:
    """Where a request stands: carrying tool results, the user's prompt, or neither."""
    parts = request.parts
    if any(
        isinstance(p, ToolReturnPart) or (isinstance(p, RetryPromptPart) and p.tool_name)
        for p in parts
    ):
        return "tool_result"
    if any(isinstance(p, UserPromptPart) for p in parts):
        return "user_query"
    return None


def _history_text(messages: list[ModelMessage]) -> list[str]:
    """The text of the user parts of the history the run was given (where blocks go)."""
    return [
        prompt_text(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]

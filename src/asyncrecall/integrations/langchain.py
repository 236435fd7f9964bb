"""LangChain v1 ``create_agent``: middleware that injects memory recalled in the background.

Usage::

    from asyncrecall.integrations.langchain import AsyncRecallMiddleware

    recall = AsyncRecallMiddleware(RecallPrefetcher(memory))
    agent = create_agent(model, tools, middleware=[recall], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "thread-1"}}
    result = await recall.ainvoke(agent, {"messages": [{"role": "user", "content": text}]}, config)

The conversation key is the run's ``thread_id`` (``configurable``). A run without one
gets a key of its own, ``run-<uuid>``, which no later run can name: the middleware
forgets that conversation when the run ends (so a server that never passes a thread id
does not pile up one conversation per run). The app may call
:func:`asyncrecall.integrations.start_recall` as soon as the message arrives: the run
adopts that recall, since it is for the same message text (a recall pending for the
thread but started for another message, such as one left by a failed run, is not).

* ``abefore_agent`` (once per invocation): adopts or starts the recall, then gives the
  loop one tick (a recall with no I/O settles there). Blocks shown earlier in the thread
  that the state no longer holds (no checkpointer, the app's own history) have their
  files un-surfaced first: a block counts as shown only while it is re-sent.
* ``abefore_model`` (before every model call, after tools too): if settled, the block
  goes into the state, so it is checkpointed and re-sent on later calls: on the first
  call it is put first in the user's message (same id), as text before yours when your
  message is text (``f"{memory}\n\n{yours}"``: a string, which every chat template
  renders; some servers' templates, llama-cpp-python's, fail on a list of parts), else
  as a text part before yours (``[memory, *yours]``: a message with an image is a list
  already); after a tool round it is appended as a new ``HumanMessage`` (a string)
  after the tool messages.
* Ends: ``aafter_agent`` runs only when the agent finishes normally, so errors and
  cancellation need one of: :meth:`AsyncRecallMiddleware.ainvoke` /
  :meth:`AsyncRecallMiddleware.astream` (a ``finally``), or
  :meth:`AsyncRecallMiddleware.callback_handler` in ``config["callbacks"]`` (the root
  run's ``on_chain_error``, which LangGraph also sends on cancellation).

Async only (``ainvoke``/``astream``): the sync hooks are not implemented.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, NotRequired
from uuid import UUID

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.config import get_config

from asyncrecall.integrations._common import (
    adopt_or_start,
    end_reason,
    finish,
    forget_conversation,
    prompt_text,
    record_shown,
)
from asyncrecall.prefetch import DiscardReason, PendingRecall, RecallPrefetcher

__all__ = ["AsyncRecallMiddleware", "RecallState"]

#: ``configurable`` key naming the conversation when there is no ``thread_id``.
KEY_FIELD = "asyncrecall_key"


class RecallState(AgentState[Any]):
    """The agent state plus this middleware's private conversation key."""

    asyncrecall_key: NotRequired[Annotated[str, PrivateStateAttr]]


class AsyncRecallMiddleware(AgentMiddleware[RecallState, Any, Any]):
    """Background memory recall for a LangChain v1 agent (``create_agent`` middleware)."""

    state_schema = RecallState

    def __init__(self, prefetcher: RecallPrefetcher) -> None:
        super().__init__()
        self.prefetcher = prefetcher
        self._recalls: dict[str, PendingRecall | None] = {}
        # Keys made here for runs without a thread id: forgotten at the run's end. The
        # wrappers put theirs into ``configurable``, so the hooks see it as configured.
        self._generated: set[str] = set()

    async def abefore_agent(self, state: RecallState, runtime: Any) -> dict[str, Any] | None:
        """Adopt the recall started for this message, or start one; never wait for it."""
        key = _configured_key() or self._new_key()
        messages = state["messages"]
        query = next((prompt_text(m.content) for m in reversed(messages) if _is_human(m)), "")
        history = [prompt_text(m.content) for m in messages]
        self._recalls[key] = adopt_or_start(self.prefetcher, key, query, history=history)
        await asyncio.sleep(0)  # one tick: a recall with no I/O settles here
        return {"asyncrecall_key": key}

    async def abefore_model(self, state: RecallState, runtime: Any) -> dict[str, Any] | None:
        """Put the settled block into the state before this model call (never waits)."""
        key = state.get("asyncrecall_key")
        messages = state["messages"]
        if key is None or not messages:
            return None
        last = messages[-1]
        if isinstance(last, ToolMessage):
            block = self.prefetcher.take(key, "tool_result")
            if block is None:
                return None
            record_shown(self.prefetcher, key, block)
            memory = HumanMessage(content=block.text, id=f"asyncrecall-{uuid.uuid4().hex}")
            return {"messages": [memory]}  # add_messages appends: after every tool message
        if _is_human(last):
            block = self.prefetcher.take(key, "user_query")
            if block is None:
                return None
            record_shown(self.prefetcher, key, block)
            # Same id: add_messages replaces the user's message in place, memory first.
            content = with_memory_first(block.text, last.content)
            return {"messages": [last.model_copy(update={"content": content})]}
        return None

    async def aafter_agent(self, state: RecallState, runtime: Any) -> dict[str, Any] | None:
        """The agent finished normally: drop the recall if it is still out."""
        key = state.get("asyncrecall_key")
        if key is not None:
            self._end(key, "turn_ended")
        return None

    # -- every other end ---------------------------------------------------------------

    async def ainvoke(
        self, agent: Any, input: Any, config: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """``agent.ainvoke`` that cancels the recall however the run ends."""
        config, key = self._with_key(config)
        error: BaseException | None = None
        try:
            return await agent.ainvoke(input, config, **kwargs)
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._end(key, end_reason(error))

    async def astream(
        self, agent: Any, input: Any, config: dict[str, Any] | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """``agent.astream`` that cancels the recall however the run ends (also when the
        consumer stops iterating early and closes the generator)."""
        config, key = self._with_key(config)
        error: BaseException | None = None
        try:
            async for chunk in agent.astream(input, config, **kwargs):
                yield chunk
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._end(key, end_reason(error))

    def callback_handler(self) -> AsyncCallbackHandler:
        """A callback handler for ``config["callbacks"]`` that cancels the recall when
        the root run ends, fails or is cancelled (for ``agent.ainvoke``/``astream`` called
        directly). It needs a ``thread_id`` (or ``asyncrecall_key``) in ``configurable``."""
        return _EndOfRun(self._end)

    def _end(self, key: str, reason: DiscardReason) -> None:
        recall = self._recalls.pop(key, None)
        finish(self.prefetcher, key, recall, reason)
        if key in self._generated:  # a one-run key: nothing can name it again
            self._generated.discard(key)
            forget_conversation(self.prefetcher, key)

    def _new_key(self) -> str:
        key = f"run-{uuid.uuid4().hex}"
        self._generated.add(key)
        return key

    def _with_key(self, config: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
        """The config with a conversation key: its ``thread_id``, or a fresh one-run key."""
        config = dict(config or {})
        configurable = dict(config.get("configurable") or {})
        key = configurable.get(KEY_FIELD) or configurable.get("thread_id")
        if key is None:
            key = configurable[KEY_FIELD] = self._new_key()
        config["configurable"] = configurable
        return config, str(key)


class _EndOfRun(AsyncCallbackHandler):
    """Cancels the conversation's recall at the end of the root run, whatever the end."""

    def __init__(self, end: Callable[[str, DiscardReason], None]) -> None:
        self._end = end
        self._keys: dict[UUID, str] = {}

    async def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None and metadata:
            key = metadata.get(KEY_FIELD) or metadata.get("thread_id")
            if isinstance(key, str):
                self._keys[run_id] = key

    async def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._finish(run_id, None)

    async def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._finish(run_id, error)

    def _finish(self, run_id: UUID, error: BaseException | None) -> None:
        key = self._keys.pop(run_id, None)
        if key is not None:
            self._end(key, end_reason(error))


def _configured_key() -> str | None:
    """The conversation key from the run's ``configurable``, if it has one."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # pragma: no cover - hooks always run inside a graph
        return None
    key = configurable.get(KEY_FIELD) or configurable.get("thread_id")
    return str(key) if key is not None else None


def _is_human(message: Any) -> bool:
    return isinstance(message, HumanMessage) and not str(message.id or "").startswith(
        "asyncrecall-"
    )


def _blocks(content: Any) -> list[Any]:
    """A message's content as a list of content blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def with_memory_first(memory: str, content: Any) -> str | list[Any]:
    """The user's message content with the memory block first: one string when the
    message is text (a string, or text blocks only), else a text block before the
    user's blocks."""
    texts = [_plain_text(block) for block in _blocks(content)]
    if all(text is not None for text in texts):
        return "\n\n".join([memory, *(text for text in texts if text)])
    return [{"type": "text", "text": memory}, *_blocks(content)]


def _plain_text(block: Any) -> str | None:
    """The text of a block that is nothing but text (``None`` for any other)."""
    if isinstance(block, str):
        return block
    if isinstance(block, dict) and block.get("type") == "text" and set(block) <= {"type", "text"}:
        text = block.get("text")
        return text if isinstance(text, str) else None
    return None

"""Google ADK: a runner plugin that injects memory recalled in the background.

Usage::

    from asyncrecall.integrations.google_adk import AsyncRecallPlugin

    prefetcher = RecallPrefetcher(memory)
    app = App(name="app", root_agent=agent, plugins=[AsyncRecallPlugin(prefetcher)])
    runner = InMemoryRunner(app=app)
    async for event in runner.run_async(user_id="u", session_id="s1", new_message=msg):
        ...

The conversation key is the session id (pass ``key=``, a function of the invocation
context, for another). The app may call :func:`asyncrecall.integrations.start_recall`
with that key as soon as the message arrives: the run adopts that recall, since it is
for the same message text (one pending for the key but started for another message,
such as one left by a run that was cut short, is not).

* ``on_user_message_callback``: adopts the recall started for this message or starts
  one; never waits for it.
* ``before_model_callback`` (every model call of every agent of the run): if settled,
  the block is taken once: on the request that carries the user's message it goes first
  in that message (when the message is text, one text part, the block then the user's
  text: LiteLLM sends it as a string, which every chat template renders, where several
  parts become a list that some servers' templates, llama-cpp-python's, fail on; else
  a text part before the user's own); on a request that carries tool results it is a
  user message after the function responses (all of them: pairing intact). With an
  instant pass, its block can ride on the first request and the main recall's land
  after a tool round. ADK builds each request afresh from the session,
  which keeps no block, so each block is put back at its place on every later call of
  the run.
* Ends: ``after_run_callback`` (a normal end, an early close of the event stream, an
  ``abort_signal``), ``on_run_error_callback`` (an error escaped the run). ADK calls
  neither when the task driving the run is cancelled (or interrupted), so the plugin
  also watches that task: when it ends first, the recall is cancelled then.

The block is in no history the next message sends (the session keeps no block), so at
the run's end its files are taken back out of the conversation's surfaced set: the next
message's recall may offer them again, and the model is never left with memory it was
shown once and then lost.

A model error that a callback turns into a response does not end the run, so
``on_model_error_callback`` leaves the recall alone: the run's end (error or not)
comes through the callbacks above.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from asyncrecall.integrations._common import adopt_or_start, end_reason, finish, prompt_text
from asyncrecall.prefetch import InjectionPoint, MemoryBlock, PendingRecall, RecallPrefetcher

__all__ = ["AsyncRecallPlugin"]

_Anchor = tuple[Literal["first_in"], list[types.Part]] | tuple[Literal["after"], frozenset[str]]


@dataclass(eq=False)
class _Run:
    """One invocation's recall, and the block it showed (put back on every call)."""

    key: str
    recall: PendingRecall | None
    task: asyncio.Task[Any] | None = None
    #: The blocks shown, each with where it goes (the instant pass's block at the user's
    #: message, then the main recall's after a tool round, or one of them).
    shown: list[tuple[MemoryBlock, _Anchor]] = field(default_factory=list)
    watch: Callable[[asyncio.Task[Any]], None] | None = field(default=None, repr=False)


class AsyncRecallPlugin(BasePlugin):
    """Background memory recall for the agents of an ADK runner (a runner plugin).

    ``prefetcher`` holds the memory and the conversations; ``key`` maps an invocation
    to its conversation key (default: the session id).
    """

    def __init__(
        self,
        prefetcher: RecallPrefetcher,
        *,
        key: Callable[[InvocationContext], str] | None = None,
        name: str = "asyncrecall",
    ) -> None:
        super().__init__(name=name)
        self.prefetcher = prefetcher
        self.key = key
        #: The runs under way, by invocation id (each end removes its own).
        self._runs: dict[str, _Run] = {}

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        """Adopt the recall started for this message, or start one; never wait for it."""
        parts = user_message.parts or []
        query = prompt_text(parts)
        if not query or any(p.function_response for p in parts):
            return None  # a tool's answer resuming an invocation: no new user query
        invocation_id = invocation_context.invocation_id
        self._end(invocation_id, None)  # a run retried under the same id starts anew
        key = self.key(invocation_context) if self.key else invocation_context.session.id
        run = _Run(key, adopt_or_start(self.prefetcher, key, query))
        self._runs[invocation_id] = run
        task = asyncio.current_task()
        if task is not None:  # ADK calls no plugin when this task is cancelled: watch it
            run.task = task
            run.watch = lambda done: self._end(invocation_id, _how_it_ended(done))
            task.add_done_callback(run.watch)
        return None

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Put the settled block into this request (never waits); put back a block this
        run showed earlier, at the same place."""
        run = self._runs.get(callback_context.invocation_id)
        contents = llm_request.contents
        if run is None or not contents:
            return None
        last = contents[-1]
        point = _point(last)
        block = self.prefetcher.take(run.key, point) if point is not None else None
        if block is not None:
            anchor: _Anchor = (
                ("first_in", list(last.parts or []))
                if point == "user_query"
                else ("after", _response_ids(last))
            )
            run.shown.append((block, anchor))
        for shown, at in run.shown:
            _place(contents, shown.text, at)
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        """The run ended normally, its stream was closed early, or it was aborted."""
        aborted = invocation_context.is_aborted
        self._end(invocation_context.invocation_id, asyncio.CancelledError() if aborted else None)

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        """An error escaped the run."""
        self._end(invocation_context.invocation_id, error)

    def _end(self, invocation_id: str, error: BaseException | None) -> None:
        """Drop the run's recall if it is still out, and take the files of the block it
        showed back out of the surfaced set (the session keeps no block)."""
        run = self._runs.pop(invocation_id, None)
        if run is None:
            return
        if run.task is not None and run.watch is not None:
            run.task.remove_done_callback(run.watch)
        finish(self.prefetcher, run.key, run.recall, end_reason(error))
        for block, _anchor in run.shown:
            self.prefetcher.unsurface(run.key, block.paths)


def _how_it_ended(task: asyncio.Task[Any]) -> BaseException | None:
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception() or asyncio.CancelledError()  # ended with the run still open


def _point(content: types.Content) -> InjectionPoint | None:
    """What the request's last content is: tool results, the user's message, or neither."""
    if content.role != "user" or not content.parts:
        return None
    if any(p.function_response for p in content.parts):
        return "tool_result"
    if prompt_text(content.parts):
        return "user_query"
    return None


def _response_ids(content: types.Content) -> frozenset[str]:
    return frozenset(
        p.function_response.id or "" for p in content.parts or () if p.function_response
    )


def _place(contents: list[types.Content], text: str, anchor: _Anchor) -> None:
    """Put the block into this request's contents at its anchor, if the anchor is there
    and the block is not (new content objects: the session's own stay untouched)."""
    if any(_holds(c, text) for c in contents):
        return
    memory = types.Part(text=text)
    for i in range(len(contents) - 1, -1, -1):
        content = contents[i]
        if anchor[0] == "first_in" and content.role == "user" and content.parts == anchor[1]:
            contents[i] = types.Content(role="user", parts=_memory_first(text, anchor[1]))
            return
        if anchor[0] == "after" and content.role == "user" and _response_ids(content) == anchor[1]:
            contents.insert(i + 1, types.Content(role="user", parts=[memory]))
            return


def _memory_first(text: str, parts: list[types.Part]) -> list[types.Part]:
    """The user's parts with the block first: one text part when they are all text."""
    if all(_text_only(p) for p in parts):
        return [types.Part(text="\n\n".join([text, *(p.text for p in parts if p.text)]))]
    return [types.Part(text=text), *parts]


def _text_only(part: types.Part) -> bool:
    return part.text is not None and set(part.model_dump(exclude_none=True)) <= {"text"}


def _holds(content: types.Content, text: str) -> bool:
    parts: Sequence[types.Part] = content.parts or ()
    return any(p.text is not None and text in p.text for p in parts)

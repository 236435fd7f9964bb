"""The agent client: one model turn per call, with the asynchronous memory prefetch.

This is the design note's ``GeminiClient`` in Python. :meth:`AgentClient.send_message_stream`
sends one request to the main model and streams its events. On a user query it
*starts* the recall and never waits for it; the result is used at the first safe
moment, whichever comes first:

* point A, just before the user-query request: if settled, the memory block goes
  first among the system reminders;
* point B, just before each tool-result request: if settled, the memory block is
  appended *after* all the tool responses (tool responses must follow the tool
  calls directly).

A handle is consumed at most once. A new user query, :meth:`AgentClient.reset_chat`,
every early exit and the caller's cancel end it; a turn that ends normally with tool
calls pending keeps it for point B.
"""

from __future__ import annotations

import asyncio
import enum
import json
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final

from asyncrecall._cancel import CancelSignal
from asyncrecall._exceptions import AsyncRecallError
from asyncrecall.agent._events import (
    AgentEvent,
    ContentEvent,
    DiscardReason,
    ErrorEvent,
    LoopDetectedEvent,
    MaxSessionTurnsEvent,
    MaxTurnsEvent,
    MemoryDiscardedEvent,
    MemoryInjectedEvent,
    RequestRetriedEvent,
    RequestSentEvent,
    SessionTokenLimitEvent,
    StoppedEvent,
    ToolCallEvent,
    TurnCancelledEvent,
    UsageEvent,
)
from asyncrecall.agent._options import ClientOptions
from asyncrecall.agent._slot import RecallSlot
from asyncrecall.agent._stream import StreamRestarted, TurnCancelled, cancellable_stream
from asyncrecall.agent._untrusted import neutralised_response
from asyncrecall.memory import Recaller, RecallResult, Selector
from asyncrecall.models import (
    Content,
    Finished,
    FunctionCall,
    FunctionResponse,
    Model,
    Part,
    Text,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
)
from asyncrecall.prefetch import PendingRecall, PrefetchEvent

__all__ = ["AgentClient", "MessageType"]


class MessageType(enum.Enum):
    """What a request carries: the user's words or tool responses."""

    USER_QUERY = "user_query"
    TOOL_RESULT = "tool_result"


#: The modes whose recall may be held (the others wait for it before the request).
_HELD_MODES: Final = frozenset({"async", "async+lexical"})


@dataclass
class _TurnState:
    keep_prefetch: bool = False


@dataclass
class _LoopDetector:
    threshold: int
    last: str | None = None
    repeats: int = 0

    def reset(self) -> None:
        self.last, self.repeats = None, 0

    def seen(self, call: FunctionCall) -> bool:
        key = call.name + "\0" + json.dumps(call.args, sort_keys=True, default=str)
        self.repeats = self.repeats + 1 if key == self.last else 1
        self.last = key
        return self.repeats >= self.threshold


@dataclass
class _Reminders:
    extra: list[Callable[[], str | None]] = field(default_factory=list)

    def collect(self) -> list[str]:
        return [text for provider in self.extra if (text := provider())]


class AgentClient:
    """Keeps the conversation and sends one model turn at a time, with memory prefetch."""

    def __init__(
        self,
        *,
        model: Model,
        memory: Recaller | None = None,
        tools: Sequence[ToolSpec] = (),
        system_prompt: Callable[[], str] | str | None = None,
        options: ClientOptions | None = None,
        control: CancelSignal | None = None,
        instant_selector: Selector | None = None,
        reminders: Sequence[Callable[[], str | None]] = (),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.model = model
        self.memory = memory
        self.tools = tuple(tools)
        self.options = options or ClientOptions()
        #: The supervisor's stop signal (the note's "Arena" control signal).
        self.control = control or CancelSignal()
        self._system_source = system_prompt
        self._reminders = _Reminders(list(reminders))
        self._slot = RecallSlot(
            memory=memory,
            options=self.options,
            instant_selector=instant_selector,
            clock=clock,
            wall_clock=wall_clock,
        )
        self.history: list[Content] = []
        self.session_turns = 0
        self.last_prompt_tokens = 0
        # The bound on model turns the current user query started with (``turns``).
        self._turn_limit = 0
        self._loop = _LoopDetector(self.options.loop_threshold)
        self._system_prompt = self._build_system_prompt()
        #: Called by :meth:`reset_chat` (the session cancels background extraction).
        self.reset_hooks: list[Callable[[], None]] = []

    # -- public -----------------------------------------------------------------

    async def warm_memory(self) -> None:
        """Do the memory's cold work (scan, term counts) in a worker thread, so later
        lexical recalls settle inline and can ride on the first request. Optional:
        without it the first recalls run in a thread and never block the loop."""
        await self._slot.warm()

    @property
    def pending_prefetch(self) -> PendingRecall | None:
        """The recall started by the last user query and not yet used or dropped."""
        return self._slot.pending

    @property
    def surfaced_paths(self) -> frozenset[str]:
        """Memory files already shown to the model this session (relative paths)."""
        return self._slot.surfaced

    @property
    def background_tasks(self) -> frozenset[asyncio.Task[RecallResult]]:
        """Recall tasks still running (tests check none is left behind)."""
        return frozenset(self._slot.tasks)

    @property
    def system_prompt(self) -> str | None:
        return self._system_prompt

    def reset_chat(self) -> MemoryDiscardedEvent | None:
        """Clear history and the surfaced set; cancel and drop any pending recall."""
        event = self._slot.reset()
        self.history.clear()
        self._loop.reset()
        self.last_prompt_tokens = 0
        self._system_prompt = self._build_system_prompt()
        for hook in self.reset_hooks:  # e.g. the session cancels extraction
            hook()
        return event

    def answer_pending_calls(self, responses: Sequence[FunctionResponse]) -> bool:
        """Record the tool responses of the last model turn when no request carried them
        (the agent loop was left between turns). Does nothing, and returns ``False``, when
        the last turn's calls are already answered."""
        if not self.history or self.history[-1].role != "model":
            return False
        if not self.history[-1].function_calls:
            return False
        self.history.append(Content("user", tuple(map(neutralised_response, responses))))
        return True

    def discard_prefetch(self, reason: DiscardReason = "cancelled") -> MemoryDiscardedEvent | None:
        """Cancel and drop the pending recall (the agent loop calls it on an early exit)."""
        return self._slot.discard(reason)

    async def aclose(self) -> None:
        """Cancel any pending recall, then drain our tasks. Never waits for a recall."""
        await self._slot.aclose()

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """:meth:`aclose` on leaving ``async with``; the model stays open (it is the caller's)."""
        await self.aclose()

    async def send_message_stream(
        self,
        request: Sequence[Part] | str,
        cancel: CancelSignal | None = None,
        prompt_id: str | None = None,
        message_type: MessageType = MessageType.USER_QUERY,
        *,
        turns: int = 100,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Send one request to the main model and stream what happens.

        ``cancel`` is the caller's cancel signal (Ctrl-C): it stops the main request
        and is bridged to the recall's side query. ``turns`` is the number of model
        turns left for this user query (0 sends nothing). The last event of an
        abnormal end is ``terminal``.
        """
        cancel = cancel if cancel is not None else CancelSignal()
        prompt_id = prompt_id or f"prompt-{self.session_turns + 1}"
        state = _TurnState()
        try:
            async with aclosing(
                self._turn(request, cancel, prompt_id, message_type, turns, state)
            ) as events:
                async for event in events:
                    yield event
        finally:
            # Safety net for every exit that is not a normal end with tool calls
            # pending: exceptions, the caller's cancel, a consumer that stops early.
            if not state.keep_prefetch:
                self._slot.discard("cancelled")

    # -- the turn ---------------------------------------------------------------

    async def _turn(
        self,
        request: Sequence[Part] | str,
        cancel: CancelSignal,
        prompt_id: str,
        message_type: MessageType,
        turns: int,
        state: _TurnState,
    ) -> AsyncGenerator[AgentEvent, None]:
        parts: list[Part] = [Text(request)] if isinstance(request, str) else list(request)
        options = self.options
        if message_type is MessageType.TOOL_RESULT:
            # What a file or a command printed cannot pose as one of our blocks.
            parts = [_untrusted(part) for part in parts]
            # The tools ran: their responses are history whatever happens next (a limit,
            # a stop, the caller's cancel), so the next request tells the truth.
            self.history.append(Content("user", tuple(parts)))
        if message_type is MessageType.USER_QUERY:
            self.session_turns += 1
            self._turn_limit = turns
            self._loop.reset()
            self._close_dangling_calls()
            if (
                options.max_session_turns is not None
                and self.session_turns > options.max_session_turns
            ):
                async for event in self._end(
                    "limit", MaxSessionTurnsEvent(limit=options.max_session_turns)
                ):
                    yield event
                return
            query = "".join(p.text for p in parts if isinstance(p, Text))
            held = options.recall_mode in _HELD_MODES
            until_request = options.until_request if held else None
            async for event in self._slot.trigger(query, cancel, prompt_id, until_request):
                yield event

        if turns <= 0:
            async for event in self._end("limit", MaxTurnsEvent(limit=self._turn_limit)):
                yield event
            return
        limit = options.session_token_limit
        if limit is not None and self.last_prompt_tokens > limit:
            async for event in self._end(
                "limit", SessionTokenLimitEvent(tokens=self.last_prompt_tokens, limit=limit)
            ):
                yield event
            return
        stopped = self._stopped(cancel)
        if stopped is not None:
            async for event in stopped:
                yield event
            return

        injected: MemoryInjectedEvent | None = None
        taken: list[PrefetchEvent] = []
        if message_type is MessageType.USER_QUERY:
            gave_up = await self._slot.bounded_wait(cancel)
            if gave_up is not None:
                yield gave_up
            # A stop or a cancel during the wait: no request is made, none is reported.
            stopped = self._stopped(cancel)
            if stopped is not None:
                async for event in stopped:
                    yield event
                return
            reminders = self._reminders.collect()
            memory, taken = self._slot.consume("user_query")
            if memory is not None:
                block, injected = memory
                reminders.insert(0, block)  # first: before other reminders and the user's text
            parts = [*(Text(r) for r in reminders), *parts]
        elif message_type is MessageType.TOOL_RESULT:
            memory, taken = self._slot.consume("tool_result")
            if memory is not None:
                block, injected = memory
                parts = [*parts, Text(block)]  # after every tool response, never before
        for event in taken:  # the budgets' events, then memory_injected
            yield event

        content = Content("user", tuple(parts))
        if message_type is MessageType.TOOL_RESULT:
            self.history[-1] = content  # the same responses, with the memory after them
        else:
            self.history.append(content)
        yield RequestSentEvent(message_type=message_type.value, with_memory=injected is not None)

        text: list[str] = []
        calls: list[FunctionCall] = []
        stream = cancellable_stream(
            lambda: self.model.stream(
                tuple(self.history), system=self._system_prompt, tools=self.tools
            ),
            cancel,
            self._slot.request_sent,
        )
        try:
            async with aclosing(stream):
                async for item in stream:
                    if isinstance(item, TextDelta):
                        text.append(item.text)
                        yield ContentEvent(text=item.text)
                    elif isinstance(item, ToolCallReady):
                        calls.append(item.call)
                    elif isinstance(item, Usage):
                        self.last_prompt_tokens = item.prompt_tokens
                        yield UsageEvent(
                            prompt_tokens=item.prompt_tokens,
                            completion_tokens=item.completion_tokens,
                            estimated=item.estimated,
                        )
                    elif isinstance(item, StreamRestarted):  # cut off, sent again, once
                        text.clear()
                        calls.clear()
                        yield RequestRetriedEvent(
                            message_type=message_type.value, reason=item.reason
                        )
                    elif isinstance(item, Finished):
                        pass
        except TurnCancelled:
            self._undo_request(message_type, injected)
            async for event in self._end("cancelled", TurnCancelledEvent()):
                yield event
            return
        except AsyncRecallError as exc:  # the ModelError family, a HistoryError
            self._undo_request(message_type, injected)
            async for event in self._end(
                "error", ErrorEvent(message=str(exc), kind=type(exc).__name__)
            ):
                yield event
            return
        except BaseException:  # our caller's cancellation, a consumer that stopped early
            self._undo_request(message_type, injected)
            raise

        model_parts: list[Part] = [Text("".join(text))] if text else []
        # A call whose arguments are not a JSON object (a model's malformed output) is
        # kept with empty arguments, so the history stays valid for every server; the
        # tool's error result tells the model what it sent.
        model_parts.extend(
            c if isinstance(c.args, Mapping) else FunctionCall(c.id, c.name, {}) for c in calls
        )
        self.history.append(Content("model", tuple(model_parts)))
        for call in calls:
            yield ToolCallEvent(name=call.name, args=call.args, id=call.id)
        looping = next((call for call in calls if self._loop.seen(call)), None)
        if looping is not None:
            async for event in self._end(
                "error", LoopDetectedEvent(name=looping.name, repeats=self._loop.repeats)
            ):
                yield event
            return
        if calls:
            state.keep_prefetch = True  # the recall may still land at the next tool result
            return
        async for event in self._end("turn_ended"):
            yield event

    def _stopped(self, cancel: CancelSignal) -> AsyncGenerator[AgentEvent, None] | None:
        """The end of a turn the supervisor stopped or the caller cancelled, else ``None``."""
        if self.control.cancelled:
            return self._end("stopped", StoppedEvent(reason=self.control.reason or "stopped"))
        if cancel.cancelled:
            return self._end("cancelled", TurnCancelledEvent())
        return None

    async def _end(
        self, reason: DiscardReason, final: AgentEvent | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """End the turn early: cancel and drop the recall, then the event saying why."""
        discarded = self._slot.discard(reason)
        if discarded is not None:
            yield discarded
        if final is not None:
            yield final

    def _undo_request(
        self, message_type: MessageType, injected: MemoryInjectedEvent | None
    ) -> None:
        """A request that got no answer: take a user query back out of the history, and
        its memory out of the surfaced set (the model never saw it). Tool responses stay:
        the tools did run, and the memory after them will go with the next request."""
        if message_type is MessageType.TOOL_RESULT:
            return
        self.history.pop()
        if injected is not None:
            self._slot.unsurface(injected.paths)

    def _close_dangling_calls(self) -> None:
        """Answer tool calls no request answered, so the history keeps every tool call
        followed by its response. Only calls that never ran are left so: a turn ended by
        loop detection, or a caller of this client that sent a new query instead of the
        results (the agent loop records results of tools that ran, see
        :meth:`answer_pending_calls`)."""
        if not self.history or self.history[-1].role != "model":
            return
        calls = self.history[-1].function_calls
        if calls:
            note = {"error": "not run: the turn ended before this call ran"}
            self.history.append(
                Content("user", tuple(FunctionResponse(c.id, c.name, note) for c in calls))
            )

    def _build_system_prompt(self) -> str | None:
        source = self._system_source
        if callable(source):
            return source()
        return source


def _untrusted(part: Part) -> Part:
    """A tool response with the wrapper's tags neutralised; any other part as it is."""
    return neutralised_response(part) if isinstance(part, FunctionResponse) else part

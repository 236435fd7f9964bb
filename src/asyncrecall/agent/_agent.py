"""The loop around the client: model turn, tools, tool results, until the model answers."""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field
from types import TracebackType

from asyncrecall._cancel import CancelSignal
from asyncrecall.agent._client import AgentClient, MessageType
from asyncrecall.agent._events import (
    AgentEvent,
    ContentEvent,
    ErrorEvent,
    FinishedEvent,
    LoopDetectedEvent,
    MaxSessionTurnsEvent,
    MaxTurnsEvent,
    MemoryInjectedEvent,
    RequestRetriedEvent,
    SessionTokenLimitEvent,
    StoppedEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from asyncrecall.agent._extraction import ExtractionScheduler
from asyncrecall.agent._tools import ToolRegistry
from asyncrecall.models import FunctionCall, FunctionResponse, Part, PromptPrefix, Text

__all__ = ["Agent", "QueryResult"]

_prompt_ids = itertools.count(1)

_NOT_RUN = "not run: the turn ended before this call ran"
_INTERRUPTED = (
    "interrupted while the tools ran: no result was recorded, the call may or may not have "
    "taken effect"
)


def _failure(terminal: AgentEvent | None, answer: str) -> ErrorEvent | None:
    """The error of a query that ended without an answer, or ``None``.

    A model or endpoint error already is an :class:`ErrorEvent`, and the caller's cancel
    is not a failure of the agent; every other way to end without an answer is: loop
    detection, a limit, the supervisor's stop, an empty answer. No empty success.
    """
    message: str | None = None
    if terminal is None:
        if not answer.strip():
            return ErrorEvent(message="the model returned an empty answer", kind="empty_answer")
        return None
    if isinstance(terminal, LoopDetectedEvent):
        message = (
            f"loop detected: the model called {terminal.name} with the same arguments "
            f"{terminal.repeats} times in a row; the query was stopped without an answer"
        )
    elif isinstance(terminal, MaxTurnsEvent):
        message = (
            f"the query reached its limit of {terminal.limit} model turns (--max-turns) "
            "before an answer"
        )
    elif isinstance(terminal, MaxSessionTurnsEvent):
        message = f"the session reached its limit of {terminal.limit} turns (--max-session-turns)"
    elif isinstance(terminal, SessionTokenLimitEvent):
        message = (
            f"the last prompt had {terminal.tokens} tokens, over the session token limit of "
            f"{terminal.limit} (--session-token-limit)"
        )
    elif isinstance(terminal, StoppedEvent):
        message = f"stopped before an answer: {terminal.reason}"
    if message is None:  # an ErrorEvent (already emitted), or the caller's cancel
        return None
    return ErrorEvent(message=message, kind=terminal.type)


def _notes(calls: list[FunctionCall], note: str) -> list[FunctionResponse]:
    return [FunctionResponse(call.id, call.name, {"error": note}) for call in calls]


@dataclass
class QueryResult:
    """What one user query produced, gathered from its events."""

    text: str = ""
    finish_reason: str = "stop"
    error: str | None = None
    turns: int = 0
    memory_paths: list[str] = field(default_factory=list)
    events: list[AgentEvent] = field(default_factory=list)


class Agent:
    """Runs user queries to their end: the model's turns and the tools between them."""

    def __init__(self, client: AgentClient, tools: ToolRegistry, *, max_turns: int = 100) -> None:
        self.client = client
        self.tools = tools
        self.max_turns = max_turns
        self._extraction: ExtractionScheduler | None = None

    @property
    def extraction(self) -> ExtractionScheduler | None:
        """The session's background extraction (set by ``open_session``); it vets its
        writes against the same record of outside text as the tools, and its side query
        begins as the client's main turns do (their system prompt and tools)."""
        return self._extraction

    @extraction.setter
    def extraction(self, scheduler: ExtractionScheduler | None) -> None:
        if scheduler is not None:
            scheduler.taint = self.tools.taint
            scheduler.prefix = self._prompt_prefix
        self._extraction = scheduler

    def _prompt_prefix(self) -> PromptPrefix | None:
        """How the client's main turns begin now (``None`` without a system prompt:
        the side query keeps its own then)."""
        system = self.client.system_prompt
        return PromptPrefix(system, self.client.tools) if system is not None else None

    async def aclose(self) -> None:
        """End the background extraction (as :meth:`ExtractionScheduler.aclose` does: a
        running one is drained or handed on), then close the client: a pending recall is
        cancelled, never awaited. The models stay open: they are the caller's."""
        try:
            if self._extraction is not None:
                await self._extraction.aclose()
        finally:
            await self.client.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def run_query(
        self, text: str, *, cancel: CancelSignal | None = None, prompt_id: str | None = None
    ) -> AsyncGenerator[AgentEvent, None]:
        """Stream every event of one user query, ending with :class:`FinishedEvent`."""
        cancel = cancel or CancelSignal()
        prompt_id = prompt_id or f"q{next(_prompt_ids)}"
        request: list[Part] = [Text(text)]
        message_type = MessageType.USER_QUERY
        turns_left = self.max_turns
        turns = 0
        answer: list[str] = []
        memory_paths: list[str] = []
        finished = False
        # Responses for the calls of the last model turn, until a request carries them:
        # what the tools returned, or a note saying they did not (all) run.
        unsent: list[FunctionResponse] = []
        after_tools = False  # tools have returned output in this query
        watch = self.extraction.watch(text) if self.extraction is not None else None
        taint = self.tools.taint  # what the model is shown that the user did not type
        taint.user_turn(text)
        try:
            while True:
                calls: list[FunctionCall] = []
                ended: str | None = None
                terminal: AgentEvent | None = None
                before = len(answer)  # a retried request's cut text is dropped from here
                async with aclosing(
                    self.client.send_message_stream(
                        request, cancel, prompt_id, message_type, turns=turns_left
                    )
                ) as stream:
                    async for event in stream:
                        unsent = []  # the client recorded the tool responses
                        yield event
                        if isinstance(event, ContentEvent):
                            answer.append(event.text)
                        elif isinstance(event, ToolCallEvent):
                            calls.append(FunctionCall(event.id, event.name, event.args))
                        elif isinstance(event, MemoryInjectedEvent):
                            memory_paths.extend(event.paths)
                            taint.recalled(event.paths)
                        elif isinstance(event, RequestRetriedEvent):
                            del answer[before:]
                        elif event.terminal:
                            ended, terminal = event.type, event
                if ended is None and turns_left > 0:
                    turns += 1
                if ended is not None or not calls:
                    failure = _failure(terminal, "".join(answer))
                    if failure is not None:
                        yield failure
                    break
                turns_left -= 1
                unsent = _notes(calls, _NOT_RUN)
                try:
                    outcomes = await self.tools.execute(
                        calls, cancel=cancel, after_tools=after_tools, said=text
                    )
                except BaseException:
                    unsent = _notes(calls, _INTERRUPTED)
                    raise
                unsent = [outcome.response for outcome in outcomes]
                # What a tool returned is in the model's view from now on, so a later save
                # in this query is untrusted unless the user's own words attest it.
                after_tools = after_tools or any(o.call.name != "save_memory" for o in outcomes)
                for outcome in outcomes:
                    result = ToolResultEvent(
                        name=outcome.call.name,
                        ok=outcome.ok,
                        id=outcome.call.id,
                        error=outcome.error,
                    )
                    if watch is not None:  # save_memory ran -> skip extraction
                        watch.see(result)
                    yield result
                # Sent even when the cancel fired: the client records what the tools
                # did, then ends the turn without a request.
                request = list(unsent)
                message_type = MessageType.TOOL_RESULT
            finished = True
        finally:
            if not finished:
                # An exit between turns (a tool that raised, a consumer that stopped
                # early, our task cancelled) records what the tools did and ends the
                # kept recall too.
                if unsent:
                    self.client.answer_pending_calls(unsent)
                self.client.discard_prefetch("cancelled")
        done = FinishedEvent(
            reason=ended or "stop",
            turns=turns,
            text="".join(answer),
            memory_paths=tuple(memory_paths),
        )
        taint.answer(done.text)
        if watch is not None:  # a completed query schedules extraction
            watch.see(done)
        yield done

    async def ask(self, text: str, *, cancel: CancelSignal | None = None) -> QueryResult:
        """Run one user query and gather its events into a :class:`QueryResult`."""
        result = QueryResult()
        async with aclosing(self.run_query(text, cancel=cancel)) as events:
            async for event in events:
                result.events.append(event)
                if isinstance(event, FinishedEvent):
                    result.text = event.text
                    result.finish_reason = event.reason
                    result.turns = event.turns
                    result.memory_paths = list(event.memory_paths)
                elif isinstance(event, ErrorEvent):
                    result.error = event.message
        return result

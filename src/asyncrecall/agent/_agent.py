"""The loop around the client: model turn, tools, tool results, until the model answers."""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field

from asyncrecall._cancel import CancelSignal
from asyncrecall.agent._client import AgentClient, MessageType
from asyncrecall.agent._events import (
    AgentEvent,
    ContentEvent,
    ErrorEvent,
    FinishedEvent,
    MemoryInjectedEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from asyncrecall.agent._extraction import ExtractionScheduler
from asyncrecall.agent._tools import ToolRegistry
from asyncrecall.models import FunctionCall, Part, Text

__all__ = ["Agent", "QueryResult"]

_prompt_ids = itertools.count(1)


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
        self.extraction: ExtractionScheduler | None = None  # issue 14: set by open_session

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
        watch = self.extraction.watch(text) if self.extraction is not None else None  # issue 14
        try:
            while True:
                calls: list[FunctionCall] = []
                ended: str | None = None
                async with aclosing(
                    self.client.send_message_stream(
                        request, cancel, prompt_id, message_type, turns=turns_left
                    )
                ) as stream:
                    async for event in stream:
                        yield event
                        if isinstance(event, ContentEvent):
                            answer.append(event.text)
                        elif isinstance(event, ToolCallEvent):
                            calls.append(FunctionCall(event.id, event.name, event.args))
                        elif isinstance(event, MemoryInjectedEvent):
                            memory_paths.extend(event.paths)
                        elif event.terminal:
                            ended = event.type
                if ended is None and turns_left > 0:
                    turns += 1
                if ended is not None or not calls:
                    break
                turns_left -= 1
                outcomes = await self.tools.execute(calls)
                for outcome in outcomes:
                    result = ToolResultEvent(
                        name=outcome.call.name,
                        ok=outcome.ok,
                        id=outcome.call.id,
                        error=outcome.error,
                    )
                    if watch is not None:  # issue 14: save_memory ran -> skip extraction
                        watch.see(result)
                    yield result
                request = [outcome.response for outcome in outcomes]
                message_type = MessageType.TOOL_RESULT
            finished = True
        finally:
            if not finished:
                # An exit between turns (the caller's cancel while tools run, a tool
                # that raised, a consumer that stopped early) ends the kept recall too.
                self.client.discard_prefetch("cancelled")
        done = FinishedEvent(
            reason=ended or "stop",
            turns=turns,
            text="".join(answer),
            memory_paths=tuple(memory_paths),
        )
        if watch is not None:  # issue 14: a completed query schedules extraction
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

"""Events the agent emits while it works: for the CLI, for tools and for tests.

Each event is a frozen dataclass with a ``type`` (the contract's name) and
:meth:`to_dict` giving the JSON object of ``--output-format stream-json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

# The memory events live with the prefetcher; the agent emits them among its own.
from asyncrecall.prefetch._events import (
    DiscardReason,
    InjectionPoint,
    MemoryBudgetEvent,
    MemoryDiscardedEvent,
    MemoryInjectedEvent,
    MemoryInstantPreemptedEvent,
    MemoryRecallEmptyEvent,
    MemoryRecallSkippedEvent,
    MemoryRecallStartedEvent,
)
from asyncrecall.prefetch._events import (
    EventBase as _Event,
)

__all__ = [
    "AgentEvent",
    "ContentEvent",
    "DiscardReason",
    "ErrorEvent",
    "FinishedEvent",
    "InjectionPoint",
    "LoopDetectedEvent",
    "MaxSessionTurnsEvent",
    "MaxTurnsEvent",
    "MemoryBudgetEvent",
    "MemoryDiscardedEvent",
    "MemoryInjectedEvent",
    "MemoryInstantPreemptedEvent",
    "MemoryRecallEmptyEvent",
    "MemoryRecallSkippedEvent",
    "MemoryRecallStartedEvent",
    "RequestRetriedEvent",
    "RequestSentEvent",
    "SessionTokenLimitEvent",
    "StoppedEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnCancelledEvent",
    "UsageEvent",
]


@dataclass(frozen=True, slots=True)
class ContentEvent(_Event):
    """A text delta of the model's answer."""

    type: ClassVar[str] = "content"
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallEvent(_Event):
    """The model asked for a tool call."""

    type: ClassVar[str] = "tool_call"
    name: str
    args: Mapping[str, Any]
    id: str


@dataclass(frozen=True, slots=True)
class ToolResultEvent(_Event):
    """A tool call finished; ``ok`` is false when it returned an error."""

    type: ClassVar[str] = "tool_result"
    name: str
    ok: bool
    id: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RequestSentEvent(_Event):
    """A main-model request is about to go on the wire (for timelines and benchmarks)."""

    type: ClassVar[str] = "request_sent"
    message_type: str
    with_memory: bool


@dataclass(frozen=True, slots=True)
class RequestRetriedEvent(_Event):
    """The server cut the main request's stream to serve our own side query (a
    one-request-at-a-time server); the request is sent again, once. Text streamed
    before this event belongs to the cut answer: drop it."""

    type: ClassVar[str] = "request_retried"
    message_type: str
    reason: str


@dataclass(frozen=True, slots=True)
class UsageEvent(_Event):
    """Token counts for the last request; ``estimated`` when the endpoint reported none."""

    type: ClassVar[str] = "usage"
    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class MaxSessionTurnsEvent(_Event):
    """The session turn limit is reached: nothing more is sent."""

    type: ClassVar[str] = "max_session_turns"
    terminal: ClassVar[bool] = True
    limit: int


@dataclass(frozen=True, slots=True)
class MaxTurnsEvent(_Event):
    """The bound on model turns for this user query is reached."""

    type: ClassVar[str] = "max_turns"
    terminal: ClassVar[bool] = True
    limit: int


@dataclass(frozen=True, slots=True)
class SessionTokenLimitEvent(_Event):
    """The last prompt's token count is over the session token limit."""

    type: ClassVar[str] = "session_token_limit_exceeded"
    terminal: ClassVar[bool] = True
    tokens: int
    limit: int


@dataclass(frozen=True, slots=True)
class StoppedEvent(_Event):
    """An external control signal told the agent to stop."""

    type: ClassVar[str] = "stopped"
    terminal: ClassVar[bool] = True
    reason: str


@dataclass(frozen=True, slots=True)
class LoopDetectedEvent(_Event):
    """The model repeated the same tool call with the same arguments."""

    type: ClassVar[str] = "loop_detected"
    terminal: ClassVar[bool] = True
    name: str
    repeats: int


@dataclass(frozen=True, slots=True)
class TurnCancelledEvent(_Event):
    """The caller cancelled the turn (Ctrl-C, Esc, a cancel signal)."""

    type: ClassVar[str] = "cancelled"
    terminal: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class ErrorEvent(_Event):
    """The query failed; ``message`` is one line a user can act on.

    ``kind`` says how: the exception's name for a model or endpoint error
    (``ModelServerError`` ...), ``empty_answer``, or the event that stopped the query
    (``loop_detected``, ``max_turns``, ``max_session_turns``,
    ``session_token_limit_exceeded``, ``stopped``).
    """

    type: ClassVar[str] = "error"
    terminal: ClassVar[bool] = True
    message: str
    kind: str = "model"


@dataclass(frozen=True, slots=True)
class FinishedEvent(_Event):
    """The user query is over; ``reason`` says how (``stop`` when the model answered)."""

    type: ClassVar[str] = "finished"
    reason: str
    turns: int = 0
    text: str = ""
    memory_paths: tuple[str, ...] = field(default=())


AgentEvent: TypeAlias = (
    ContentEvent
    | ToolCallEvent
    | ToolResultEvent
    | RequestSentEvent
    | RequestRetriedEvent
    | UsageEvent
    | MemoryRecallStartedEvent
    | MemoryInjectedEvent
    | MemoryDiscardedEvent
    | MemoryRecallEmptyEvent
    | MemoryRecallSkippedEvent
    | MemoryBudgetEvent
    | MemoryInstantPreemptedEvent
    | MaxSessionTurnsEvent
    | MaxTurnsEvent
    | SessionTokenLimitEvent
    | StoppedEvent
    | LoopDetectedEvent
    | TurnCancelledEvent
    | ErrorEvent
    | FinishedEvent
)

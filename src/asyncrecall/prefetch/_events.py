"""The memory telemetry events: a recall started, was injected, or was dropped.

Each event is a frozen dataclass with a ``type`` (the contract's name) and
:meth:`to_dict` giving the JSON object of ``--output-format stream-json``. The agent
re-exports them among its own events; :class:`~asyncrecall.prefetch.RecallPrefetcher`
hands them to its ``on_event`` callback.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

__all__ = [
    "Budget",
    "DiscardReason",
    "EventBase",
    "InjectionPoint",
    "MemoryBudgetEvent",
    "MemoryDiscardedEvent",
    "MemoryInjectedEvent",
    "MemoryInstantPreemptedEvent",
    "MemoryRecallEmptyEvent",
    "MemoryRecallSkippedEvent",
    "MemoryRecallStartedEvent",
    "PrefetchEvent",
    "SkipReason",
]

InjectionPoint: TypeAlias = Literal["user_query", "tool_result"]
"""Where a memory block went: the user-query request, or a tool-result request."""

DiscardReason: TypeAlias = Literal[
    "superseded", "cancelled", "turn_ended", "reset", "limit", "stopped", "error", "closed"
]
"""Why a recall was dropped unused."""

SkipReason: TypeAlias = Literal["nothing_to_recall", "session_budget"]
"""Why no recall started for a user message: it holds nothing to recall (one word, a
bare "yes"/"ok"), or the conversation spent its session byte budget."""

Budget: TypeAlias = Literal["message_files", "session_bytes", "file", "manifest"]
"""Which budget of recall left something out: the files per user message, the bytes
per session, the per-file cap (cut, with a note naming the file), or the model
selector's manifest."""


@dataclass(frozen=True, slots=True)
class EventBase:
    """A ``type`` and :meth:`to_dict` (for stream-json); the agent's events share it."""

    type: ClassVar[str]
    #: Whether the event ends a user query abnormally (memory events never do).
    terminal: ClassVar[bool] = False

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            data[item.name] = list(value) if isinstance(value, tuple) else value
        return data


@dataclass(frozen=True, slots=True)
class MemoryRecallStartedEvent(EventBase):
    """A recall started in the background for this user query."""

    type: ClassVar[str] = "memory_recall_started"
    prompt_id: str


@dataclass(frozen=True, slots=True)
class MemoryInjectedEvent(EventBase):
    """A settled recall's memory block went into a request."""

    type: ClassVar[str] = "memory_injected"
    point: InjectionPoint
    paths: tuple[str, ...]
    recall_ms: float
    strategy: str


@dataclass(frozen=True, slots=True)
class MemoryDiscardedEvent(EventBase):
    """A recall was dropped unused (cancelled if it was still running)."""

    type: ClassVar[str] = "memory_discarded"
    reason: DiscardReason
    settled: bool


@dataclass(frozen=True, slots=True)
class MemoryRecallSkippedEvent(EventBase):
    """No recall started for this user message (``reason`` says why; ``detail``: the
    same reason in the codes of ``RecallResult.reason``, ``too_short`` for a message
    with nothing to recall, ``session_budget`` for the spent budget)."""

    type: ClassVar[str] = "memory_recall_skipped"
    prompt_id: str
    reason: SkipReason
    detail: str = ""

    def __post_init__(self) -> None:
        if not self.detail:
            code = "too_short" if self.reason == "nothing_to_recall" else self.reason
            object.__setattr__(self, "detail", code)


@dataclass(frozen=True, slots=True)
class MemoryBudgetEvent(EventBase):
    """A budget left something out of a memory block, or cut it.

    ``limit`` is the budget (files, bytes, characters or candidates); ``paths`` the
    files it dropped (``message_files``, ``session_bytes``) or cut (``file``: the block
    names each so the model can read the rest), empty for ``manifest``; ``count`` how
    many files that is (for ``manifest``: the candidates the side query did not list).
    """

    type: ClassVar[str] = "memory_budget"
    budget: Budget
    limit: int
    paths: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class MemoryInstantPreemptedEvent(EventBase):
    """At the user-query point both were ready: the settled main recall (the model's
    pick) went in, and the instant pass's files (``paths``) did not."""

    type: ClassVar[str] = "memory_instant_preempted"
    paths: tuple[str, ...]
    strategy: str


@dataclass(frozen=True, slots=True)
class MemoryRecallEmptyEvent(EventBase):
    """A recall settled and was taken with no file for the request: ``reason`` says
    why, in the codes of ``RecallResult.reason`` (``no_match``, ``below_threshold``,
    ``names_unknown``, ``chose_none`` ...), or ``already_shown`` when every file it
    selected was already in the conversation. ``strategy``: the selector's, with
    ``instant-`` for the instant pass (said at the user-query point it rides on)."""

    type: ClassVar[str] = "memory_recall_empty"
    prompt_id: str
    reason: str
    strategy: str


PrefetchEvent: TypeAlias = (
    MemoryRecallStartedEvent
    | MemoryInjectedEvent
    | MemoryRecallEmptyEvent
    | MemoryDiscardedEvent
    | MemoryRecallSkippedEvent
    | MemoryBudgetEvent
    | MemoryInstantPreemptedEvent
)
"""What :class:`~asyncrecall.prefetch.RecallPrefetcher` reports to ``on_event``."""

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
    "DiscardReason",
    "EventBase",
    "InjectionPoint",
    "MemoryDiscardedEvent",
    "MemoryInjectedEvent",
    "MemoryRecallStartedEvent",
    "PrefetchEvent",
]

InjectionPoint: TypeAlias = Literal["user_query", "tool_result"]
"""Where a memory block went: the user-query request, or a tool-result request."""

DiscardReason: TypeAlias = Literal[
    "superseded", "cancelled", "turn_ended", "reset", "limit", "stopped", "error", "closed"
]
"""Why a recall was dropped unused."""


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


PrefetchEvent: TypeAlias = MemoryRecallStartedEvent | MemoryInjectedEvent | MemoryDiscardedEvent
"""What :class:`~asyncrecall.prefetch.RecallPrefetcher` reports to ``on_event``."""

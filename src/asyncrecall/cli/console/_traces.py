"""Recall traces: the event log's lines grouped by user message, newest first."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asyncrecall.cli._event_log import read_events

__all__ = ["Delivery", "Trace", "read_traces"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """A memory block that went into a request."""

    point: str
    paths: tuple[str, ...]
    recall_ms: float
    strategy: str
    at: float


@dataclass(slots=True)
class Trace:
    """What the recall did for one user message."""

    session: str
    query: int
    text: str = ""
    at: float = 0.0
    started_at: float | None = None
    settled_at: float | None = None
    deliveries: list[Delivery] = field(default_factory=list)
    #: Why nothing (or not everything) was delivered: a skip or a discard, in words.
    misses: list[str] = field(default_factory=list)
    #: Files a budget left out or cut, and the instant pass's files the model's pick replaced.
    notes: list[str] = field(default_factory=list)
    requests: int = 0
    requests_with_memory: int = 0
    finished: str = ""

    @property
    def delivered(self) -> bool:
        return bool(self.deliveries)

    @property
    def selected(self) -> list[str]:
        seen: dict[str, None] = {}
        for delivery in self.deliveries:
            seen.update(dict.fromkeys(delivery.paths))
        return list(seen)

    @property
    def outcome(self) -> str:
        """Where the memory went, or why it did not, in a few words."""
        if self.deliveries:
            return ", ".join(sorted({d.point for d in self.deliveries}))
        if self.misses:
            return "; ".join(self.misses)
        if self.started_at is None:
            return "no recall started"
        return "nothing selected, or the recall settled after the last request"


def read_traces(path: Path, *, limit: int = 50) -> list[Trace]:
    """The newest ``limit`` traces of the log at ``path`` (none when it is absent)."""
    return _group(read_events(path))[-limit:][::-1]


def _group(events: Iterable[dict[str, Any]]) -> list[Trace]:
    traces: dict[tuple[str, int], Trace] = {}
    for event in events:
        key = (str(event.get("session", "")), _int(event.get("query")))
        trace = traces.get(key)
        if trace is None:
            trace = traces[key] = Trace(session=key[0], query=key[1], at=_float(event.get("at")))
        _add(trace, event)
    return sorted(traces.values(), key=lambda t: t.at)


def _add(trace: Trace, event: dict[str, Any]) -> None:
    kind, at = event["type"], _float(event.get("at"))
    if kind == "user_message":
        trace.text, trace.at = str(event.get("text", "")), at
    elif kind == "memory_recall_started":
        trace.started_at = at
    elif kind == "memory_injected":
        recall_ms = _float(event.get("recall_ms"))
        paths = tuple(str(p) for p in event.get("paths") or ())
        point, strategy = str(event.get("point", "")), str(event.get("strategy", ""))
        trace.deliveries.append(Delivery(point, paths, recall_ms, strategy, at))
        if trace.started_at is not None and trace.settled_at is None:
            trace.settled_at = trace.started_at + recall_ms / 1000
    elif kind == "memory_recall_skipped":
        trace.misses.append(f"skipped: {event.get('detail') or event.get('reason')}")
    elif kind == "memory_recall_empty":
        trace.misses.append(f"{event.get('strategy')}: nothing ({event.get('reason')})")
    elif kind == "memory_discarded":
        state = "settled" if event.get("settled") else "still running"
        trace.misses.append(f"discarded ({event.get('reason')}, {state})")
    elif kind == "memory_budget":
        left = ", ".join(str(p) for p in event.get("paths") or ())
        trace.notes.append(f"budget {event.get('budget')} ({event.get('limit')}): {left}")
    elif kind == "memory_instant_preempted":
        instant = ", ".join(str(p) for p in event.get("paths") or ())
        trace.notes.append(f"instant pass replaced by the model's pick: {instant}")
    elif kind == "request_sent":
        trace.requests += 1
        trace.requests_with_memory += bool(event.get("with_memory"))
    elif kind in ("finished", "error", "cancelled"):
        trace.finished = str(event.get("reason") or event.get("kind") or kind)


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0

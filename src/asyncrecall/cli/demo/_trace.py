"""Timing one user query from the agent's own events: the demo's probe (the benchmarks
of ``asyncrecall-bench`` time their queries with it too).

:func:`trace_query` runs a query through :meth:`Agent.run_query` and stamps, in
milliseconds from the moment the query is handed to the agent:

* ``first_request_ms`` — the first :class:`RequestSentEvent` (the user-query request
  is about to go on the wire): the latency recall added before the main model could
  start, plus the client's own sub-millisecond path;
* where memory first landed (``user_query``, ``tool_result``, or ``missed``) and when;
* when the recall started and settled, and how (read from the client's public
  ``pending_prefetch`` handle, after the query: no waiting on the critical path);
* when the query finished.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from asyncrecall.agent import (
    Agent,
    FinishedEvent,
    MemoryDiscardedEvent,
    MemoryInjectedEvent,
    MemoryRecallStartedEvent,
    RequestSentEvent,
    ToolResultEvent,
)
from asyncrecall.prefetch import PendingRecall

__all__ = ["Landed", "QueryTrace", "trace_query"]

Landed: TypeAlias = Literal["user_query", "tool_result", "missed"]

_DRAIN_GUARD_S = 2.0


@dataclass
class QueryTrace:
    """What happened to one user query, in milliseconds from its start."""

    text: str
    first_request_ms: float = math.nan
    finished_ms: float = math.nan
    finish_reason: str = ""
    tool_rounds: int = 0
    #: Main-model requests sent for this query.
    requests: int = 0
    landed: Landed = "missed"
    landed_ms: float | None = None
    #: Strategy of the first memory block (``model``, ``lexical``, ``instant-lexical``).
    strategy: str | None = None
    paths: tuple[str, ...] = ()
    recall_started_ms: float | None = None
    recall_settled_ms: float | None = None
    #: ``model``/``lexical``... (what the recall returned), ``empty``, or ``cancelled``.
    recall_outcome: str | None = None
    #: Why the recall fell back to another selector (the blocking baseline's timeout).
    fallback_reason: str | None = None
    discarded: str | None = None
    injections: list[tuple[str, str, float]] = field(default_factory=list)

    @property
    def delivered(self) -> bool:
        return self.landed != "missed"


async def trace_query(
    agent: Agent, text: str, *, clock: Callable[[], float] = time.monotonic
) -> QueryTrace:
    """Run ``text`` through ``agent`` and return its trace.

    ``clock`` must be the clock of the client's prefetch handles (``time.monotonic``
    by default on both sides).
    """
    trace = QueryTrace(text)
    handle: PendingRecall | None = None
    start = clock()

    def ms(at: float) -> float:
        return (at - start) * 1000.0

    async with aclosing(agent.run_query(text)) as events:
        async for event in events:
            now = ms(clock())
            if isinstance(event, MemoryRecallStartedEvent):
                handle = agent.client.pending_prefetch
            elif isinstance(event, RequestSentEvent):
                trace.requests += 1
                if math.isnan(trace.first_request_ms):
                    trace.first_request_ms = now
            elif isinstance(event, MemoryInjectedEvent):
                trace.injections.append((event.point, event.strategy, now))
                if trace.landed == "missed":
                    trace.landed, trace.landed_ms = event.point, now
                    trace.strategy, trace.paths = event.strategy, event.paths
            elif isinstance(event, MemoryDiscardedEvent):
                trace.discarded = event.reason
            elif isinstance(event, ToolResultEvent):
                trace.tool_rounds += 1  # counted per call; one call per round here
            elif isinstance(event, FinishedEvent):
                trace.finished_ms = now
                trace.finish_reason = event.reason
    if handle is not None:
        await _describe_recall(trace, handle, ms)
    return trace


async def _describe_recall(
    trace: QueryTrace, handle: PendingRecall, ms: Callable[[float], float]
) -> None:
    """Fill the recall's fields; a discarded recall is drained first (after the query)."""
    if not handle.task.done():  # cancelled at the end of the turn: let it finish
        await asyncio.wait({handle.task}, timeout=_DRAIN_GUARD_S)
    trace.recall_started_ms = ms(handle.started_at)
    if handle.settled_at is not None:
        trace.recall_settled_ms = ms(handle.settled_at)
    task = handle.task
    if not task.done():
        trace.recall_outcome = "running"
    elif task.cancelled():
        trace.recall_outcome = "cancelled"
    else:
        result = task.result()
        trace.recall_outcome = result.strategy if result.selected else "empty"
        trace.fallback_reason = result.fallback_reason

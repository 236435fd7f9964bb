"""The agent client: turns, tools, reminders, limits and the memory prefetch.

This package joins :mod:`asyncrecall.models` and :mod:`asyncrecall.memory`. Its events
are the agent's own (:data:`AgentEvent` is the union of all it emits) and the
extraction's; the memory events it emits among them (``MemoryInjectedEvent`` ...) are
the prefetcher's, exported by :mod:`asyncrecall.prefetch`.
"""

from __future__ import annotations

# A name imported ``as`` itself is not public: other layers and the tests take it from
# here, but it is out of ``__all__`` and may change without notice.
from asyncrecall.agent._agent import Agent, QueryResult
from asyncrecall.agent._client import AgentClient, MessageType
from asyncrecall.agent._events import (
    AgentEvent,
    ContentEvent,
    ErrorEvent,
    FinishedEvent,
    LoopDetectedEvent,
    MaxSessionTurnsEvent,
    MaxTurnsEvent,
    RequestRetriedEvent,
    RequestSentEvent,
    SessionTokenLimitEvent,
    StoppedEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnCancelledEvent,
    UsageEvent,
)
from asyncrecall.agent._extraction import ExtractionScheduler
from asyncrecall.agent._extraction_events import (
    ExtractionEvent,
    MemoryConsolidatedEvent,
    MemoryExtractedEvent,
    MemoryExtractionSkippedEvent,
    MemoryExtractionStartedEvent,
)
from asyncrecall.agent._options import ClientOptions, RecallMode
from asyncrecall.agent._tools import ToolOutcome, ToolRegistry
from asyncrecall.prefetch import MemoryBudgetEvent as MemoryBudgetEvent
from asyncrecall.prefetch import MemoryDiscardedEvent as MemoryDiscardedEvent
from asyncrecall.prefetch import MemoryInjectedEvent as MemoryInjectedEvent
from asyncrecall.prefetch import MemoryInstantPreemptedEvent as MemoryInstantPreemptedEvent
from asyncrecall.prefetch import MemoryRecallEmptyEvent as MemoryRecallEmptyEvent
from asyncrecall.prefetch import MemoryRecallSkippedEvent as MemoryRecallSkippedEvent
from asyncrecall.prefetch import MemoryRecallStartedEvent as MemoryRecallStartedEvent

__all__ = [
    "Agent",
    "AgentClient",
    "AgentEvent",
    "ClientOptions",
    "ContentEvent",
    "ErrorEvent",
    "ExtractionEvent",
    "ExtractionScheduler",
    "FinishedEvent",
    "LoopDetectedEvent",
    "MaxSessionTurnsEvent",
    "MaxTurnsEvent",
    "MemoryConsolidatedEvent",
    "MemoryExtractedEvent",
    "MemoryExtractionSkippedEvent",
    "MemoryExtractionStartedEvent",
    "MessageType",
    "QueryResult",
    "RecallMode",
    "RequestRetriedEvent",
    "RequestSentEvent",
    "SessionTokenLimitEvent",
    "StoppedEvent",
    "ToolCallEvent",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResultEvent",
    "TurnCancelledEvent",
    "UsageEvent",
]

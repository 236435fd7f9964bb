"""The agent client: turns, tools, reminders, limits and the memory prefetch.

This package joins :mod:`asyncrecall.models` and :mod:`asyncrecall.memory`.
"""

from __future__ import annotations

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
    MemoryBudgetEvent,
    MemoryDiscardedEvent,
    MemoryInjectedEvent,
    MemoryInstantPreemptedEvent,
    MemoryRecallSkippedEvent,
    MemoryRecallStartedEvent,
    RequestRetriedEvent,
    RequestSentEvent,
    SessionTokenLimitEvent,
    StoppedEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnCancelledEvent,
    UsageEvent,
)
from asyncrecall.agent._extraction import ExtractionScheduler  # issue 14
from asyncrecall.agent._extraction_events import (  # issue 14
    ExtractionEvent,
    MemoryConsolidatedEvent,
    MemoryExtractedEvent,
    MemoryExtractionSkippedEvent,
    MemoryExtractionStartedEvent,
)
from asyncrecall.agent._options import ClientOptions, RecallMode
from asyncrecall.agent._tools import ToolOutcome, ToolRegistry

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
    "MemoryBudgetEvent",
    "MemoryConsolidatedEvent",
    "MemoryDiscardedEvent",
    "MemoryExtractedEvent",
    "MemoryExtractionSkippedEvent",
    "MemoryExtractionStartedEvent",
    "MemoryInjectedEvent",
    "MemoryInstantPreemptedEvent",
    "MemoryRecallSkippedEvent",
    "MemoryRecallStartedEvent",
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

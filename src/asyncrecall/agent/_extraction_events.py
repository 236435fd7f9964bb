"""The events of background memory extraction.

They are not part of a user query's event stream (extraction runs between and after
queries): :class:`~asyncrecall.agent.ExtractionScheduler` hands them to its listeners.
Same shape as the agent's events: a ``type`` and :meth:`to_dict` for stream-json.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, TypeAlias

from asyncrecall.prefetch._events import EventBase as _Event

__all__ = [
    "ExtractionEvent",
    "ExtractionSkipReason",
    "MemoryConsolidatedEvent",
    "MemoryExtractedEvent",
    "MemoryExtractionSkippedEvent",
    "MemoryExtractionStartedEvent",
]

ExtractionSkipReason: TypeAlias = Literal[
    "saved_memory",  # the main agent called save_memory in that query
    "superseded",  # a trailing request replaced by a newer one
    "nothing_new",  # no unprocessed turn (the model was not asked)
    "cancelled",  # reset, the session's cancel, or exit after the drain time
    "handed_off",  # exit: the extraction goes on in a worker process (see _handoff)
    "preempted",  # a main turn needed the embedded engine; the turns wait for the next run
    "error",  # the side model failed or answered something unusable; see detail
]


@dataclass(frozen=True, slots=True)
class MemoryExtractionStartedEvent(_Event):
    """An extraction started over the session's turns before offset ``end``."""

    type: ClassVar[str] = "memory_extraction_started"
    session_id: str
    end: int


@dataclass(frozen=True, slots=True)
class MemoryExtractedEvent(_Event):
    """An extraction committed: the files it created and updated (relative paths)."""

    type: ClassVar[str] = "memory_extracted"
    session_id: str
    paths: tuple[str, ...]
    created: tuple[str, ...]
    updated: tuple[str, ...]
    refused: int
    start: int
    end: int
    elapsed_ms: float


@dataclass(frozen=True, slots=True)
class MemoryExtractionSkippedEvent(_Event):
    """An extraction request that wrote nothing, and why."""

    type: ClassVar[str] = "memory_extraction_skipped"
    reason: ExtractionSkipReason
    detail: str = ""


@dataclass(frozen=True, slots=True)
class MemoryConsolidatedEvent(_Event):
    """An automatic consolidation ran after an extraction (24 h and 5 sessions passed)."""

    type: ClassVar[str] = "memory_consolidated"
    written: tuple[str, ...]
    removed: tuple[str, ...]
    actions: int


ExtractionEvent: TypeAlias = (
    MemoryExtractionStartedEvent
    | MemoryExtractedEvent
    | MemoryExtractionSkippedEvent
    | MemoryConsolidatedEvent
)

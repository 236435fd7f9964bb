"""Where extraction and consolidation keep their state, for any memory store.

Extraction and consolidation speak to a store through :class:`ExtractionBackend`: the
store's memories (``save`` with provenance, ``forget``), the provenance of a memory
(``source_offsets``), and the per-session state (the cursor and the write journal, see
:mod:`asyncrecall.memory.extraction._state`). Two backends:

- ``FolderBackend`` (``folder/_extraction``), for :class:`~asyncrecall.memory.MemoryStore`:
  provenance in each topic file's front matter, state in ``<memory folder>.state/``;
- ``PostgresBackend`` (``postgres/_extraction``), for
  :class:`~asyncrecall.memory.PostgresMemoryStore`: provenance and state in tables of
  the same database, per namespace.

Each store hands out its own (``extraction_backend()``, ``consolidation_gate()``), so
nothing here imports a store; :func:`extraction_backend` and :func:`consolidation_gate`
ask it. The protocol the extractor runs
is the same on both: journal, then the memory writes (idempotent), then :meth:`commit`
(the cursor moves and the journal is dropped), so nothing is processed twice and
nothing is skipped, whatever the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final, Protocol

from asyncrecall.memory._history import HistoryRecord
from asyncrecall.memory._precondition import ANYTHING, Expected
from asyncrecall.memory._provenance import Source, SourceOffsets
from asyncrecall.memory._store_protocol import MemoryStoreProtocol
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.extraction._state import (
    Journal,
)

__all__ = [
    "LOCK_STALE_S",
    "MIN_HOURS",
    "MIN_SESSIONS",
    "ExtractionBackend",
    "Gate",
    "consolidation_gate",
    "extraction_backend",
]


class ExtractionBackend(Protocol):
    """What extraction and consolidation need of a store (all synchronous: the callers
    run them in worker threads)."""

    @property
    def store(self) -> MemoryStoreProtocol:
        """The store the memories are written to."""
        ...

    @property
    def files_root(self) -> Path | None:
        """The memory folder when memories are files (proposed paths are then checked
        against links too); ``None`` for a database, where the names' rules suffice."""
        ...

    @property
    def key(self) -> str:
        """One string per memory place (folder, or database and namespace): single flight."""
        ...

    def cursor(self, session_id: str) -> int:
        """The session's processed offset (0 when it never extracted)."""
        ...

    def journal(self, session_id: str) -> Journal | None:
        """The pending journal a crashed extraction of this session left, or ``None``."""
        ...

    def stale_journals(self, older_than: float) -> list[tuple[Journal, float]]:
        """Journals written over ``older_than`` seconds ago (their writers died: a live
        one commits within milliseconds), with when each was written (epoch seconds)."""
        ...

    def write_journal(self, journal: Journal) -> None:
        """Persist ``journal`` (atomically) before any of its writes."""
        ...

    def commit(self, journal: Journal) -> None:
        """Move the cursor to ``journal.end`` and drop the journal (never backwards)."""
        ...

    def end_session(self, session_id: str) -> bool:
        """The session will never extract again (its process ended and what it owed is
        extracted): drop its cursor, unless a journal of it still waits to be rolled
        forward. Returns whether it was dropped (or there was none)."""
        ...

    def get(self, name: str) -> MemoryDoc | None:
        """The memory called exactly ``name``, as it is now (``None``: there is none)."""
        ...

    def save(
        self,
        name: str,
        description: str,
        type: str,
        content: str,
        source_offsets: SourceOffsets | None,
        *,
        expected: Expected = ANYTHING,
        origin: str = "extraction",
        write_id: str = "",
        sources: Sequence[Source] | None = None,
    ) -> MemoryDoc:
        """Create or update the memory ``name`` with its provenance (idempotent);
        ``sources`` are added to its ``provenance`` (see ``_provenance``).

        ``expected`` is the memory as the writer read it (``None``: absent); when it no
        longer holds, :class:`~asyncrecall.MemoryConflictError` and nothing written."""
        ...

    def forget(
        self,
        name_or_rel_path: str,
        *,
        expected: Expected = ANYTHING,
        origin: str = "extraction",
        write_id: str = "",
    ) -> MemoryDoc:
        """Remove a memory (and its provenance), under the same precondition as :meth:`save`;
        ``write_id`` goes into the history record."""
        ...

    def provenance(self, doc: MemoryDoc) -> tuple[Source, ...]:
        """Where ``doc``'s writes came from (``_provenance``)."""
        ...

    def locked(self) -> AbstractContextManager[None]:
        """Hold the store's write lock across several writes where it has one (a folder); a
        database's writes are each one transaction, and this holds nothing."""
        ...

    def last_seq(self, name: str) -> int:
        """The number of ``name``'s newest history record (0: never written)."""
        ...

    def history_after(self, name: str, seq: int) -> list[HistoryRecord]:
        """``name``'s history records numbered above ``seq``, oldest first."""
        ...

    def source_offsets(self, doc: MemoryDoc) -> dict[str, tuple[int, ...]]:
        """A memory's provenance (``{}`` when it has none)."""
        ...

    def trim_index(self) -> bool:
        """Keep the index within its limits; True when it was cut."""
        ...

    def repair_index(self) -> bool:
        """List every memory in the index, drop lines to memories that are gone (a crash
        between a memory's write and its index line's); True when it changed."""
        ...


def extraction_backend(
    store: MemoryStoreProtocol, *, state_dir: Path | None = None
) -> ExtractionBackend:
    """The backend of ``store``, which the store's own wing implements (its
    ``extraction_backend()``: a folder's, a PostgreSQL store's).

    ``state_dir`` (folder only) replaces ``<memory folder>.state``. A store without one
    is a :class:`TypeError`: extraction needs to keep its cursor where the memories live.
    """
    own = getattr(store, "extraction_backend", None)
    if not callable(own):
        raise TypeError(f"memory extraction does not support the store {store!r}")
    backend: ExtractionBackend = own(state_dir=state_dir)
    return backend


# -- automatic consolidation: when it is due, one at a time ----------------------------------

#: An automatic consolidation runs once this many hours and sessions have passed.
MIN_HOURS: Final = 24.0
MIN_SESSIONS: Final = 5
#: A database's consolidation lock this old (seconds) was left by a crashed run.
LOCK_STALE_S: Final = 3600.0


class Gate(Protocol):
    """When an automatic consolidation is due, and its lock (a folder's or a database's)."""

    def note_session(self) -> None: ...

    def due(self) -> bool: ...

    def acquire(self) -> bool: ...

    def release(self, *, completed: bool) -> None: ...


def consolidation_gate(store: MemoryStoreProtocol, **kwargs: Any) -> Gate:
    """The gate of ``store``, which its wing implements (its ``consolidation_gate()``:
    files beside a folder, a row in a database; ``kwargs``: ``min_hours``,
    ``min_sessions``, ``clock``)."""
    own = getattr(store, "consolidation_gate", None)
    if not callable(own):
        raise TypeError(f"memory consolidation does not support the store {store!r}")
    gate: Gate = own(**kwargs)
    return gate

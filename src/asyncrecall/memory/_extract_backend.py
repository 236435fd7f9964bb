"""Where extraction and consolidation keep their state, for any memory store.

Extraction and consolidation speak to a store through :class:`ExtractionBackend`: the
store's memories (``save`` with provenance, ``forget``), the provenance of a memory
(``source_offsets``), and the per-session state (the cursor and the write journal, see
:mod:`asyncrecall.memory._extract_state`). Two backends:

- :class:`FolderBackend`, for :class:`~asyncrecall.memory.MemoryStore`: provenance in
  each topic file's front matter, state in ``<memory folder>.state/`` beside the folder;
- ``PostgresBackend`` (``_postgres_extract``), for
  :class:`~asyncrecall.memory.PostgresMemoryStore`: provenance and state in tables of
  the same database, per namespace.

:func:`extraction_backend` picks the one a store needs. The protocol the extractor runs
is the same on both: journal, then the memory writes (idempotent), then :meth:`commit`
(the cursor moves and the journal is dropped), so nothing is processed twice and
nothing is skipped, whatever the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final, Protocol

from asyncrecall.memory._extract_state import (
    SOURCE_OFFSETS_KEY,
    ExtractionState,
    Journal,
    default_state_dir,
)
from asyncrecall.memory._history import HistoryRecord
from asyncrecall.memory._precondition import ANYTHING, Expected
from asyncrecall.memory._store import MemoryStore
from asyncrecall.memory._store_protocol import MemoryStoreProtocol
from asyncrecall.memory._types import MemoryDoc

__all__ = [
    "ExtractionBackend",
    "FolderBackend",
    "SourceOffsets",
    "extraction_backend",
    "read_source_offsets",
]

#: ``{session id: [transcript offsets]}``: the turns a memory came from.
SourceOffsets = Mapping[str, list[int]]

_POSTGRES_STORE: Final = "PostgresMemoryStore"


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
    ) -> MemoryDoc:
        """Create or update the memory ``name`` with its provenance (idempotent).

        ``expected`` is the memory as the writer read it (``None``: absent); when it no
        longer holds, :class:`~asyncrecall.MemoryConflictError` and nothing written."""
        ...

    def forget(
        self, name_or_rel_path: str, *, expected: Expected = ANYTHING, origin: str = "extraction"
    ) -> MemoryDoc:
        """Remove a memory (and its provenance), under the same precondition as :meth:`save`."""
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


def read_source_offsets(path: Path) -> dict[str, tuple[int, ...]]:
    """A topic file's ``source_offsets`` front matter (``{}`` when absent or unreadable)."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        data = yaml.safe_load("\n".join(lines[1:end]))
    except (StopIteration, yaml.YAMLError):
        return {}
    value = data.get(SOURCE_OFFSETS_KEY) if isinstance(data, dict) else None
    return parse_source_offsets(value)


def parse_source_offsets(value: Any) -> dict[str, tuple[int, ...]]:
    """``{session: (offsets...)}`` from a stored mapping (``{}`` when it is not one)."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, tuple[int, ...]] = {}
    for session, offsets in value.items():
        if isinstance(offsets, list):
            out[str(session)] = tuple(o for o in offsets if isinstance(o, int))
    return out


class FolderBackend:
    """A memory folder: provenance in front matter, state in ``<folder>.state/``."""

    def __init__(self, store: MemoryStore, *, state_dir: Path | None = None) -> None:
        self._store = store
        self.state = ExtractionState(state_dir or default_state_dir(store.root))

    def __repr__(self) -> str:
        return f"FolderBackend({self._store!r})"

    @property
    def store(self) -> MemoryStore:
        return self._store

    @property
    def files_root(self) -> Path:
        return self._store.root

    @property
    def key(self) -> str:
        return str(self._store.root)

    @property
    def state_dir(self) -> Path:
        return self.state.root

    def cursor(self, session_id: str) -> int:
        return self.state.cursor(session_id)

    def journal(self, session_id: str) -> Journal | None:
        return self.state.journal(session_id)

    def stale_journals(self, older_than: float) -> list[tuple[Journal, float]]:
        return self.state.stale_journals(older_than)

    def write_journal(self, journal: Journal) -> None:
        self.state.write_journal(journal)

    def commit(self, journal: Journal) -> None:
        # Two atomic replaces: a crash between them leaves a journal whose end is the
        # cursor already, which the next run only removes.
        if journal.end > self.state.cursor(journal.session):
            self.state.set_cursor(journal.session, journal.end)
        self.state.clear_journal(journal.session)

    def get(self, name: str) -> MemoryDoc | None:
        return self._store.find(name)

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
    ) -> MemoryDoc:
        extra = {SOURCE_OFFSETS_KEY: dict(source_offsets)} if source_offsets else None
        return self._store.save_memory(
            name, description, type, content,
            extra=extra, expected=expected, origin=origin, write_id=write_id,
        )  # fmt: skip

    def forget(
        self, name_or_rel_path: str, *, expected: Expected = ANYTHING, origin: str = "extraction"
    ) -> MemoryDoc:
        return self._store.forget(name_or_rel_path, expected=expected, origin=origin)

    def locked(self) -> AbstractContextManager[None]:
        return self._store.locked()

    def last_seq(self, name: str) -> int:
        return self._store.history.last_seq(name)

    def history_after(self, name: str, seq: int) -> list[HistoryRecord]:
        return self._store.history.records(name, after=seq)

    def source_offsets(self, doc: MemoryDoc) -> dict[str, tuple[int, ...]]:
        return read_source_offsets(doc.path)

    def trim_index(self) -> bool:
        from asyncrecall.memory._consolidate import trim_index

        return trim_index(self._store)

    def repair_index(self) -> bool:
        return self._store.repair_index()


def extraction_backend(
    store: MemoryStoreProtocol, *, state_dir: Path | None = None
) -> ExtractionBackend:
    """The backend of ``store``: a folder's or a PostgreSQL store's.

    ``state_dir`` (folder only) replaces ``<memory folder>.state``. Any other store is a
    :class:`TypeError`: extraction needs to keep its cursor where the memories live.
    """
    if isinstance(store, MemoryStore):
        return FolderBackend(store, state_dir=state_dir)
    if type(store).__name__ == _POSTGRES_STORE:  # checked by name: psycopg is optional
        from asyncrecall.memory._postgres import PostgresMemoryStore
        from asyncrecall.memory._postgres_extract import PostgresBackend

        if isinstance(store, PostgresMemoryStore):
            return PostgresBackend(store)
    raise TypeError(f"memory extraction does not support the store {store!r}")

"""Where extraction and consolidation keep their state for a memory folder.

- :class:`FolderBackend` (the folder's :class:`ExtractionBackend
  <asyncrecall.memory.extraction._backend.ExtractionBackend>`): provenance in each topic
  file's front matter (:func:`read_source_offsets`), cursors and journals in
  ``<memory folder>.state/`` (:class:`~asyncrecall.memory.extraction._state.ExtractionState`);
- :class:`ConsolidationGate`: when an automatic consolidation is due, and its file lock;
- :func:`trim_index`: ``MEMORY.md`` kept within its limits after a consolidation.

:class:`~asyncrecall.memory.FolderStore` hands these out (``extraction_backend()``,
``consolidation_gate()``); this module uses the store only through its methods.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._atomic import atomic_write
from asyncrecall.memory._history import HistoryRecord
from asyncrecall.memory._limits import INDEX_MAX_BYTES, INDEX_MAX_LINES
from asyncrecall.memory._precondition import ANYTHING, Expected
from asyncrecall.memory._provenance import (
    SOURCE_OFFSETS_KEY,
    Source,
    SourceOffsets,
    parse_source_offsets,
)
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.extraction._backend import MIN_HOURS, MIN_SESSIONS
from asyncrecall.memory.extraction._state import ExtractionState, Journal, default_state_dir
from asyncrecall.memory.folder._index import INDEX_BYTES, index_lines
from asyncrecall.memory.folder._shape import FolderShape

__all__ = ["ConsolidationGate", "FolderBackend", "read_source_offsets", "trim_index"]

#: The length an index line's description is cut to when the index is over its limits.
_INDEX_DESCRIPTION: Final = 80


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


class FolderBackend:
    """A memory folder: provenance in front matter, state in ``<folder>.state/``."""

    def __init__(self, store: FolderShape, *, state_dir: Path | None = None) -> None:
        self._store = store
        self.state = ExtractionState(state_dir or default_state_dir(store.root))

    def __repr__(self) -> str:
        return f"FolderBackend({self._store!r})"

    @property
    def store(self) -> FolderShape:
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

    def end_session(self, session_id: str) -> bool:
        return self.state.end_session(session_id)

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
        sources: Sequence[Source] | None = None,
    ) -> MemoryDoc:
        extra = {SOURCE_OFFSETS_KEY: dict(source_offsets)} if source_offsets else None
        return self._store.save_memory(
            name, description, type, content,
            extra=extra, expected=expected, origin=origin, write_id=write_id, sources=sources,
        )  # fmt: skip

    def forget(
        self,
        name_or_rel_path: str,
        *,
        expected: Expected = ANYTHING,
        origin: str = "extraction",
        write_id: str = "",
    ) -> MemoryDoc:
        return self._store.forget(
            name_or_rel_path, expected=expected, origin=origin, write_id=write_id
        )

    def locked(self) -> AbstractContextManager[None]:
        return self._store.locked()

    def last_seq(self, name: str) -> int:
        return self._store.history.last_seq(name)

    def history_after(self, name: str, seq: int) -> list[HistoryRecord]:
        return self._store.history.records(name, after=seq)

    def provenance(self, doc: MemoryDoc) -> tuple[Source, ...]:
        return self._store.provenance_of(doc)

    def source_offsets(self, doc: MemoryDoc) -> dict[str, tuple[int, ...]]:
        return read_source_offsets(doc.path)

    def trim_index(self) -> bool:
        return trim_index(self._store)

    def repair_index(self) -> bool:
        return self._store.repair_index()


def trim_index(store: FolderShape) -> bool:
    """Repair ``MEMORY.md`` (every memory listed, no line to a file that is gone), then
    shorten its descriptions when it is over its limits; True if it was."""
    with store.locked():
        store.repair_index()
        raw = store._read_index_bytes()
        if raw is None:
            return False
        lines = index_lines(raw)
        if len(lines) <= INDEX_MAX_LINES and len(raw) <= INDEX_MAX_BYTES:
            return False
        short = []
        for line in lines:
            head, sep, tail = line.partition(" — ")
            if sep and len(tail) > _INDEX_DESCRIPTION:
                line = f"{head}{sep}{tail[: _INDEX_DESCRIPTION - 1]}…"
            short.append(line)
        atomic_write(store.index_path, "\n".join(short) + "\n", errors=INDEX_BYTES)
        return True


class ConsolidationGate:
    """When an automatic consolidation is due, and the lock that makes it one at a time.

    State in ``<state_dir>/consolidate.json``: ``last_at`` (epoch seconds) and
    ``sessions`` (sessions started since). The lock is an OS file lock on
    ``consolidate.lock`` (the file itself stays: removing a lock file is what lets two
    holders in), held from :meth:`acquire` to :meth:`release` by this gate only.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        min_hours: float = MIN_HOURS,
        min_sessions: int = MIN_SESSIONS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = Path(state_dir)
        self.min_hours = min_hours
        self.min_sessions = min_sessions
        self._clock = clock
        self._lock: Any = None  # a filelock.FileLock while this gate holds the lock

    @classmethod
    def for_store(cls, store: FolderShape, **kwargs: Any) -> ConsolidationGate:
        return cls(default_state_dir(store.root), **kwargs)

    @property
    def state_path(self) -> Path:
        return self.root / "consolidate.json"

    @property
    def lock_path(self) -> Path:
        return self.root / "consolidate.lock"

    def _state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"last_at": None, "sessions": 0}
        except (OSError, ValueError) as exc:
            raise MemoryStoreError(f"cannot read {self.state_path}: {exc}") from exc
        return data if isinstance(data, dict) else {"last_at": None, "sessions": 0}

    def _save(self, data: Mapping[str, Any]) -> None:
        atomic_write(self.state_path, json.dumps(dict(data)) + "\n")

    def note_session(self) -> None:
        """Count one more session since the last consolidation (the first one starts the
        24-hour clock, so a fresh folder is not consolidated on day one)."""
        data = self._state()
        if data.get("last_at") is None:
            data["last_at"] = self._clock()
        data["sessions"] = int(data.get("sessions") or 0) + 1
        self._save(data)

    def due(self) -> bool:
        data = self._state()
        last = data.get("last_at")
        if last is None:
            return False
        hours = (self._clock() - float(last)) / 3600.0
        return hours >= self.min_hours and int(data.get("sessions") or 0) >= self.min_sessions

    def acquire(self) -> bool:
        """Take the lock; False when another run holds it. The lock is the system's own
        (``filelock`` on ``consolidate.lock``), held until :meth:`release` or the end of
        the process, so a run that crashed never blocks the next one and a run in
        progress is never taken over."""
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.lock_path), timeout=0, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            return False
        self._lock = lock
        return True

    def release(self, *, completed: bool) -> None:
        """Drop this gate's lock (only its own: a lock it does not hold stays); a
        completed run resets the clock and the session count."""
        lock, self._lock = self._lock, None
        if lock is None or not lock.is_locked:
            return
        try:
            if completed:
                self._save({"last_at": self._clock(), "sessions": 0})
        finally:
            lock.release()

"""Extraction's state beside the memory folder: per-session cursors and write journals.

(The folder's backend uses it, ``folder/_extraction``; the PostgreSQL store keeps the same
in its database, ``postgres/_extraction``.)

Layout (``state_dir`` defaults to ``<memory folder>.state``, a sibling of the folder,
so nothing here is ever scanned as a memory and a memory folder kept in git holds
only memories)::

    <memory folder>.state/
        extract/<session>.json           the cursor: {"session", "offset", "updated_at"}
        extract/<session>.pending.json   the journal of an extraction being written

A session whose process has ended, and whose last extraction is done, has its cursor
removed (``end_session``): it will never extract again.

The cursor is the offset of the first transcript turn not yet processed. An
extraction writes its journal (every write it is about to make, with what it read of
each memory), then the memory files, then the cursor, then removes the journal; each
step is an atomic replace. A crash before the journal leaves nothing to undo (the
slice is extracted again); a crash after it is rolled forward by the extractor (each
write made again only if nobody else has written that memory since: the store's
history says, see ``_extract``). So a slice is never processed twice and never
skipped, and a roll-forward never overwrites a newer save or brings back a memory the
user forgot.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Final

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._atomic import atomic_write as _atomic_write
from asyncrecall.memory._history import default_state_dir
from asyncrecall.memory._journal import (
    Journal,
    JournalEntry,
    Seen,
    check_session_id,
    journal_from_json,
    journal_to_json,
)

__all__ = [
    "ExtractionState",
    "Journal",
    "JournalEntry",
    "Seen",
    "check_session_id",
    "default_state_dir",
    "journal_from_json",
    "journal_to_json",
]


_SUBDIR: Final = "extract"


class ExtractionState:
    """Cursors and journals of one memory folder's extractions."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir).expanduser().absolute()

    def __repr__(self) -> str:
        return f"ExtractionState({str(self.root)!r})"

    def _path(self, session_id: str, suffix: str) -> Path:
        return self.root / _SUBDIR / f"{check_session_id(session_id)}{suffix}"

    def cursor_path(self, session_id: str) -> Path:
        return self._path(session_id, ".json")

    def journal_path(self, session_id: str) -> Path:
        return self._path(session_id, ".pending.json")

    # -- the cursor ---------------------------------------------------------------------

    def cursor(self, session_id: str) -> int:
        """The session's processed offset (0 when it never extracted)."""
        data = _read_json(self.cursor_path(session_id))
        if data is None:
            return 0
        offset = data.get("offset") if isinstance(data, dict) else None
        if not isinstance(offset, int) or offset < 0:
            raise MemoryStoreError(
                f"extraction cursor {self.cursor_path(session_id)} is corrupt: "
                "expected an object with a non-negative integer 'offset'"
            )
        return offset

    def set_cursor(self, session_id: str, offset: int) -> None:
        """Persist the processed offset (atomic replace). It never moves backwards."""
        if offset < self.cursor(session_id):
            raise MemoryStoreError(f"extraction cursor of {session_id!r} cannot move backwards")
        payload = {
            "session": session_id,
            "offset": offset,
            "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _atomic_write(self.cursor_path(session_id), json.dumps(payload) + "\n")

    # -- the journal --------------------------------------------------------------------

    def write_journal(self, journal: Journal) -> None:
        payload = journal_to_json(journal)
        _atomic_write(self.journal_path(journal.session), json.dumps(payload) + "\n")

    def journal(self, session_id: str) -> Journal | None:
        """The pending journal of a crashed extraction, or ``None``."""
        path = self.journal_path(session_id)
        data = _read_json(path)
        if data is None:
            return None
        return journal_from_json(session_id, data, where=str(path))

    def stale_journals(self, older_than: float) -> list[tuple[Journal, float]]:
        """Journals last written over ``older_than`` seconds ago, with their mtimes."""
        folder = self.root / _SUBDIR
        suffix = ".pending.json"
        try:
            paths = [p for p in folder.iterdir() if p.name.endswith(suffix)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise MemoryStoreError(f"cannot list {folder}: {exc.strerror}") from exc
        found: list[tuple[Journal, float]] = []
        now = time.time()
        for path in sorted(paths):
            session = path.name[: -len(suffix)]
            try:
                written = path.stat().st_mtime
                check_session_id(session)
            except (OSError, ValueError):
                continue  # gone meanwhile, or not one of ours
            if now - written > older_than:
                journal = self.journal(session)
                if journal is not None:
                    found.append((journal, written))
        return found

    def end_session(self, session_id: str) -> bool:
        """Remove the session's cursor, unless its journal is there (see
        ``ExtractionBackend.end_session``)."""
        if self.journal_path(session_id).exists():
            return False
        try:
            os.unlink(self.cursor_path(session_id))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise MemoryStoreError(
                f"cannot remove {self.cursor_path(session_id)}: {exc.strerror}"
            ) from exc
        return True

    def clear_journal(self, session_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.journal_path(session_id))


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MemoryStoreError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise MemoryStoreError(f"{path} is not valid JSON: {exc}") from exc

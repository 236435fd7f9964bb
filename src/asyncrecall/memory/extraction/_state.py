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
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._atomic import atomic_write as _atomic_write
from asyncrecall.memory._history import default_state_dir

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


_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_SUBDIR: Final = "extract"


def check_session_id(session_id: str) -> str:
    """``session_id`` if it is a safe file stem (letters, digits, ``_.-``; 1–100 chars)."""
    if not _SESSION_ID.match(session_id) or ".." in session_id:
        raise ValueError(
            f"invalid session id {session_id!r}: use 1-100 letters, digits, '_', '.' or '-'"
        )
    return session_id


@dataclass(frozen=True, slots=True)
class Seen:
    """What extraction read of a memory when it planned a write to it."""

    description: str
    type: str
    body: str

    def to_json(self) -> dict[str, str]:
        return {"description": self.description, "type": self.type, "body": self.body}

    @classmethod
    def from_json(cls, data: Any) -> Seen | None:
        if not isinstance(data, dict):
            return None
        return cls(str(data["description"]), str(data["type"]), str(data["body"]))


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One memory write an extraction committed to.

    ``base`` is the memory as the extraction read it (``None``: there was none) and
    ``shown`` what the side model was shown of its body; ``mode`` is ``replace`` when it
    was shown the whole body (its content then replaces it) and ``append`` when it was
    shown part or none of it (what its content says beyond what it was shown is added,
    so nothing it did not see is lost); ``seen_seq`` is the name's newest history
    record when the extraction read it and ``write_id`` marks this write's own records,
    so a roll-forward can tell whether anyone else wrote the memory since.
    ``legacy`` marks an entry of a journal written before these fields existed.
    """

    name: str
    description: str
    type: str
    content: str
    source_offsets: dict[str, list[int]]
    action: str
    base: Seen | None = None
    shown: str = ""
    mode: str = "replace"
    seen_seq: int = 0
    write_id: str = ""
    legacy: bool = False
    #: The write's provenance source, stored form (``None``: a journal from before).
    source: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "name": self.name,
            "description": self.description,
            "type": self.type,
            "content": self.content,
            "source_offsets": self.source_offsets,
            "action": self.action,
            "base": self.base.to_json() if self.base is not None else None,
            "shown": self.shown,
            "mode": self.mode,
            "seen_seq": self.seen_seq,
            "write_id": self.write_id,
        }

    @classmethod
    def from_json(cls, data: Any) -> JournalEntry:
        if not isinstance(data, dict):
            raise ValueError("journal entry is not an object")
        offsets = data.get("source_offsets")
        if not isinstance(offsets, dict):
            raise ValueError("journal entry has no source_offsets object")
        mode = str(data.get("mode", "replace"))
        if mode not in ("replace", "append"):
            raise ValueError(f"journal entry has an unknown mode {mode!r}")
        return cls(
            name=str(data["name"]),
            description=str(data["description"]),
            type=str(data["type"]),
            content=str(data["content"]),
            source_offsets={str(k): [int(o) for o in v] for k, v in offsets.items()},
            action=str(data.get("action", "create")),
            base=Seen.from_json(data.get("base")),
            shown=str(data.get("shown", "")),
            mode=mode,
            seen_seq=int(data.get("seen_seq", 0)),
            write_id=str(data.get("write_id", "")),
            legacy="write_id" not in data,
            source=dict(data["source"]) if isinstance(data.get("source"), dict) else None,
        )


@dataclass(frozen=True, slots=True)
class Journal:
    """The pending writes of one extraction of ``[start, end)``."""

    session: str
    start: int
    end: int
    writes: tuple[JournalEntry, ...]


def journal_to_json(journal: Journal) -> dict[str, Any]:
    """The journal as stored (a file's JSON, a database's ``jsonb``)."""
    return {
        "session": journal.session,
        "start": journal.start,
        "end": journal.end,
        "writes": [entry.to_json() for entry in journal.writes],
    }


def journal_from_json(session_id: str, data: Any, *, where: str) -> Journal:
    """A stored journal, or :class:`MemoryStoreError` naming ``where`` when it is corrupt."""
    try:
        return Journal(
            session=session_id,
            start=int(data["start"]),
            end=int(data["end"]),
            writes=tuple(JournalEntry.from_json(w) for w in data["writes"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MemoryStoreError(f"extraction journal {where} is corrupt: {exc}") from exc


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

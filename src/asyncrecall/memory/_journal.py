"""An extraction's journal and its parts, the same in every store: the writes one
extraction committed to, kept until they are all made (see
:mod:`asyncrecall.memory.extraction._state` for how a folder keeps it, ``postgres/_extraction``
for a database). A value of the store interface (:class:`~asyncrecall.memory.Store`'s
extraction backend reads and writes it), so it lives in the core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from asyncrecall._exceptions import MemoryStoreError

__all__ = [
    "Journal",
    "JournalEntry",
    "Seen",
    "check_session_id",
    "journal_from_json",
    "journal_to_json",
]


_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


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

"""The history of a memory folder: every save and forget, with the text before and after.

Layout, in the folder's state directory beside it (never scanned as a memory)::

    <memory folder>.state/history/<key>/<seq>.json

``<key>`` stands for one memory name (its file stem and a digest of the exact name),
``<seq>`` counts that name's writes from 1 (zero-padded). A record is
:class:`HistoryRecord` as JSON; ``before`` and ``after`` are the topic file's whole
text (``null``: there was no file, or none is left).

A record is written, atomically and under the folder lock, *before* the write it
describes: a crash between the two leaves a record whose ``after`` the folder does not
hold, which readers tell by comparing (the journal's roll-forward does). So no write
is ever missing from the history, and every one can be undone.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._atomic import atomic_write
from asyncrecall.memory._document import safe_file_stem

__all__ = [
    "FolderHistory",
    "HistoryOp",
    "HistoryRecord",
    "default_state_dir",
    "history_key",
    "revert_target",
    "undo_plan",
]

HistoryOp: TypeAlias = Literal["save", "forget", "revert"]

_SUBDIR: Final = "history"
_SEQ_WIDTH: Final = 8


def default_state_dir(memory_root: Path) -> Path:
    """``<memory folder>.state``: beside the folder, never inside it."""
    root = Path(memory_root).expanduser().absolute()
    return root.with_name(f"{root.name}.state")


def history_key(name: str) -> str:
    """The folder of one name's records: readable, and distinct for distinct names."""
    import hashlib

    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{safe_file_stem(name)[:40]}-{digest}"


@dataclass(frozen=True, slots=True)
class HistoryRecord:
    """One write to one memory name.

    ``seq`` counts the name's writes from 1; ``op`` is ``save``, ``forget`` or ``revert``;
    ``path`` the topic file written or removed (relative to the folder); ``origin`` who
    wrote (``user``, ``tool``, ``extraction``, ``consolidation``, ``import``, ...);
    ``write_id`` ties a write to the journal that planned it (``""``: none); ``before``
    and ``after`` the file's text (``None``: absent).
    """

    seq: int
    name: str
    op: HistoryOp
    path: str
    at: float
    origin: str
    write_id: str
    before: str | None
    after: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "name": self.name,
            "op": self.op,
            "path": self.path,
            "at": self.at,
            "origin": self.origin,
            "write_id": self.write_id,
            "before": self.before,
            "after": self.after,
        }

    @classmethod
    def from_json(cls, data: Any) -> HistoryRecord:
        if not isinstance(data, dict) or data.get("op") not in ("save", "forget", "revert"):
            raise ValueError("not a history record")
        before, after = data.get("before"), data.get("after")
        if not (before is None or isinstance(before, str)) or not (
            after is None or isinstance(after, str)
        ):
            raise ValueError("before/after must be text or null")
        return cls(
            seq=int(data["seq"]),
            name=str(data["name"]),
            op=data["op"],
            path=str(data.get("path", "")),
            at=float(data["at"]),
            origin=str(data.get("origin", "")),
            write_id=str(data.get("write_id", "")),
            before=before,
            after=after,
        )


def revert_target(records: list[HistoryRecord], name: str, to: int | None) -> HistoryRecord:
    """The record a revert goes back to: version ``to`` (its ``after``), or (``None``)
    the newest (its ``before``: what it replaced). :class:`MemoryStoreError` when there
    is no history or no such version."""
    if not records:
        raise MemoryStoreError(f"memory {name!r} has no recorded history")
    if to is None:
        return records[-1]
    found = next((r for r in records if r.seq == to), None)
    if found is None:
        raise MemoryStoreError(
            f"memory {name!r} has no version {to} (versions 1 to {records[-1].seq})"
        )
    return found


def undo_plan(write_id: str, touched: Mapping[str, list[HistoryRecord]]) -> dict[str, str | None]:
    """What undoing every record of ``write_id`` (one consolidation, one import) brings
    back: for each name it wrote (``touched``: that name's records, oldest first), the
    text before the write's first record of it (``None``: remove it).
    :class:`MemoryStoreError`, with nothing to do, when the write left no record or a
    name no longer holds what the write left (written since by anyone else and not
    reverted: undoing it would lose that newer write). Every write is recorded, so a
    name's newest record says what it holds now."""
    if not write_id or not touched:
        raise MemoryStoreError(f"no recorded write {write_id!r}")
    plan: dict[str, str | None] = {}
    newer: list[str] = []
    for name, records in touched.items():
        mine = [r for r in records if r.write_id == write_id]
        if not mine:
            continue
        if records[-1].after != mine[-1].after:
            newer.append(name)
        plan[name] = mine[0].before
    if newer:
        raise MemoryStoreError(
            f"write {write_id!r} cannot be undone as one step: written since by another "
            f"write: {', '.join(sorted(newer))} (revert those first, or each by name)"
        )
    if not plan:
        raise MemoryStoreError(f"no recorded write {write_id!r}")
    return plan


class FolderHistory:
    """The records of one memory folder. Every method but :meth:`records` and
    :meth:`last_seq` is called with the folder lock held (the store does)."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir) / _SUBDIR

    def __repr__(self) -> str:
        return f"FolderHistory({str(self.root)!r})"

    def _folder(self, name: str) -> Path:
        return self.root / history_key(name)

    def _seqs(self, name: str) -> list[int]:
        try:
            entries = os.listdir(self._folder(name))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise MemoryStoreError(f"cannot list {self._folder(name)}: {exc.strerror}") from exc
        return sorted(int(e[:-5]) for e in entries if e.endswith(".json") and e[:-5].isdigit())

    def last_seq(self, name: str) -> int:
        """The newest record's number for ``name`` (0: it was never written)."""
        seqs = self._seqs(name)
        return seqs[-1] if seqs else 0

    def records(self, name: str, *, after: int = 0) -> list[HistoryRecord]:
        """``name``'s records numbered above ``after``, oldest first. An unreadable record
        is :class:`MemoryStoreError`: a gap in the history is never silently skipped."""
        out: list[HistoryRecord] = []
        folder = self._folder(name)
        for seq in self._seqs(name):
            if seq <= after:
                continue
            path = folder / f"{seq:0{_SEQ_WIDTH}d}.json"
            try:
                record = HistoryRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise MemoryStoreError(f"history record {path} is unreadable: {exc}") from exc
            if record.name == name:  # a digest collision would show here; never seen
                out.append(record)
        return out

    def every_record(self) -> list[HistoryRecord]:
        """Every record of every name, oldest first (by time)."""
        try:
            folders = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise MemoryStoreError(f"cannot list {self.root}: {exc.strerror}") from exc
        out: list[HistoryRecord] = []
        for folder in folders:
            for path in sorted((self.root / folder).glob("*.json")):
                try:
                    out.append(
                        HistoryRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
                    )
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    raise MemoryStoreError(f"history record {path} is unreadable: {exc}") from exc
        out.sort(key=lambda r: (r.at, r.name, r.seq))
        return out

    def touched_by(self, write_id: str) -> dict[str, list[HistoryRecord]]:
        """Every record of each name ``write_id`` wrote (see :func:`undo_plan`)."""
        names = {r.name for r in self.every_record() if r.write_id == write_id}
        return {name: self.records(name) for name in sorted(names)}

    def append(
        self,
        name: str,
        op: HistoryOp,
        *,
        path: str,
        before: str | None,
        after: str | None,
        origin: str,
        write_id: str = "",
        clock: float | None = None,
    ) -> HistoryRecord:
        """Record a write about to be made (the caller holds the folder lock)."""
        record = HistoryRecord(
            seq=self.last_seq(name) + 1,
            name=name,
            op=op,
            path=path,
            at=time.time() if clock is None else clock,
            origin=origin,
            write_id=write_id,
            before=before,
            after=after,
        )
        target = self._folder(name) / f"{record.seq:0{_SEQ_WIDTH}d}.json"
        atomic_write(target, json.dumps(record.to_json(), ensure_ascii=False) + "\n")
        return record

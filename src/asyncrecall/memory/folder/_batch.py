"""Several writes to a memory folder under one hold of its lock: an import's saves, the
reverts of its undo (``revert_write``).

:meth:`FolderStore.save_memory <asyncrecall.memory.FolderStore.save_memory>` takes the
lock, scans the folder to find the memory of that name, writes, rewrites ``MEMORY.md``
and records the quarantined memories (another scan): for an import of ``n`` memories
that is ``n`` times the work of a folder growing to ``n`` files. A :class:`SaveBatch`
(``FolderStore.save_batch()``) scans once, keeps the name-to-memory map up to date as
it writes, reads back only the file just written, and writes the index at the end
(:class:`~._index.IndexDraft`); the quarantine record is written when the lock is
released. Each save writes its topic file and its history record as ``save_memory``
does (the same text, the same provenance, the same hold or waiting change), so the
folder and its history end as the saves one by one would leave them. ``revert_write``
restores each memory of one write the same way (:meth:`SaveBatch.restore`), and
``revert`` restores one memory in a batch of one.

The index is written when the batch ends, however it ends (an error, ``Ctrl-C``, a
signal the caller turns into an exception): the files written by then are listed, and
only they. A process killed outright in between leaves its new files without index
lines until the folder's next write, which repairs the index (as after a crash between
any write's file and its index line).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from asyncrecall.memory._atomic import atomic_write
from asyncrecall.memory._document import checked_fields, checked_text
from asyncrecall.memory._history import FolderHistory
from asyncrecall.memory._limits import index_line
from asyncrecall.memory._provenance import Source, new_source
from asyncrecall.memory._store import LIBRARY_ORIGIN
from asyncrecall.memory._types import MemoryDoc, MemoryType
from asyncrecall.memory.folder._index import IndexDraft

__all__ = ["BatchTarget", "SaveBatch"]


class BatchTarget(Protocol):
    """What a batch uses of the folder's store (``FolderStore``, which holds the lock)."""

    @property
    def root(self) -> Path: ...

    @property
    def history(self) -> FolderHistory: ...

    def scan(self, *, limit: int | None = ...) -> list[MemoryDoc]: ...

    def _write_memory(
        self,
        name: str,
        description: str,
        kind: MemoryType,
        content: str,
        existing: MemoryDoc | None,
        *,
        added: tuple[Source, ...],
        extra: Mapping[str, Any] | None,
        origin: str,
        write_id: str,
    ) -> tuple[str, str]: ...

    def _rewrite_index(
        self,
        rel: str | None,
        line: str | None,
        docs: Sequence[MemoryDoc],
        *,
        lines: Sequence[str] | None = None,
    ) -> list[str]: ...

    def _doc(self, rel: str) -> MemoryDoc: ...

    def _free_rel_path(self, name: str) -> str: ...


class SaveBatch:
    """The saves of one batch; made by ``FolderStore.save_batch()``, which holds the
    folder lock around it and closes it."""

    def __init__(self, store: BatchTarget, docs: Sequence[MemoryDoc]) -> None:
        self._store = store
        self._docs = list(docs)  # the folder as the batch found it
        self._by_rel: dict[str, MemoryDoc] = {}
        self._by_name: dict[str, dict[str, MemoryDoc]] = {}
        for doc in docs:
            self._remember(doc)
        self._draft: IndexDraft | None = None
        self._writing = False  # a save got as far as writing: the index is to be written

    def save(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
        sources: Sequence[Source] | None = None,
        extra: Mapping[str, Any] | None = None,
        mtime: float | None = None,
    ) -> MemoryDoc:
        """What ``save_memory`` (without a precondition) does, its index line left to the
        end of the batch; ``mtime``: the topic file's modification time afterwards."""
        name, description, kind = checked_fields(name, description, type)
        checked_text(f"memory {name!r}", content)
        added = tuple(sources) if sources is not None else (new_source(origin),)
        store = self._store
        self._writing = True
        rel, line = store._write_memory(
            name, description, kind, content, self._named(name),
            added=added, extra=extra, origin=origin, write_id=write_id,
        )  # fmt: skip
        if mtime is not None:
            os.utime(store.root / rel, (mtime, mtime))
        self._edit(rel, line)
        doc = store._doc(rel)
        self._remember(doc)
        return doc

    def restore(
        self, name: str, text: str | None, path: str, *, origin: str, write_id: str
    ) -> MemoryDoc | None:
        """A revert of ``name`` to ``text`` (``None``: removed; ``path``: where it was),
        recorded as a ``revert`` write, its index line left to the end of the batch."""
        store = self._store
        current = self._named(name)
        if text is None:
            if current is None:
                return None
            self._writing = True
            store.history.append(
                name, "revert", path=current.rel_path, before=_read_text(current.path),
                after=None, origin=origin, write_id=write_id,
            )  # fmt: skip
            with contextlib.suppress(FileNotFoundError):
                os.unlink(current.path)
            self._edit(current.rel_path, None)
            self._forget(current)
            return None
        rel = current.rel_path if current else self._revert_path(path, name)
        before = _read_text(store.root / rel) if current else None
        if before == text:
            return current
        self._writing = True
        store.history.append(
            name, "revert", path=rel, before=before, after=text, origin=origin, write_id=write_id
        )
        atomic_write(store.root / rel, text)
        doc = store._doc(rel)
        self._edit(rel, index_line(doc.name, rel, doc.description))
        self._remember(doc)
        return doc

    def close(self) -> None:
        """Write the index (repaired against the folder as it now is: a file written just
        before an interruption keeps its line)."""
        if not self._writing:
            return
        lines = self._draft.lines() if self._draft is not None else None
        self._writing, self._draft = False, None
        self._store._rewrite_index(None, None, self._store.scan(limit=None), lines=lines)

    def _edit(self, rel: str, line: str | None) -> None:
        """Put ``rel``'s index line in the draft (``None``: drop it); the first edit
        repairs the index, as any write does."""
        if self._draft is None:
            self._draft = IndexDraft(self._store._rewrite_index(rel, line, self._docs))
        elif line is None:
            self._draft.drop(rel)
        else:
            self._draft.set(rel, line)

    def _revert_path(self, rel: str, name: str) -> str:
        """Where a revert brings back a memory that is gone: where it was, unless that
        is taken now."""
        if rel and rel not in self._by_rel and not (self._store.root / rel).exists():
            return rel
        return self._store._free_rel_path(name)

    def _named(self, name: str) -> MemoryDoc | None:
        """The memory a scan would find first by this name (newest, then by path)."""
        found = self._by_name.get(name)
        if not found:
            return None
        return min(found.values(), key=lambda d: (-d.mtime, d.rel_path))

    def _remember(self, doc: MemoryDoc) -> None:
        old = self._by_rel.get(doc.rel_path)
        if old is not None:
            self._forget(old)
        self._by_rel[doc.rel_path] = doc
        self._by_name.setdefault(doc.name, {})[doc.rel_path] = doc

    def _forget(self, doc: MemoryDoc) -> None:
        self._by_rel.pop(doc.rel_path, None)
        self._by_name.get(doc.name, {}).pop(doc.rel_path, None)


def _read_text(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.read()
    except OSError:
        return None

"""Copying memories between stores with all they carry: ``memory export`` and ``import``.

A memory is more than its name, description, type and body. A copy keeps:

- its **provenance** (``source_offsets``: the transcript turns it came from): a topic
  file's front matter key, a row of ``asyncrecall_sources`` in a database;
- its **modification time** (a file's ``mtime``, a row's ``updated_at``) and its
  **creation time** (a row's ``created_at``; a file has none of its own, so an export
  writes it as a ``created_at`` front matter key, which an import reads back, and only
  when it differs from the ``mtime``; a file without one was created when it was last
  modified, or just before the memory its index lists next, whichever is earlier);
- its **provenance** (``provenance``: where each write came from), with an ``import``
  source added by ``import``; an ``export`` copies it as it is (the export is the
  user's own copy; importing it later adds the source);
- its **place in the index**: memories are copied in the source's index order
  (``MEMORY.md``'s lines, then any file it does not list, oldest first; a database's
  creation order), so the target lists them in the same order;
- any **other front matter keys** (a file's, a row's ``front_matter``).

The relative path is the target's to choose (from the name, as every save does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from asyncrecall.memory._provenance import LEGACY_SOURCE, Source, is_quarantined
from asyncrecall.memory._store_protocol import MemoryStoreProtocol
from asyncrecall.memory._types import MemoryDoc

__all__ = [
    "CREATED_AT_KEY",
    "MemoryRecord",
    "Transferable",
    "copy_memories",
    "imported_sources",
    "read_records",
    "write_record",
]

#: The front matter key a memory's creation time travels in through a folder.
CREATED_AT_KEY: Final = "created_at"


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory and what it carries beyond its :class:`MemoryDoc`."""

    doc: MemoryDoc
    #: POSIX time it was created; ``None`` when the store does not know.
    created_at: float | None = None
    #: Provenance, ``{session id: (offsets...)}``.
    source_offsets: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: Front matter keys beyond name, description, type, provenance and creation time.
    front_matter: Mapping[str, Any] = field(default_factory=dict)
    #: Where its writes came from (``()``: no provenance, the user's own).
    provenance: tuple[Source, ...] = ()


def imported_sources(
    record: MemoryRecord, *, trusted: bool = True, as_is: bool = False
) -> tuple[Source, ...]:
    """What a copy's provenance gets: the original's sources (the user's own when it has
    none) and an ``import`` source. That source is untrusted when the copy is (an
    import of a folder someone handed over: what it says of itself cannot be checked),
    and when the original was quarantined (a copy never lifts a quarantine). ``as_is``
    (an export): the original's sources only."""
    if as_is:
        return record.provenance
    claimed = record.provenance or (LEGACY_SOURCE,)
    doubtful = not trusted or is_quarantined(claimed)
    return (*claimed, Source.now("import", untrusted=doubtful))


@runtime_checkable
class Transferable(Protocol):
    """A store that carries a memory's provenance, times and other keys through a copy
    (each store implements it in its own wing: the folder's, PostgreSQL's)."""

    def export_records(self) -> list[MemoryRecord]:
        """Every memory with what it carries, in the index's order."""
        ...

    def import_record(
        self, record: MemoryRecord, *, trusted: bool = ..., write_id: str = ..., as_is: bool = ...
    ) -> MemoryDoc:
        """Save ``record`` (created or replaced) with all it carries; ``trusted``
        false: quarantined until confirmed; ``write_id`` goes into the history;
        ``as_is`` (an export): no ``import`` source added to its provenance."""
        ...


def read_records(store: MemoryStoreProtocol) -> list[MemoryRecord]:
    """Every memory of ``store`` with what it carries, in its index's order."""
    if isinstance(store, Transferable):
        return store.export_records()
    docs = sorted(store.scan(limit=None), key=lambda d: (d.mtime, d.rel_path))
    return [MemoryRecord(doc) for doc in docs]


def write_record(
    store: MemoryStoreProtocol,
    record: MemoryRecord,
    *,
    trusted: bool = True,
    write_id: str = "",
    as_is: bool = False,
) -> MemoryDoc:
    """Save ``record`` into ``store`` (created or replaced) with all it carries;
    ``trusted`` false: the copy is quarantined (see :func:`imported_sources`);
    ``write_id``: the history's id of the copy (one for a whole import); ``as_is``:
    its provenance unchanged (an export)."""
    if isinstance(store, Transferable):
        if as_is:
            return store.import_record(record, as_is=True)
        if not trusted or write_id:
            return store.import_record(record, trusted=trusted, write_id=write_id)
        return store.import_record(record)
    doc = record.doc
    return store.save_memory(doc.name, doc.description, doc.type, doc.body)


def copy_memories(
    source: MemoryStoreProtocol,
    target: MemoryStoreProtocol,
    *,
    trusted: bool = True,
    write_id: str = "",
    as_is: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[MemoryDoc, MemoryDoc]]:
    """Save every memory of ``source`` into ``target`` (see the module); each original
    with its copy. ``trusted`` false (``memory import`` without ``--trusted``): every
    copy is quarantined until confirmed. ``write_id``: every copy's history id, so that
    ``memory revert --write`` undoes the whole copy as one step. ``as_is`` (``memory
    export``): each copy's provenance is the original's, no ``import`` source added.
    ``progress(done, total)`` is called after each copy."""
    records = read_records(source)
    copied: list[tuple[MemoryDoc, MemoryDoc]] = []
    for record in records:
        saved = write_record(target, record, trusted=trusted, write_id=write_id, as_is=as_is)
        copied.append((record.doc, saved))
        if progress is not None:
            progress(len(copied), len(records))
    return copied

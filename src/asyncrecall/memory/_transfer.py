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

from collections.abc import Callable
from typing import Final

from asyncrecall.memory._provenance import LEGACY_SOURCE, Source, is_quarantined
from asyncrecall.memory._store import MemoryRecord, Store
from asyncrecall.memory._types import MemoryDoc

__all__ = [
    "CREATED_AT_KEY",
    "MemoryRecord",
    "copy_memories",
    "imported_sources",
    "read_records",
    "write_record",
]

#: The front matter key a memory's creation time travels in through a folder.
CREATED_AT_KEY: Final = "created_at"


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


def read_records(store: Store) -> list[MemoryRecord]:
    """Every memory of ``store`` with what it carries, in its index's order."""
    return store.export_records()


def write_record(
    store: Store,
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
    return store.import_record(record, trusted=trusted, write_id=write_id, as_is=as_is)


def copy_memories(
    source: Store,
    target: Store,
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
    ``progress(done, total)`` is called after each copy. One batch of the target
    (:meth:`Store.import_records <asyncrecall.memory.Store.import_records>`): its cost
    grows with the number of memories, not with their square."""
    records = read_records(source)
    saved = target.import_records(
        records, trusted=trusted, write_id=write_id, as_is=as_is, progress=progress
    )
    return [(record.doc, copy) for record, copy in zip(records, saved, strict=True)]

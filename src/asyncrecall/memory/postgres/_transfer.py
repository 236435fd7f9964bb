"""Export and import for a PostgreSQL store (see :mod:`asyncrecall.memory._transfer`).

A row carries its provenance (``asyncrecall_sources``), its other keys (``front_matter``)
and both its times; memories are read in their creation order, one query.
"""

from __future__ import annotations

from asyncrecall.memory._provenance import SOURCE_OFFSETS_KEY
from asyncrecall.memory._transfer import MemoryRecord, imported_sources
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.postgres._extraction import PostgresBackend
from asyncrecall.memory.postgres._shape import PostgresShape

__all__ = ["export_records", "import_record"]


def export_records(store: PostgresShape) -> list[MemoryRecord]:
    """Every memory of the namespace with what it carries, oldest first."""
    return [
        MemoryRecord(doc, created, offsets, front, sources)
        for doc, created, front, offsets, sources in PostgresBackend(store).records()
    ]


def import_record(
    store: PostgresShape,
    record: MemoryRecord,
    *,
    trusted: bool = True,
    write_id: str = "",
    as_is: bool = False,
) -> MemoryDoc:
    """Save ``record`` into the namespace with its keys, provenance and times."""
    doc = record.doc
    offsets = {k: list(v) for k, v in record.source_offsets.items()}
    # The provenance key always: a copy has the original's, or none (never a
    # stale one of a memory the target had under that name).
    extra = {**record.front_matter, SOURCE_OFFSETS_KEY: offsets}
    return store.save_memory(
        doc.name,
        doc.description,
        doc.type,
        doc.body,
        updated_at=doc.mtime,
        created_at=record.created_at if record.created_at is not None else doc.mtime,
        extra=extra,
        origin="import",
        write_id=write_id,
        sources=imported_sources(record, trusted=trusted, as_is=as_is),
    )

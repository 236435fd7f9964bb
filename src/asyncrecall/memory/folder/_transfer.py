"""Export and import for a memory folder (see :mod:`asyncrecall.memory._transfer`).

A topic file carries its provenance and any other keys in its front matter, its
modification time as the file's ``mtime``; its creation time travels as a
``created_at`` front matter key, written only when it differs from the ``mtime`` (a
file without one was created when it was last modified, or just before the memory its
index lists next, whichever is earlier). Memories are read in ``MEMORY.md``'s order.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from asyncrecall.memory._document import FrontMatterError, _load_key_values, _load_yaml, _split
from asyncrecall.memory._provenance import (
    PROVENANCE_KEY,
    SOURCE_OFFSETS_KEY,
    parse_provenance,
    parse_source_offsets,
)
from asyncrecall.memory._transfer import CREATED_AT_KEY, MemoryRecord, imported_sources
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.folder._shape import FolderShape

__all__ = ["export_records", "import_record", "import_records"]

_STANDARD_KEYS: Final = frozenset({"name", "description", "type"})
_INDEX_LINK: Final = re.compile(r"\]\(([^)]+)\)")
_SAME_TIME_S: Final = 1e-6  # a database keeps microseconds
_ORDER_STEP_S: Final = 1e-3  # between estimated creation times, to keep the index order


def import_record(
    store: FolderShape,
    record: MemoryRecord,
    *,
    trusted: bool = True,
    write_id: str = "",
    as_is: bool = False,
) -> MemoryDoc:
    """Save ``record`` into the folder with its keys, provenance and times (a batch of
    one: :func:`import_records`)."""
    (saved,) = import_records(store, [record], trusted=trusted, write_id=write_id, as_is=as_is)
    return saved


def import_records(
    store: FolderShape,
    records: Sequence[MemoryRecord],
    *,
    trusted: bool = True,
    write_id: str = "",
    as_is: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[MemoryDoc]:
    """Save every record as :func:`import_record` does, in one batch (``_batch``): the
    lock taken and the folder scanned once, the index written once."""
    saved: list[MemoryDoc] = []
    if not records:
        return saved
    with store.save_batch() as batch:
        for record in records:
            doc = record.doc
            copy = batch.save(
                doc.name, doc.description, doc.type, doc.body, extra=_extra(record),
                origin="import", write_id=write_id, mtime=doc.mtime,
                sources=imported_sources(record, trusted=trusted, as_is=as_is),
            )  # fmt: skip
            saved.append(copy)
            if progress is not None:
                progress(len(saved), len(records))
    return saved


def _extra(record: MemoryRecord) -> dict[str, Any]:
    """The front matter keys a copy of ``record`` is saved with beyond the standard ones."""
    extra = dict(record.front_matter)
    if record.created_at is not None and abs(record.created_at - record.doc.mtime) > _SAME_TIME_S:
        extra[CREATED_AT_KEY] = _iso(record.created_at)  # else: its mtime says it
    offsets = {k: list(v) for k, v in record.source_offsets.items()}
    if offsets:
        extra[SOURCE_OFFSETS_KEY] = offsets
    return extra


def export_records(store: FolderShape) -> list[MemoryRecord]:
    """Every memory of the folder with what it carries, in ``MEMORY.md``'s order."""
    docs = store.scan(limit=None)
    listed = _index_order(store)
    docs.sort(key=lambda d: (listed.get(d.rel_path, len(listed)), d.mtime, d.rel_path))
    records: list[MemoryRecord] = []
    before = float("inf")  # the creation time of the memory listed next
    for doc in reversed(docs):
        keys = _front_matter(doc)
        created = _created_at(keys.pop(CREATED_AT_KEY, None))
        if created is None:  # at its last change, or before the next one was created
            created = min(doc.mtime, before - _ORDER_STEP_S)
        before = created
        offsets = parse_source_offsets(keys.pop(SOURCE_OFFSETS_KEY, None))
        sources = parse_provenance(keys.pop(PROVENANCE_KEY, None))
        records.append(MemoryRecord(doc, created, offsets, keys, sources))
    records.reverse()
    return records


def _index_order(store: FolderShape) -> dict[str, int]:
    """Each relative path ``MEMORY.md`` links to, and its line's place."""
    try:
        text = store.index_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    order: dict[str, int] = {}
    for line in text.splitlines():
        match = _INDEX_LINK.search(line)
        if match:
            order.setdefault(match.group(1), len(order))
    return order


def _front_matter(doc: MemoryDoc) -> dict[str, Any]:
    """A topic file's front matter keys beyond the three standard ones."""
    try:
        text = doc.path.read_text(encoding="utf-8").removeprefix("\ufeff")
        header, _ = _split(text)
    except (OSError, UnicodeDecodeError, FrontMatterError):
        return {}
    fields = _load_yaml(header)
    if fields is None:
        fields = _load_key_values(header)
    return {str(k): v for k, v in fields.items() if k not in _STANDARD_KEYS}


def _iso(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, tz=datetime.UTC).isoformat()


def _created_at(value: Any) -> float | None:
    """A ``created_at`` key's time (ISO 8601 text, a YAML timestamp, or a number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    when: datetime.datetime | None = value if isinstance(value, datetime.datetime) else None
    if isinstance(value, str):
        try:
            when = datetime.datetime.fromisoformat(value)
        except ValueError:
            return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()

"""Copying memories between stores with all they carry: ``memory export`` and ``import``.

A memory is more than its name, description, type and body. A copy keeps:

- its **provenance** (``source_offsets``: the transcript turns it came from): a topic
  file's front matter key, a row of ``asyncrecall_sources`` in a database;
- its **modification time** (a file's ``mtime``, a row's ``updated_at``) and its
  **creation time** (a row's ``created_at``; a file has none of its own, so an export
  writes it as a ``created_at`` front matter key, which an import reads back, and only
  when it differs from the ``mtime``; a file without one was created when it was last
  modified, or just before the memory its index lists next, whichever is earlier);
- its **place in the index**: memories are copied in the source's index order
  (``MEMORY.md``'s lines, then any file it does not list, oldest first; a database's
  creation order), so the target lists them in the same order;
- any **other front matter keys** (a file's, a row's ``front_matter``).

The relative path is the target's to choose (from the name, as every save does).
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from asyncrecall.memory._document import FrontMatterError, _load_key_values, _load_yaml, _split
from asyncrecall.memory._extract_backend import parse_source_offsets
from asyncrecall.memory._extract_state import SOURCE_OFFSETS_KEY
from asyncrecall.memory._store import MemoryStore
from asyncrecall.memory._store_protocol import MemoryStoreProtocol
from asyncrecall.memory._types import MemoryDoc

__all__ = ["CREATED_AT_KEY", "MemoryRecord", "copy_memories", "read_records", "write_record"]

#: The front matter key a memory's creation time travels in through a folder.
CREATED_AT_KEY: Final = "created_at"
_STANDARD_KEYS: Final = frozenset({"name", "description", "type"})
_INDEX_LINK: Final = re.compile(r"\]\(([^)]+)\)")
_POSTGRES_STORE: Final = "PostgresMemoryStore"
_SAME_TIME_S: Final = 1e-6  # a database keeps microseconds
_ORDER_STEP_S: Final = 1e-3  # between estimated creation times, to keep the index order


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


def read_records(store: MemoryStoreProtocol) -> list[MemoryRecord]:
    """Every memory of ``store`` with what it carries, in its index's order."""
    if isinstance(store, MemoryStore):
        return _folder_records(store)
    backend = _postgres_backend(store)
    if backend is not None:
        return [
            MemoryRecord(doc, created, sources, front)
            for doc, created, front, sources in backend.records()
        ]
    docs = sorted(store.scan(limit=None), key=lambda d: (d.mtime, d.rel_path))
    return [MemoryRecord(doc) for doc in docs]


def write_record(store: MemoryStoreProtocol, record: MemoryRecord) -> MemoryDoc:
    """Save ``record`` into ``store`` (created or replaced) with all it carries."""
    doc = record.doc
    offsets = {k: list(v) for k, v in record.source_offsets.items()}
    if isinstance(store, MemoryStore):
        extra = dict(record.front_matter)
        if record.created_at is not None and abs(record.created_at - doc.mtime) > _SAME_TIME_S:
            extra[CREATED_AT_KEY] = _iso(record.created_at)  # else: its mtime says it
        if offsets:
            extra[SOURCE_OFFSETS_KEY] = offsets
        saved = store.save_memory(
            doc.name, doc.description, doc.type, doc.body, extra=extra, origin="import"
        )
        os.utime(saved.path, (doc.mtime, doc.mtime))
        return saved
    if _postgres_backend(store) is not None:
        from asyncrecall.memory._postgres import PostgresMemoryStore

        assert isinstance(store, PostgresMemoryStore)
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
        )
    return store.save_memory(doc.name, doc.description, doc.type, doc.body)


def copy_memories(
    source: MemoryStoreProtocol, target: MemoryStoreProtocol
) -> list[tuple[MemoryDoc, MemoryDoc]]:
    """Save every memory of ``source`` into ``target`` (see the module); each original
    with its copy."""
    return [(record.doc, write_record(target, record)) for record in read_records(source)]


def _postgres_backend(store: MemoryStoreProtocol) -> Any:
    if type(store).__name__ != _POSTGRES_STORE:  # checked by name: psycopg is optional
        return None
    from asyncrecall.memory._postgres import PostgresMemoryStore
    from asyncrecall.memory._postgres_extract import PostgresBackend

    return PostgresBackend(store) if isinstance(store, PostgresMemoryStore) else None


def _folder_records(store: MemoryStore) -> list[MemoryRecord]:
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
        records.append(MemoryRecord(doc, created, offsets, keys))
    records.reverse()
    return records


def _index_order(store: MemoryStore) -> dict[str, int]:
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

"""The PostgreSQL store's history: every save and forget, in the write's own transaction.

The folder keeps its history in files beside it (``_history``); a
:class:`~asyncrecall.memory.PostgresStore` keeps the same records in
``asyncrecall_history`` (schema version 4), one row per write of a name::

    asyncrecall_history
        namespace, name, seq        the name's writes, numbered from 1
        op                          save, forget or revert
        rel_path                    the memory's file name then
        at                          when (the server's clock)
        origin, write_id            who wrote (user, extraction, ...), and the journal's id
        before, after               the memory as a topic file's text (NULL: absent)

A record is inserted in the same transaction as the write it describes, after taking
the advisory lock the write's insert takes (``Announcer.lock_key``) and the row's lock, so
the records of one name are numbered in the order the writes commit, and a write
never lands without its record (nor a record without its write).

Every statement is constant text; names and texts travel as parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, LiteralString

from psycopg import Connection

from asyncrecall.memory._document import render_document
from asyncrecall.memory._history import HistoryOp, HistoryRecord
from asyncrecall.memory._provenance import (
    PROVENANCE_KEY,
    SOURCE_OFFSETS_KEY,
    parse_source_offsets,
)

__all__ = [
    "HISTORY_TABLE_SQL",
    "WRITE_NAMES_SQL",
    "history_records",
    "last_seq",
    "recent_records",
    "recorded",
]

HISTORY_TABLE_SQL: Final[LiteralString] = """
CREATE TABLE IF NOT EXISTS asyncrecall_history (
    namespace text NOT NULL,
    name text NOT NULL,
    seq bigint NOT NULL CHECK (seq > 0),
    op text NOT NULL CHECK (op IN ('save', 'forget', 'revert')),
    rel_path text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    origin text NOT NULL DEFAULT '',
    write_id text NOT NULL DEFAULT '',
    before text,
    after text,
    PRIMARY KEY (namespace, name, seq)
)
"""

_LOCK_SQL: Final[LiteralString] = "SELECT pg_advisory_xact_lock(%(lock)s::bigint)"

_TEXT_SQL: Final[LiteralString] = """
SELECT m.name, m.description, m.type, m.body, m.front_matter, s.sources, m.rel_path,
       m.provenance
FROM asyncrecall_memories m
LEFT JOIN asyncrecall_sources s ON s.namespace = m.namespace AND s.name = m.name
WHERE m.namespace = %(ns)s AND m.name = %(name)s
"""

_RECORD_SQL: Final[LiteralString] = """
INSERT INTO asyncrecall_history
    (namespace, name, seq, op, rel_path, origin, write_id, before, after)
SELECT %(ns)s, %(name)s, coalesce(max(seq), 0) + 1, %(op)s, %(rel)s, %(origin)s,
       %(write_id)s, %(before)s, %(after)s
FROM asyncrecall_history WHERE namespace = %(ns)s AND name = %(name)s
"""

_RECORDS_SQL: Final[LiteralString] = """
SELECT seq, name, op, rel_path, extract(epoch FROM at)::float8, origin, write_id, before, after
FROM asyncrecall_history
WHERE namespace = %(ns)s AND name = %(name)s AND seq > %(after)s
ORDER BY seq
"""

#: The names one write (a consolidation, an import) wrote.
WRITE_NAMES_SQL: Final[LiteralString] = """
SELECT DISTINCT name FROM asyncrecall_history
WHERE namespace = %(ns)s AND write_id = %(write_id)s ORDER BY name
"""

_RECENT_SQL: Final[LiteralString] = """
SELECT seq, name, op, rel_path, extract(epoch FROM at)::float8, origin, write_id, before, after
FROM asyncrecall_history WHERE namespace = %(ns)s
ORDER BY at DESC, name DESC, seq DESC LIMIT %(limit)s
"""

_LAST_SQL: Final[LiteralString] = """
SELECT coalesce(max(seq), 0) FROM asyncrecall_history WHERE namespace = %(ns)s AND name = %(name)s
"""


def _as_text(row: Any) -> tuple[str, str] | None:
    """A memory row as its topic file's text (front matter and provenance included),
    with its file name; ``None`` for no row."""
    if row is None:
        return None
    name, description, kind, body, front_matter, sources, rel, provenance = row
    extra: dict[str, Any] = dict(front_matter) if isinstance(front_matter, Mapping) else {}
    offsets = parse_source_offsets(sources)
    if offsets:
        extra[SOURCE_OFFSETS_KEY] = {k: list(v) for k, v in offsets.items()}
    if isinstance(provenance, list):  # as a topic file keeps it: a confirm is a change
        extra[PROVENANCE_KEY] = provenance
    text = render_document(name=name, description=description, type=kind, body=body, extra=extra)
    return text, rel


def recorded(
    conn: Connection[Any],
    *,
    namespace: str,
    name: str,
    lock: int | None,
    op: HistoryOp,
    origin: str,
    write_id: str,
    write: Any,
) -> Any:
    """Run ``write(conn)`` (a save's or forget's statement: its row, or ``None`` when its
    condition failed) in one transaction with the record of what it changed.

    ``lock`` is the advisory lock of the name's file name, taken first (a save's insert
    takes it too: a second save of a new name then waits for the first to commit, and
    reads what it wrote as its ``before``). A write that changes nothing is not
    recorded."""
    key = {"ns": namespace, "name": name}
    with conn.transaction():
        if lock is not None:
            conn.execute(_LOCK_SQL, {"lock": lock})
        before = _as_text(conn.execute(_TEXT_SQL + " FOR UPDATE OF m", key).fetchone())
        found = write(conn)
        if found is None:
            return None
        after = _as_text(conn.execute(_TEXT_SQL, key).fetchone())
        if (before and before[0]) != (after and after[0]):
            rel = (after or before or ("", ""))[1]
            conn.execute(
                _RECORD_SQL,
                key
                | {
                    "op": op,
                    "rel": rel,
                    "origin": origin,
                    "write_id": write_id,
                    "before": before[0] if before else None,
                    "after": after[0] if after else None,
                },
            )
        return found


def history_records(
    conn: Connection[Any], *, namespace: str, name: str, after: int = 0
) -> list[HistoryRecord]:
    """``name``'s records numbered above ``after``, oldest first."""
    rows = conn.execute(_RECORDS_SQL, {"ns": namespace, "name": name, "after": after}).fetchall()
    return _records(rows)


def recent_records(conn: Connection[Any], params: dict[str, Any]) -> list[HistoryRecord]:
    """The namespace's newest ``params["limit"]`` records, newest first."""
    return _records(conn.execute(_RECENT_SQL, params).fetchall())


def _records(rows: list[Any]) -> list[HistoryRecord]:
    return [
        HistoryRecord(
            seq=int(seq),
            name=str(n),
            op=op,
            path=str(rel),
            at=float(at),
            origin=str(origin),
            write_id=str(write_id),
            before=before,
            after=after_text,
        )
        for seq, n, op, rel, at, origin, write_id, before, after_text in rows
    ]


def last_seq(conn: Connection[Any], *, namespace: str, name: str) -> int:
    """The number of ``name``'s newest record (0: never written)."""
    row = conn.execute(_LAST_SQL, {"ns": namespace, "name": name}).fetchone()
    return int(row[0]) if row is not None else 0

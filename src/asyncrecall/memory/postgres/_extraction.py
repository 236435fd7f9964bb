"""Extraction and consolidation state of a PostgreSQL store, in its own database.

The folder keeps its cursors, journals and consolidation gate in files beside it
(``folder/_extraction``); a :class:`PostgresStore` keeps the same in three tables
of schema version 2 (see ``_schema``), per namespace:

- ``asyncrecall_extraction``: per session, the cursor (``processed``) and the pending
  journal (``jsonb``). The extractor's protocol is the folder's: the journal is written
  (one statement), then each memory through the store's own ``save_memory`` (one
  transaction each, idempotent), then :meth:`PostgresBackend.commit` moves the cursor
  and drops the journal in one statement. A crash before the journal leaves the cursor
  (the slice is extracted again); after it, the next run of the session writes the
  journal's memories again and commits, without asking the model. Nothing is processed
  twice, nothing is skipped.
- ``asyncrecall_sources``: a memory's provenance ``{session: [offsets]}`` (the folder's
  ``source_offsets`` front matter), written right after the memory; it goes when the
  memory goes (``ON DELETE CASCADE``).
- ``asyncrecall_consolidation``: when the namespace was last consolidated, sessions
  since, and the lock of a run in progress, which another process takes over once it is
  an hour old (:class:`PostgresConsolidationGate`).

Proposed names are confined as for a folder (``confine_path`` without a folder): no
absolute path, no ``..``, no hidden part, ``*.md`` only, never the index.

Each call is one transaction on the synchronous pool every namespace of the database
shares in this process (``_engine``: connections stay bounded however many namespaces
extract); the calls are a few per extraction, in worker threads, never on the user's
path. Every
statement is constant text; session ids, names and journals travel as parameters.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final, LiteralString, TypeVar

import psycopg
from psycopg import Connection
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout

from asyncrecall._exceptions import MemoryConflictError, MemoryStoreError
from asyncrecall.memory._history import HistoryRecord
from asyncrecall.memory._precondition import ANYTHING, Expected, check_expected
from asyncrecall.memory._provenance import (
    SOURCE_OFFSETS_KEY,
    Source,
    SourceOffsets,
    parse_provenance,
    parse_source_offsets,
)
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.extraction._backend import LOCK_STALE_S, MIN_HOURS, MIN_SESSIONS
from asyncrecall.memory.extraction._state import (
    Journal,
    check_session_id,
    journal_from_json,
    journal_to_json,
)
from asyncrecall.memory.postgres._history import history_records, last_seq
from asyncrecall.memory.postgres._shape import PostgresShape
from asyncrecall.memory.postgres._text import namespace_key, redact_url, row_doc

__all__ = ["PostgresBackend", "PostgresConsolidationGate"]

_T = TypeVar("_T")

CURSOR_SQL: Final[LiteralString] = """
SELECT processed FROM asyncrecall_extraction WHERE namespace = %(ns)s AND session = %(s)s
"""

JOURNAL_SQL: Final[LiteralString] = """
SELECT journal FROM asyncrecall_extraction WHERE namespace = %(ns)s AND session = %(s)s
"""

STALE_JOURNALS_SQL: Final[LiteralString] = """
SELECT session, journal, extract(epoch FROM updated_at)::float8
FROM asyncrecall_extraction
WHERE namespace = %(ns)s AND journal IS NOT NULL
  AND updated_at < clock_timestamp() - make_interval(secs => %(age)s::float8)
ORDER BY session
"""

WRITE_JOURNAL_SQL: Final[LiteralString] = """
INSERT INTO asyncrecall_extraction AS e (namespace, session, processed, journal)
VALUES (%(ns)s, %(s)s, %(start)s, %(journal)s)
ON CONFLICT (namespace, session) DO UPDATE
    SET journal = EXCLUDED.journal, updated_at = clock_timestamp()
"""

# The cursor never moves backwards; the journal goes in the same statement.
COMMIT_SQL: Final[LiteralString] = """
INSERT INTO asyncrecall_extraction AS e (namespace, session, processed, journal)
VALUES (%(ns)s, %(s)s, %(end)s, NULL)
ON CONFLICT (namespace, session) DO UPDATE
    SET processed = greatest(e.processed, EXCLUDED.processed), journal = NULL,
        updated_at = clock_timestamp()
"""

END_SESSION_SQL: Final[LiteralString] = """
DELETE FROM asyncrecall_extraction
WHERE namespace = %(ns)s AND session = %(s)s AND journal IS NULL
"""

SOURCES_SQL: Final[LiteralString] = """
SELECT sources FROM asyncrecall_sources WHERE namespace = %(ns)s AND name = %(name)s
"""

# Every memory of the namespace with all it carries, in the index's order (an export).
RECORDS_SQL: Final[LiteralString] = """
SELECT m.name, m.rel_path, m.description, m.type, m.body, m.size, m.version,
       extract(epoch FROM m.updated_at)::float8, m.xmin::text::bigint,
       extract(epoch FROM m.created_at)::float8, m.front_matter, s.sources, m.provenance
FROM asyncrecall_memories m LEFT JOIN asyncrecall_sources s USING (namespace, name)
WHERE m.namespace = %(ns)s
ORDER BY m.created_at, m.name
"""

NOTE_SESSION_SQL: Final[LiteralString] = """
INSERT INTO asyncrecall_consolidation AS c (namespace, last_at, sessions)
VALUES (%(ns)s, to_timestamp(%(now)s::float8), 1)
ON CONFLICT (namespace) DO UPDATE
    SET sessions = c.sessions + 1, last_at = coalesce(c.last_at, EXCLUDED.last_at)
"""

GATE_SQL: Final[LiteralString] = """
SELECT extract(epoch FROM last_at)::float8, sessions
FROM asyncrecall_consolidation WHERE namespace = %(ns)s
"""

GATE_ROW_SQL: Final[LiteralString] = """
INSERT INTO asyncrecall_consolidation (namespace) VALUES (%(ns)s)
ON CONFLICT (namespace) DO NOTHING
"""

ACQUIRE_SQL: Final[LiteralString] = """
UPDATE asyncrecall_consolidation
SET locked_at = to_timestamp(%(now)s::float8), locked_by = %(token)s
WHERE namespace = %(ns)s
  AND (locked_at IS NULL OR locked_at <= to_timestamp(%(stale_before)s::float8))
RETURNING locked_by
"""

# A run that completed resets the clock and the count; either way the lock goes, but
# only our own (another process may have taken over a lock it found stale).
RELEASE_SQL: Final[LiteralString] = """
UPDATE asyncrecall_consolidation
SET locked_at = NULL, locked_by = NULL,
    last_at = CASE WHEN %(completed)s THEN to_timestamp(%(now)s::float8) ELSE last_at END,
    sessions = CASE WHEN %(completed)s THEN 0 ELSE sessions END
WHERE namespace = %(ns)s AND locked_by = %(token)s
"""


class _Database:
    """A store's database, each call one transaction on the store's shared pool."""

    def __init__(self, store: PostgresShape) -> None:
        self.store = store
        self.ns = store.namespace
        self._where = redact_url(store.url)

    def run(self, action: str, work: Callable[[Connection[Any]], _T]) -> _T:
        """``work(connection)`` in one transaction; :class:`MemoryStoreError` on failure."""
        try:
            return self.store.transact(work)
        except (PoolTimeout, psycopg.Error) as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise MemoryStoreError(
                f"cannot {action} in the memory database {self._where}: {reason}"
            ) from exc

    def one(self, action: str, query: LiteralString, params: dict[str, Any]) -> Any:
        """The first row of ``query`` (or ``None``)."""
        return self.run(action, lambda conn: conn.execute(query, params).fetchone())


class PostgresBackend:
    """Extraction's backend for a :class:`PostgresStore` (see the module doc)."""

    def __init__(self, store: PostgresShape) -> None:
        self._store = store
        self._db = _Database(store)

    def __repr__(self) -> str:
        return f"PostgresBackend({self._store!r})"

    @property
    def store(self) -> PostgresShape:
        return self._store

    @property
    def files_root(self) -> Path | None:
        return None

    @property
    def state_dir(self) -> Path | None:
        return None  # the state is in the database's own tables

    @property
    def key(self) -> str:
        return f"{redact_url(self._store.url)}#{self._store.namespace}"

    def _params(self, session_id: str) -> dict[str, Any]:
        return {"ns": self._db.ns, "s": check_session_id(session_id)}

    def cursor(self, session_id: str) -> int:
        row = self._db.one("read the extraction cursor", CURSOR_SQL, self._params(session_id))
        return int(row[0]) if row is not None else 0

    def journal(self, session_id: str) -> Journal | None:
        row = self._db.one("read the extraction journal", JOURNAL_SQL, self._params(session_id))
        if row is None or row[0] is None:
            return None
        where = f"of session {session_id!r} in {self._store.location}"
        return journal_from_json(session_id, row[0], where=where)

    def stale_journals(self, older_than: float) -> list[tuple[Journal, float]]:
        params = {"ns": self._db.ns, "age": older_than}
        found = self._db.run(
            "read the extraction journals",
            lambda conn: conn.execute(STALE_JOURNALS_SQL, params).fetchall(),
        )
        where = f"in {self._store.location}"
        return [(journal_from_json(s, data, where=where), float(at)) for s, data, at in found]

    def write_journal(self, journal: Journal) -> None:
        params = self._params(journal.session)
        params |= {"start": journal.start, "journal": Jsonb(journal_to_json(journal))}
        self._db.run("write the extraction journal", lambda c: c.execute(WRITE_JOURNAL_SQL, params))

    def commit(self, journal: Journal) -> None:
        params = self._params(journal.session) | {"end": journal.end}
        self._db.run("move the extraction cursor", lambda c: c.execute(COMMIT_SQL, params))

    def end_session(self, session_id: str) -> bool:
        params = self._params(session_id)
        self._db.run("drop the extraction cursor", lambda c: c.execute(END_SESSION_SQL, params))
        return self.journal(session_id) is None

    def get(self, name: str) -> MemoryDoc | None:
        return self._store.find(name)

    def save(
        self,
        name: str,
        description: str,
        type: str,
        content: str,
        source_offsets: SourceOffsets | None,
        *,
        expected: Expected = ANYTHING,
        origin: str = "extraction",
        write_id: str = "",
        sources: Sequence[Source] | None = None,
    ) -> MemoryDoc:
        extra = {SOURCE_OFFSETS_KEY: dict(source_offsets)} if source_offsets else None
        if expected is ANYTHING:
            return self._store.save_memory(
                name, description, type, content, extra=extra, origin=origin,
                write_id=write_id, sources=sources,
            )  # fmt: skip
        revision = None if expected is None else expected.revision
        doc = self._store.save_if(
            name, description, type, content, expected_revision=revision, extra=extra,
            origin=origin, write_id=write_id, sources=sources,
        )  # fmt: skip
        if doc is None:
            check_expected(expected, self.get(name), name=name)  # says how it changed
            raise MemoryConflictError(f"memory {name!r} changed since it was read")
        return doc

    def locked(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()  # each write is its own transaction

    def last_seq(self, name: str) -> int:
        return self._db.run(
            "read the history", lambda conn: last_seq(conn, namespace=self._db.ns, name=name)
        )

    def history_after(self, name: str, seq: int) -> list[HistoryRecord]:
        return self._db.run(
            "read the history",
            lambda conn: history_records(conn, namespace=self._db.ns, name=name, after=seq),
        )

    def forget(
        self,
        name_or_rel_path: str,
        *,
        expected: Expected = ANYTHING,
        origin: str = "extraction",
        write_id: str = "",
    ) -> MemoryDoc:
        if expected is ANYTHING:
            return self._store.forget(name_or_rel_path, origin=origin, write_id=write_id)
        if expected is None:
            raise MemoryConflictError(f"memory {name_or_rel_path!r} is expected to be absent")
        assert isinstance(expected, MemoryDoc)
        gone = self._store.forget_if(
            expected.name, expected_revision=expected.revision, origin=origin, write_id=write_id
        )  # provenance: ON DELETE CASCADE
        if gone is None:
            raise MemoryConflictError(f"memory {expected.name!r} changed since it was read")
        return gone

    def provenance(self, doc: MemoryDoc) -> tuple[Source, ...]:
        return self._store.provenance_of(doc)

    def source_offsets(self, doc: MemoryDoc) -> dict[str, tuple[int, ...]]:
        row = self._db.one(
            "read memory provenance", SOURCES_SQL, {"ns": self._db.ns, "name": doc.name}
        )
        return parse_source_offsets(row[0]) if row is not None else {}

    def trim_index(self) -> bool:
        return False  # the database's index is cut when it is read (index_for_prompt)

    def repair_index(self) -> bool:
        return False  # the database's index is its rows: nothing to repair

    def records(
        self,
    ) -> list[
        tuple[MemoryDoc, float, dict[str, Any], dict[str, tuple[int, ...]], tuple[Source, ...]]
    ]:
        """Every memory of the namespace, oldest first (the index's order), with its
        creation time, its other front matter keys, its source offsets and its
        provenance, in one query."""
        found = self._db.run(
            "read the memories",
            lambda conn: conn.execute(RECORDS_SQL, {"ns": self._db.ns}).fetchall(),
        )
        root = Path(f"postgresql:{namespace_key(self._db.ns)}")
        return [
            (
                row_doc(root, (*row[:9], row[12])),
                float(row[9]),
                dict(row[10]) if isinstance(row[10], dict) else {},
                parse_source_offsets(row[11]),
                parse_provenance(row[12]),
            )
            for row in found
        ]


class PostgresConsolidationGate:
    """:class:`~asyncrecall.memory.ConsolidationGate` for a namespace of a database.

    The same rules: due when at least ``min_hours`` and ``min_sessions`` have passed
    since the last run (the first session noted starts the clock); one run at a time,
    under a lock row another process takes over once it is an hour old. Times come
    from ``clock`` (epoch seconds), so tests can move them.
    """

    def __init__(
        self,
        store: PostgresShape,
        *,
        min_hours: float = MIN_HOURS,
        min_sessions: int = MIN_SESSIONS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = _Database(store)
        self.min_hours = min_hours
        self.min_sessions = min_sessions
        self._clock = clock
        self._token = f"{uuid.uuid4().hex}"

    def __repr__(self) -> str:
        return f"PostgresConsolidationGate({self._db.store!r})"

    def note_session(self) -> None:
        params = {"ns": self._db.ns, "now": self._clock()}
        self._db.run("count a session", lambda c: c.execute(NOTE_SESSION_SQL, params))

    def due(self) -> bool:
        row = self._db.one("read the consolidation state", GATE_SQL, {"ns": self._db.ns})
        if row is None or row[0] is None:
            return False
        hours = (self._clock() - float(row[0])) / 3600.0
        return hours >= self.min_hours and int(row[1]) >= self.min_sessions

    def acquire(self) -> bool:
        now = self._clock()
        params = {"ns": self._db.ns, "now": now, "stale_before": now - LOCK_STALE_S}
        params["token"] = self._token

        def take(conn: Connection[Any]) -> bool:
            conn.execute(GATE_ROW_SQL, params)
            return conn.execute(ACQUIRE_SQL, params).fetchone() is not None

        return self._db.run("take the consolidation lock", take)

    def release(self, *, completed: bool) -> None:
        params = {"ns": self._db.ns, "now": self._clock(), "token": self._token}
        params["completed"] = completed
        self._db.run("release the consolidation lock", lambda c: c.execute(RELEASE_SQL, params))

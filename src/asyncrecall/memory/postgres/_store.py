"""Memories in PostgreSQL, shared by every worker process: :class:`PostgresStore`.

One table keyed by (namespace, name) holds what the folder's topic files hold (see
``_schema`` for the schema). A store is a view of one namespace: every store of a
process opened on one URL (with the same pool options) shares one engine (``_engine``:
its pools, loop connections, ``LISTEN`` connection and thread), each passing its
namespace with every call, so a process serving 1,000 tenants holds one engine's
connections, not 1,000 stores'. What the store promises:

- **Writes.** A save is one transaction: an upsert on (namespace, name) whose row is
  written whole, so two processes saving one name resolve to the last commit, never to
  a mix of the two; a forget is one transaction too. Each announces itself with
  ``NOTIFY`` in the same transaction (delivered at commit), carrying digests of the
  namespace and the name keyed by the database's secret (``_text.Announcer``), never
  the name. The limits are the folder's: a non-empty name of at most 1,000 bytes, a
  known type, no lone surrogate, a rendered document of at most 1 MiB.
- **Recall.** :meth:`candidates` asks the database, in one round trip, for the newest
  memories of the namespace; past 200, for the best 60 full-text matches instead plus
  the 20 newest (``_candidates``; the knobs are in ``_sql``). The
  match uses a ``tsvector`` column under a GIN index: the query's terms except those
  expected in over 1,000 rows of the namespace (judged from a sample of its newest
  memories: a common word would match an arbitrary share of a large namespace, and
  another tenant's words never count); the rows holding all of them are ranked
  (``ts_rank``) before those holding some, at most 1,000 of each, which bounds the
  query's cost. The selectors rank the candidates as
  they rank a folder. The query runs inside the recall task on a connection of the
  caller's own event loop (``_loops``: psycopg's async I/O never blocks that
  loop, and no thread hop is paid), or on the engine's own loop and pool
  (``_portal``) when the loop has ``max_size`` queries in flight already;
  the turn never waits for it. Synchronous calls (CLI, memory tool) use a
  synchronous pool in the caller's thread.
- **Caches.** Per-process caches (the index text, scans, candidate lists) are used
  only while the engine's ``LISTEN`` connection is up; any save or forget, by this
  process or another, bumps :attr:`generation`, empties them and calls the change
  listeners (:meth:`add_change_listener`). A lost ``LISTEN`` connection empties them,
  and they stay off until it is back. The selectors' caches (term counts, vectors)
  need no invalidation: every document carries its row version's revision (``xmin``,
  new with each insert or update) in ``MemoryDoc.fingerprint``, so a rewrite by
  another process that keeps size and modification time (an import) is still counted
  or embedded afresh.
- **Faults.** A database that cannot be reached when the store opens, or whose schema
  is newer than this code, is a :class:`ConfigError`. Later, a save, get or forget
  raises :class:`MemoryStoreError`; recall and the index log one warning per outage
  of the database (not per namespace) on ``asyncrecall.memory`` and give nothing
  (the turn goes on without memory) until the database answers again. The index
  (read on the event loop) never waits for a connection to be made while the database
  is down; the pools give a reconnection up
  after :data:`~._engine.RECONNECT_GIVE_UP_S`, so the first call after the database
  is back connects at once instead of waiting out a doubled pause.
- **Input.** Every query is constant SQL text; names, namespaces and bodies travel
  only as parameters.

The parts: ``_engine`` (the shared connections), ``_changes`` (caches),
``_candidates`` and ``_loops`` (recall's query and its connections), ``_writes`` (a
save's checks, a forget's transaction), ``_text`` (values and helpers),
``_sql`` and ``_schema``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, LiteralString, TypeVar

import psycopg
from psycopg import Connection
from psycopg_pool import ConnectionPool, PoolTimeout

from asyncrecall._exceptions import ConfigError, MemoryConflictError, MemoryStoreError
from asyncrecall.memory._document import checked_text, front_matter, parse_document
from asyncrecall.memory._history import HistoryOp, HistoryRecord, revert_target, undo_plan
from asyncrecall.memory._limits import (
    INDEX_MAX_LINES,
    MAX_NAMESPACE_BYTES,
    SCAN_LIMIT,
    cut_index,
    index_line,
)
from asyncrecall.memory._pending import PENDING_KEY, PendingChange, waits
from asyncrecall.memory._precondition import ANYTHING, Expected, check_expected
from asyncrecall.memory._provenance import (
    LEGACY_SOURCE,
    SOURCE_OFFSETS_KEY,
    Source,
    is_quarantined,
    new_source,
    parse_provenance,
)
from asyncrecall.memory._store import LIBRARY_ORIGIN, ChangeWatch
from asyncrecall.memory._types import MemoryDoc, MemoryType
from asyncrecall.memory.postgres._candidates import CandidateQuery
from asyncrecall.memory.postgres._changes import ChangeFeed
from asyncrecall.memory.postgres._engine import Engine, EngineOptions
from asyncrecall.memory.postgres._engine import acquire as acquire_engine
from asyncrecall.memory.postgres._engine import release as release_engine
from asyncrecall.memory.postgres._history import (
    WRITE_NAMES_SQL,
    history_records,
    recent_records,
    recorded,
)
from asyncrecall.memory.postgres._rls import enable_row_security
from asyncrecall.memory.postgres._schema import (
    CHANNEL,
    SCHEMA_VERSION,
    ensure_schema,
)
from asyncrecall.memory.postgres._shape import PostgresShape
from asyncrecall.memory.postgres._sql import (
    FORGET_IF_SQL,
    FRONT_MATTER_SQL,
    GET_BY_NAME_SQL,
    INDEX_SQL,
    NAMESPACE_SIZE_SQL,
    PENDING_SQL,
    PROVENANCE_SQL,
    QUARANTINED_SQL,
    SAVE_IF_SQL,
    SAVE_NEW_SQL,
    SCAN_SQL,
    UPSERT_SQL,
)
from asyncrecall.memory.postgres._text import (
    Announcer,
    StoreChange,
    check_text,
    default_namespace,
    describe,
    namespace_key,
    redact_url,
    row_doc,
)
from asyncrecall.memory.postgres._writes import (
    REL_PATH_KEY,
    delete_memory,
    find_memory,
    save_row,
    second_rel_path,
)

if TYPE_CHECKING:
    from asyncrecall.memory._transfer import MemoryRecord
    from asyncrecall.memory.postgres._extraction import PostgresBackend, PostgresConsolidationGate

__all__ = ["PostgresStore", "StoreChange", "default_namespace", "redact_url"]

logger = logging.getLogger("asyncrecall.memory")

_T = TypeVar("_T")


#: The SQLSTATEs of a transaction PostgreSQL rolled back that a retry may well pass:
#: a deadlock and a serialisation failure.
RETRIED_STATES: Final = frozenset({"40P01", "40001"})
#: Retries of such a transaction at most (then the error is the caller's).
ROLLBACK_RETRIES: Final = 8
_ROLLBACK_PAUSE_S: Final = 0.002  # doubled each retry, a random share of it taken
#: How long a read on the event loop waits for a connection while the database is down.
_DOWN_WAIT_S: Final = 0.01
#: A caller waits for a connection in slices this long (see ``_connection``).
_WAIT_SLICE_S: Final = 0.5
_HOLD_TRIES: Final = 5  # a waiting change written against a memory others keep changing


class PostgresStore(PostgresShape):
    """The memories of one namespace in a PostgreSQL database (psycopg 3 and its pools): a
    :class:`~asyncrecall.memory.Store` shared by any number of processes.

    ``url`` is a libpq connection URI (``postgresql://user@host/db``,
    ``postgresql:///db?host=/run/postgresql``). Nothing connects until
    :meth:`connect` or the first call; :meth:`open` does both. Close with
    :meth:`close` (or ``with``); the last store of the process on this database stops
    the engine's thread and pools. :meth:`for_namespace` opens another namespace's
    store on the same engine (as :meth:`open` with the same URL and options does).

    The engine (one per process, URL and ``min_size``/``max_size``/``timeout``/``listen``)
    holds a synchronous pool for synchronous calls (the CLI, the agent's memory tool,
    extraction's state), used in the caller's thread; :meth:`candidates` (recall) uses
    up to ``max_size`` connections of the caller's event loop, then an async pool on
    the engine's own loop, where the ``LISTEN`` connection lives (``_portal``).
    """

    #: A database round trip never runs inline (``scan_cached`` is always ``None``).
    inline_scan = False

    def __init__(
        self,
        url: str,
        *,
        namespace: str,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 5.0,
        listen: bool = True,
    ) -> None:
        if "\x00" in namespace:
            raise ConfigError("a memory namespace cannot hold a NUL character")
        try:
            size = len(checked_text("a memory namespace", namespace).encode("utf-8"))
        except MemoryStoreError as exc:
            raise ConfigError(str(exc)) from None
        if not 0 < size <= MAX_NAMESPACE_BYTES:
            raise ConfigError(
                f"a memory namespace is 1 to {MAX_NAMESPACE_BYTES:,} bytes in UTF-8"
                f"{f'; this one is {size:,}' if size else ''}"
            )
        self.url = url
        self._namespace = namespace
        self._where = redact_url(url)
        self._ns_key = namespace_key(namespace)
        self._id = uuid.uuid4().hex  # our own NOTIFYs come back: known by this
        self._doc_root = Path(f"postgresql:{self._ns_key}")
        self._timeout = timeout
        self._options = EngineOptions(
            min_size=min_size, max_size=max_size, timeout=timeout, listen=listen
        )
        self._feed = ChangeFeed(self._id)
        self._announce: Announcer | None = None  # the database's secret, read at connect
        self._connect_lock = threading.Lock()
        # Set together by ``connect``: the process's engine of this database, and the
        # namespace's candidates query over its loop connections.
        self._engine: Engine | None = None
        self._query: CandidateQuery | None = None
        self._closed = False

    @classmethod
    def open(cls, url: str, *, namespace: str, **options: Any) -> PostgresStore:
        """A connected store (schema created or migrated), or :class:`ConfigError`."""
        store = cls(url, namespace=namespace, **options)
        try:
            store.connect()
        except BaseException:
            store.close()
            raise
        return store

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r}, namespace={self.namespace!r})"

    @property
    def namespace(self) -> str:
        """The namespace this store is a view of."""
        return self._namespace

    @property
    def changes(self) -> ChangeWatch:
        """The change feed: every save and forget of the namespace by any process
        (``LISTEN``/``NOTIFY``), through :meth:`add_change_listener`."""
        return self

    @property
    def location(self) -> str:
        """The database (password hidden) and the namespace."""
        return f"{self._where} namespace {self.namespace!r}"

    @property
    def generation(self) -> int:
        """Bumped by every change seen (any process) and every ``LISTEN`` reconnect."""
        return self._feed.generation

    @property
    def caching(self) -> bool:
        """Whether the caches are in use: the ``LISTEN`` connection is up."""
        return self._feed.listening

    def memory_id(self, name: str) -> str:
        """What the notifications about the memory ``name`` carry instead of its name
        (:attr:`StoreChange.memory_id`); connects first if need be."""
        return self._announcer().memory_id(" ".join(name.split()))

    def _announcer(self) -> Announcer:
        if self._announce is None:
            self.connect()
        assert self._announce is not None
        return self._announce

    def add_change_listener(self, callback: Callable[[StoreChange], None]) -> Callable[[], None]:
        """Call ``callback`` on each change seen (on the store's thread, or on the
        writer's for this store's own writes: keep it short, never call the store from
        it); returns a function that removes it."""
        return self._feed.add_listener(callback)

    # -- life cycle ---------------------------------------------------------------------

    def connect(self) -> None:
        """Create or migrate the schema, open the pools, start listening (all the
        process's engine of this database does once, ``_engine``); idempotent.

        :class:`ConfigError` (one line) when the database cannot be reached or its
        schema is newer than this code.
        """
        with self._connect_lock:
            if self._closed:
                raise MemoryStoreError(f"the memory store {self.location} is closed")
            if self._engine is not None:
                return
            engine = acquire_engine(self.url, self._options)
            try:
                key = engine.notify_key(self.namespace)
            except BaseException:
                release_engine(engine)
                raise
            # Without its key (a namespace this role is not bound to) the store hears
            # nothing: digests of a random key, and no feed attached, so no caching.
            announce = Announcer(key or uuid.uuid4().hex, self.namespace)
            self._announce = announce
            self._feed.set_announcer(announce)
            self._query = CandidateQuery(
                namespace=self.namespace, root=self._doc_root, loops=engine.loops
            )
            if key is not None:
                engine.attach(self._feed)
            self._engine = engine

    def for_namespace(self, namespace: str) -> PostgresStore:
        """A connected store of another namespace of this database, sharing this one's
        connections (close it as any store)."""
        opts = self._options
        return PostgresStore.open(
            self.url, namespace=namespace, min_size=opts.min_size, max_size=opts.max_size,
            timeout=opts.timeout, listen=opts.listen,
        )  # fmt: skip

    @staticmethod
    def migrate(url: str, *, connect_timeout: int = 5) -> tuple[int, int]:
        """Create or migrate the schema of the database at ``url`` (its owner's job:
        ``asyncrecall memory migrate``); the version found and the version now.
        Opens no pool: one connection. :class:`ConfigError` (one line) when the
        database cannot be reached, its schema is newer, or this role may not."""
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout) as conn:
                found = ensure_schema(conn, where=redact_url(url))
        except psycopg.Error as exc:
            raise ConfigError(
                f"cannot use the memory database {redact_url(url)}: {describe(exc)}"
            ) from exc
        return found, SCHEMA_VERSION

    @staticmethod
    def enable_row_security(
        url: str,
        *,
        bind: Iterable[tuple[str, str]] | Mapping[str, str] = (),
        bind_all: Iterable[str] = (),
    ) -> tuple[str, ...]:
        """Have the database itself keep tenants apart (``_rls``), as the tables' owner:
        a role reads and writes only the namespaces it is bound to, none when bound to
        none. ``bind``: (role, namespace) pairs, a role in several pairs bound to each
        namespace; ``bind_all``: roles bound to every namespace (the fleet's). All or
        nothing, idempotent; returns the warnings to show (a role the policies do not
        hold, no role bound to all namespaces). :class:`ConfigError` (one line) when
        the database cannot be reached, this role may not, or a role does not exist."""
        pairs: list[tuple[str, str | None]] = list(
            bind.items() if isinstance(bind, Mapping) else bind
        )
        pairs += [(role, None) for role in bind_all]
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                ensure_schema(conn, where=redact_url(url))
                return tuple(enable_row_security(conn, bind=pairs))
        except psycopg.Error as exc:
            raise ConfigError(
                f"cannot enable row-level security in {redact_url(url)}: {describe(exc)}"
            ) from exc

    def close(self) -> None:
        """Stop this namespace's caches; the last store of the process on this database
        closes its engine (pools, the loops' connections, the listener, its thread).
        Idempotent."""
        with self._connect_lock:
            if self._closed:
                return
            self._closed = True
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.detach(self._feed)
            release_engine(engine)

    def _connected(self) -> Engine:
        engine = self._engine
        if engine is None:
            self.connect()
            engine = self._engine
            if engine is None:  # pragma: no cover - closed by another thread meanwhile
                raise MemoryStoreError(f"the memory store {self.location} is closed")
        return engine

    def _outage(self, exc: BaseException) -> None:
        engine = self._engine
        if self._closed or engine is None:
            return  # closed under a call (its pool is closed): no outage of the database
        engine.outage(exc)

    def _answered(self) -> None:
        engine = self._engine
        if engine is not None:
            engine.answered()

    # -- reading ------------------------------------------------------------------------

    def ensure(self) -> str:
        """Connect (creating the schema if needed); returns :attr:`location`."""
        self.connect()
        return self.location

    def scan_cached(
        self, *, limit: int | None = SCAN_LIMIT, budget_bytes: int = 0
    ) -> list[MemoryDoc] | None:
        """Never an answer without a round trip: recall does not run inline on a database."""
        return None

    def warm_scan(self) -> list[MemoryDoc]:
        """:meth:`scan` (warming a database is its first round trip)."""
        return self.scan()

    def scan(self, *, limit: int | None = SCAN_LIMIT) -> list[MemoryDoc]:
        """The namespace's memories, newest first, at most ``limit`` (``None``: all)."""
        cached = self._feed.scan(limit)
        if cached is not None:
            return list(cached)
        token = self._feed.token()
        docs = self._rows(SCAN_SQL, {"ns": self.namespace, "limit": limit})
        self._feed.keep_scan(token, limit, docs)
        return list(docs)

    def count(self) -> int:
        """How many memories the namespace holds (counted by the database)."""
        row = self._read("read from", lambda conn: conn.execute(
            NAMESPACE_SIZE_SQL, {"ns": self.namespace}).fetchone())  # fmt: skip
        return int(row[0]) if row is not None else 0

    def get(self, name_or_rel_path: str) -> MemoryDoc:
        """The memory with this exact relative path, else this exact name, else this
        name in another case when only one memory has it (never a file-name stem);
        :class:`MemoryStoreError` when none does, or several in other cases."""
        key = name_or_rel_path.strip()
        check_text("a memory name", key)
        try:
            row = self._run(
                lambda conn: find_memory(conn, key, namespace=self.namespace, where=self.location)
            )
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._error("read", exc) from exc
        if row is None:
            raise MemoryStoreError(f"no memory named {key!r} in {self.location}")
        return row_doc(self._doc_root, row)

    # -- export and import (``memory export``/``import``) ------------------------------

    def export_records(self) -> list[MemoryRecord]:
        """Every memory with its provenance, times and other keys, in the index's order."""
        from asyncrecall.memory.postgres._transfer import export_records

        return export_records(self)

    def import_record(
        self, record: MemoryRecord, *, trusted: bool = True, write_id: str = "", as_is: bool = False
    ) -> MemoryDoc:
        """Save ``record`` (created or replaced) with all it carries."""
        from asyncrecall.memory.postgres._transfer import import_record

        return import_record(self, record, trusted=trusted, write_id=write_id, as_is=as_is)

    # -- where extraction and consolidation keep their state -----------------------------

    def extraction_backend(self, *, state_dir: Path | None = None) -> PostgresBackend:
        """Extraction's view of this namespace: provenance, cursors and journals in the
        database's own tables (``state_dir`` is a folder's: not used here)."""
        del state_dir
        from asyncrecall.memory.postgres._extraction import PostgresBackend

        return PostgresBackend(self)

    def consolidation_gate(self, **kwargs: Any) -> PostgresConsolidationGate:
        """When an automatic consolidation of this namespace is due, and its lock row
        (``kwargs``: ``min_hours``, ``min_sessions``, ``clock``)."""
        from asyncrecall.memory.postgres._extraction import PostgresConsolidationGate

        return PostgresConsolidationGate(self, **kwargs)

    def index_for_prompt(self) -> str:
        """The ``MEMORY.md`` equivalent: one line per memory, oldest first, cut as the
        folder's index is cut (200 lines or 25,000 bytes, with a warning line).

        An unreachable database reads as "" (one warning per outage), as a missing
        ``MEMORY.md`` does: the turn goes on without the index.
        """
        cached = self._feed.index()
        if cached is not None:
            return cached
        token = self._feed.token()
        params = {"ns": self.namespace, "lines": INDEX_MAX_LINES + 1}
        # It is read on the event loop (a session's start, a reset): while the database
        # is down (the listener lost it, or the last read failed), take a connection the
        # pool has ready or none, never wait for one to be made.
        engine = self._engine
        down = engine is not None and (
            not engine.healthy or (self._options.listen and not self._feed.listening)
        )
        try:
            rows = self._run(
                lambda conn: conn.execute(INDEX_SQL, params).fetchall(),
                wait=_DOWN_WAIT_S if down else None,
            )
        except (PoolTimeout, psycopg.Error, ConfigError) as exc:
            self._outage(exc)
            return ""
        self._answered()
        text = ""
        if rows:
            lines = [index_line(name, rel, description) for name, rel, description, _, _ in rows]
            text = cut_index(lines, total_lines=int(rows[0][3]), total_bytes=int(rows[0][4]))
        self._feed.keep_index(token, text)
        return text

    async def candidates(self, query: str, *, exclude: Collection[str] = ()) -> list[MemoryDoc]:
        """What recall offers a selector for ``query`` (see the module's promises).

        An unreachable database logs one warning per outage and offers nothing.
        """
        if self._closed:
            return []
        key = (query, frozenset(exclude))
        cached = self._feed.candidates(key)
        if cached is not None:
            return list(cached)
        engine, candidates = self._engine, self._query
        if engine is None or candidates is None:
            try:
                await asyncio.to_thread(self.connect)  # first use: never on our loop
            except (ConfigError, MemoryStoreError) as exc:
                self._outage(exc)
                return []
            engine, candidates = self._engine, self._query
            if engine is None or candidates is None:
                return []  # closed meanwhile
        token = self._feed.token()
        params = candidates.params(query, key[1])
        try:
            docs = await candidates.on_caller_loop(params)
            if docs is None:  # this loop has all its connections busy: the engine's loop
                portal = engine.portal
                if portal is None:
                    raise RuntimeError("the store is closed")
                docs = await portal.acall(self._on_own_pool(engine, candidates, params))
        except RuntimeError:
            return []  # the store was closed meanwhile
        except (PoolTimeout, psycopg.Error) as exc:
            self._outage(exc)
            return []
        self._answered()
        self._feed.keep_candidates(token, key, docs)
        return list(docs)

    @staticmethod
    async def _on_own_pool(
        engine: Engine, candidates: CandidateQuery, params: dict[str, Any]
    ) -> list[MemoryDoc]:
        apool = engine.apool
        if apool is None:
            raise RuntimeError("the store is closed")
        return await candidates.on_pool(apool, params)

    def _rows(self, query: LiteralString, params: dict[str, Any]) -> list[MemoryDoc]:
        try:
            rows = self._run(lambda conn: conn.execute(query, params).fetchall())
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._error("read", exc) from exc
        return [row_doc(self._doc_root, row) for row in rows]

    def transact(self, work: Callable[[Connection[Any]], _T]) -> _T:
        """``work(connection)`` in one transaction on the pool every namespace of this
        database shares (the helpers' statements: extraction's state); raises what
        psycopg and the pool raise. Run again on another connection when the server
        closed this one (nothing of it was written)."""

        def in_transaction(conn: Connection[Any]) -> _T:
            with conn.transaction():
                return work(conn)

        return self._run(in_transaction)

    def _run(self, work: Callable[[Connection[Any]], _T], *, wait: float | None = None) -> _T:
        """``work(connection)`` on a pooled connection, which must be one transaction
        (one statement, or a ``conn.transaction()`` block). ``wait``: how long to wait
        for a connection (default: the store's ``timeout``).

        On a connection the server has closed (a restart), again on another (the pool
        replaces closed ones). On a transaction PostgreSQL rolled back, a deadlock
        (``40P01``) or a serialisation failure (``40001``), again after a short random
        pause, at most :data:`ROLLBACK_RETRIES` times: nothing of it was written.
        """
        engine = self._connected()
        pool = engine.pool
        if pool is None:
            raise MemoryStoreError(f"the memory store {self.location} is closed")
        reconnects = rollbacks = 0
        while True:
            with self._connection(pool, wait) as conn:
                try:
                    return work(conn)
                except psycopg.OperationalError as exc:  # 40001 and 40P01 are ones too
                    if exc.sqlstate in RETRIED_STATES and not conn.closed:
                        if rollbacks == ROLLBACK_RETRIES:
                            raise
                        rollbacks += 1
                    elif not conn.closed or reconnects == self._options.max_size:
                        raise
                    else:
                        reconnects += 1
                        continue
            # Outside the connection: the pause holds nothing another writer waits for.
            time.sleep(random.uniform(0, _ROLLBACK_PAUSE_S * 2**rollbacks))

    @contextlib.contextmanager
    def _connection(
        self, pool: ConnectionPool[Connection[Any]], wait: float | None
    ) -> Iterator[Connection[Any]]:
        """A pooled connection, waited for ``wait`` s at most (default: ``timeout``).

        Waited for in slices of :data:`_WAIT_SLICE_S`: the pool makes a connection only
        for a caller that arrives (its own reconnection gives up after
        :data:`~._engine.RECONNECT_GIVE_UP_S`), so a caller waiting since before the database came
        back would otherwise wait out its whole timeout. Each slice arrives anew."""
        total = self._timeout if wait is None else wait
        deadline = time.monotonic() + total
        while True:
            left = deadline - time.monotonic()
            try:
                conn = pool.getconn(timeout=max(min(_WAIT_SLICE_S, left), 0.001))
            except PoolTimeout:
                if time.monotonic() < deadline:
                    continue
                raise PoolTimeout(f"couldn't get a connection after {total:.2f} sec") from None
            break
        try:
            yield conn
        finally:
            pool.putconn(conn)

    # -- writing ------------------------------------------------------------------------

    def save_memory(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        expected: Expected = ANYTHING,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
        sources: Sequence[Source] | None = None,
        extra: Mapping[str, Any] | None = None,
        updated_at: float | None = None,
        created_at: float | None = None,
        op: HistoryOp = "save",
    ) -> MemoryDoc:
        """Create or update the memory ``name`` in one transaction (without ``expected``:
        last write wins; with it: :meth:`save_if` on the revision read, and
        :class:`MemoryConflictError`, nothing written, when it no longer holds).

        ``updated_at`` and ``created_at`` (POSIX times) replace "now" as its
        modification and creation times: an import keeps the original's. ``extra``
        holds front matter keys beyond the three standard ones, as for a folder's
        ``save_memory``: ``source_offsets`` is the memory's provenance (written in the
        same transaction; without it the provenance is left as it is), any other key
        is kept with the row (a save without ``extra`` drops them, as a rewritten topic
        file does). An empty name, an unknown type, content over 1 MiB (as a topic
        file) or a NUL character raise :class:`MemoryStoreError`, and nothing is
        written. The write and its history record (``origin``, ``write_id``) are one
        transaction (``_history``). ``sources`` (default: one source of ``origin``, now;
        untrusted unless ``origin`` names a trusted one) are appended to the row's
        ``provenance``. An untrusted change to a memory recall uses waits beside it
        (``_pending``).
        """
        if expected is not ANYTHING:
            revision = None if expected is None else expected.revision
            doc = self.save_if(
                name, description, type, content, expected_revision=revision,
                updated_at=updated_at, extra=extra, origin=origin, write_id=write_id,
                sources=sources,
            )  # fmt: skip
            if doc is None:
                check_expected(expected, self.find(name), name=name)  # says how it changed
                raise MemoryConflictError(f"memory {name!r} changed since it was read")
            return doc
        exact = op == "revert"  # a version comes back with its own provenance
        added = () if exact else tuple(sources) if sources is not None else (new_source(origin),)
        for _ in range(_HOLD_TRIES):
            held = self._hold(name, description, type, content, added, None, origin, write_id)
            if held != "changed":
                break
        else:
            raise MemoryConflictError(f"memory {name!r} kept changing while it was saved")
        if held is not None:
            return held
        row = self._save_row(
            name, description, type, content, updated_at, created_at, extra, added, exact=exact
        )
        doc = self._write(UPSERT_SQL, row, op=op, origin=origin, write_id=write_id)
        assert doc is not None  # RETURNING of an upsert: always one row
        return doc

    def save_if(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        expected_revision: int | None,
        updated_at: float | None = None,
        extra: Mapping[str, Any] | None = None,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
        sources: Sequence[Source] | None = None,
    ) -> MemoryDoc | None:
        """:meth:`save_memory`, only if the memory ``name`` (exact) is still at
        ``expected_revision`` (its :attr:`MemoryDoc.revision` as read), or does not
        exist when it is ``None``; else nothing is written and the answer is ``None``.

        One statement (the check, the write and its ``NOTIFY``): of two writers
        expecting one revision, exactly one writes. Provenance is left as it is unless
        ``extra`` carries ``source_offsets`` (as for :meth:`save_memory`). An untrusted
        change to a memory recall uses waits beside it (``_pending``).
        """
        added = tuple(sources) if sources is not None else (new_source(origin),)
        if expected_revision is not None:
            held = self._hold(
                name, description, type, content, added, expected_revision, origin, write_id
            )
            if held is not None:
                return None if held == "changed" else held
        row = self._save_row(name, description, type, content, updated_at, None, extra, added)
        query, params = SAVE_NEW_SQL, row
        if expected_revision is not None:
            query, params = SAVE_IF_SQL, row | {"expected": int(expected_revision)}
        return self._write(query, params, op="save", origin=origin, write_id=write_id)

    def _hold(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        added: Sequence[Source],
        expected_revision: int | None,
        origin: str,
        write_id: str,
    ) -> MemoryDoc | Literal["changed"] | None:
        """An untrusted change to a memory recall uses, written as its waiting change
        (``_pending``): the memory as it now is; ``None``: the write is not one (make it
        as asked); ``"changed"``: the memory is not at ``expected_revision`` (or
        changed meanwhile), nothing written."""
        if not added or all(s.trusted for s in added):
            return None
        current = self.find(name)
        if current is None:
            return None
        if expected_revision is not None and current.revision != expected_revision:
            return "changed"
        if not waits(self.provenance_of(current), added):
            return None
        if (current.description, current.type, current.body) == (
            " ".join(description.split()),
            type,
            content.strip("\n"),
        ):
            return current  # it already says this: an untrusted source adds nothing
        keys = self._front_matter(current.name)
        change = PendingChange(" ".join(description.split()), str(type), content, tuple(added))
        saved = self.save_if(
            current.name, current.description, current.type, current.body,
            expected_revision=current.revision, extra={**keys, PENDING_KEY: change.to_json()},
            origin=origin, write_id=write_id, sources=(),
        )  # fmt: skip
        return "changed" if saved is None else saved

    def pending_of(self, doc: MemoryDoc) -> PendingChange | None:
        """The untrusted change waiting beside ``doc`` for ``memory confirm``
        (``_pending``), or ``None``."""
        return PendingChange.from_json(self._front_matter(doc.name).get(PENDING_KEY))

    def pending_names(self) -> set[str]:
        """The names of the memories with a change waiting beside them."""
        params = {"ns": self.namespace}
        rows = self._read("read from", lambda conn: conn.execute(
            PENDING_SQL, params).fetchall())  # fmt: skip
        return {str(name) for (name,) in rows}

    def _front_matter(self, name: str) -> dict[str, Any]:
        params = {"ns": self.namespace, "name": name}
        row = self._read("read from", lambda conn: conn.execute(
            FRONT_MATTER_SQL, params).fetchone())  # fmt: skip
        return dict(row[0]) if row is not None and isinstance(row[0], dict) else {}

    def forget_if(
        self,
        name: str,
        *,
        expected_revision: int,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
    ) -> MemoryDoc | None:
        """Remove the memory ``name`` (exact) only if it is still at
        ``expected_revision``; what was removed, or ``None`` (nothing removed) when it
        is gone or was written since. One statement, with its ``NOTIFY``."""
        key = " ".join(name.split())
        check_text("a memory name", key)
        params = {"ns": self.namespace, "name": key, "expected": int(expected_revision)}
        announce = self._announcer()
        params |= {"channel": CHANNEL, "key": announce.namespace_key, "src": self._id}
        params["mid"] = announce.memory_id(key)
        try:
            found = self._run(
                lambda conn: recorded(
                    conn, namespace=self.namespace, name=key, lock=None, op="forget",
                    origin=origin, write_id=write_id,
                    write=lambda c: c.execute(FORGET_IF_SQL, params).fetchone(),
                )
            )  # fmt: skip
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._error("forget in", exc) from exc
        if found is None:
            return None
        doc = row_doc(self._doc_root, found[:10])
        self._feed.changed("forget", doc.name, int(found[6]))
        return doc

    def _save_row(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        updated_at: float | None,
        created_at: float | None,
        extra: Mapping[str, Any] | None,
        sources: Sequence[Source],
        *,
        exact: bool = False,
    ) -> dict[str, Any]:
        return save_row(
            name,
            description,
            type,
            content,
            updated_at=updated_at,
            created_at=created_at,
            extra=extra,
            namespace=self.namespace,
            announce=self._announcer(),
            source=self._id,
            sources=sources,
            exact=exact,
        )

    def _write(
        self,
        query: LiteralString,
        row: dict[str, Any],
        *,
        op: HistoryOp,
        origin: str,
        write_id: str,
    ) -> MemoryDoc | None:
        """A save's statement with its history record; again under the second file name
        when another name owns the plain one. The row written, or ``None`` when its
        condition failed."""
        for attempt in range(2):
            try:
                found = self._run(
                    lambda conn: recorded(
                        conn, namespace=self.namespace, name=row["name"], lock=row["lock"],
                        op=op, origin=origin, write_id=write_id,
                        write=lambda c: c.execute(query, row).fetchone(),
                    )
                )  # fmt: skip
            except psycopg.errors.UniqueViolation as exc:
                if exc.diag.constraint_name != REL_PATH_KEY or attempt:
                    raise self._error("save to", exc) from exc
                second_rel_path(row, self._announcer())  # another name owns this file name
                continue
            except (PoolTimeout, psycopg.Error) as exc:
                raise self._error("save to", exc) from exc
            if found is None:
                return None
            doc = row_doc(self._doc_root, found[:10])
            self._feed.changed("save", doc.name, int(found[6]))
            return doc
        raise AssertionError("unreachable")  # pragma: no cover

    def forget(
        self,
        name_or_rel_path: str,
        *,
        expected: Expected = ANYTHING,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
        op: HistoryOp = "forget",
    ) -> MemoryDoc:
        """Remove the memory :meth:`get` finds for this key (one transaction, with its
        history record); returns what was removed. No such memory, or an ambiguous key,
        is a :class:`MemoryStoreError` and nothing is removed. ``expected``: the memory
        as read (:meth:`forget_if` on its revision; :class:`MemoryConflictError`, nothing
        removed, when it was written since)."""
        key = name_or_rel_path.strip()
        check_text("a memory name", key)
        if expected is not ANYTHING:
            current = self.get(key)
            check_expected(expected, current, name=current.name)
            assert isinstance(expected, MemoryDoc)  # None failed the check: it exists
            gone = self.forget_if(
                current.name, expected_revision=expected.revision, origin=origin,
                write_id=write_id,
            )  # fmt: skip
            if gone is None:
                raise MemoryConflictError(f"memory {current.name!r} changed since it was read")
            return gone

        def remove(conn: Connection[Any]) -> tuple[MemoryDoc, int] | None:
            found = find_memory(conn, key, namespace=self.namespace, where=self.location)
            if found is None:
                return None
            name = str(found[0])
            return recorded(  # type: ignore[no-any-return]
                conn, namespace=self.namespace, name=name, lock=None, op=op, origin=origin,
                write_id=write_id,
                write=lambda c: delete_memory(
                    c, name, namespace=self.namespace, announce=self._announcer(),
                    source=self._id, root=self._doc_root, where=self.location, exact=True,
                ),
            )  # fmt: skip

        try:
            removed = self._run(remove)
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._error("forget in", exc) from exc
        if removed is None:
            raise MemoryStoreError(f"no memory named {key!r} in {self.location}")
        self._feed.changed("forget", removed[0].name, removed[1])
        return removed[0]

    def find(self, name: str) -> MemoryDoc | None:
        """The memory called exactly ``name`` (``None``: there is none)."""
        key = " ".join(name.split())
        check_text("a memory name", key)
        row = self._read("read from", lambda conn: conn.execute(
            GET_BY_NAME_SQL, {"ns": self.namespace, "key": key}).fetchone())  # fmt: skip
        return row_doc(self._doc_root, row) if row is not None else None

    def quarantined_paths(self) -> set[str]:
        """The relative paths of the quarantined memories (see ``_provenance``); none
        while the database is unreachable (its index reads as "" then too)."""
        params = {"ns": self.namespace}
        try:
            rows = self._run(lambda conn: conn.execute(QUARANTINED_SQL, params).fetchall())
        except (PoolTimeout, psycopg.Error, ConfigError) as exc:
            self._outage(exc)
            return set()
        return {str(rel) for rel, sources in rows if is_quarantined(parse_provenance(sources))}

    def confirm(self, name_or_rel_path: str) -> MemoryDoc:
        """The user's word for a memory: a ``confirmed`` source is appended to its
        provenance, which lifts a quarantine; its text and other keys are kept. A change
        waiting beside it (``_pending``) is applied, with that change's sources."""
        doc = self.get(name_or_rel_path)
        extra = self._front_matter(doc.name)
        change = PendingChange.from_json(extra.pop(PENDING_KEY, None))
        fields: tuple[str, str, str] = (doc.description, doc.type, doc.body)
        sources: tuple[Source, ...] = (Source.now("confirmed"),)
        if change is not None:  # the waiting change is applied, with its sources
            fields = (change.description, change.type, change.body)
            sources = (*change.sources, *sources)
        saved = self.save_if(
            doc.name, *fields, expected_revision=doc.revision, extra=extra,
            origin="confirmed", sources=sources,
        )  # fmt: skip
        if saved is None:
            raise MemoryConflictError(f"memory {doc.name!r} changed while it was confirmed")
        return saved

    def provenance_of(self, doc: MemoryDoc) -> tuple[Source, ...]:
        """Where ``doc``'s writes came from (its row's ``provenance``; none: the user's
        own)."""
        params = {"ns": self.namespace, "name": doc.name}
        row = self._read("read from", lambda conn: conn.execute(
            PROVENANCE_SQL, params).fetchone())  # fmt: skip
        sources = parse_provenance(row[0]) if row is not None else ()
        return sources or (LEGACY_SOURCE,)

    def history_of(self, name_or_rel_path: str) -> list[HistoryRecord]:
        """Every recorded write of a memory, oldest first: by an existing memory's key
        (as :meth:`get`), or by the exact name of one that is gone."""
        name = self._history_name(name_or_rel_path)
        return self._read("read the history of", lambda conn: history_records(
            conn, namespace=self.namespace, name=name))  # fmt: skip

    def revert(
        self, name_or_rel_path: str, *, to: int | None = None, origin: str = "user"
    ) -> MemoryDoc | None:
        """Undo writes of one memory, as the folder's :meth:`FolderStore.revert` does."""
        name = self._history_name(name_or_rel_path)
        target = revert_target(self.history_of(name), name, to)
        text = target.before if to is None else target.after
        return self._restore(name, text, origin=origin, write_id="")

    def revert_write(self, write_id: str, *, origin: str = "user") -> dict[str, MemoryDoc | None]:
        """Undo every record of one write as one step, as the folder's
        :meth:`FolderStore.revert_write` does."""
        check_text("a write id", write_id)
        params = {"ns": self.namespace, "write_id": write_id}
        rows = self._read("read the history of", lambda conn: conn.execute(
            WRITE_NAMES_SQL, params).fetchall())  # fmt: skip
        touched = {str(name): self.history_of(str(name)) for (name,) in rows}
        plan = undo_plan(write_id, touched)
        return {
            name: self._restore(name, text, origin=origin, write_id=f"undo:{write_id}")
            for name, text in plan.items()
        }

    def recent_writes(self, *, limit: int = 50) -> list[HistoryRecord]:
        """The newest ``limit`` records of every memory, newest first."""
        params = {"ns": self.namespace, "limit": int(limit)}
        return self._read("read the history of", lambda conn: recent_records(conn, params))

    def _restore(
        self, name: str, text: str | None, *, origin: str, write_id: str
    ) -> MemoryDoc | None:
        if text is None:
            with contextlib.suppress(MemoryStoreError):  # already gone: nothing to undo
                self.forget(name, origin=origin, op="revert", write_id=write_id)
            return None
        parsed = parse_document(text, default_name=name)
        extra = {k: v for k, v in front_matter(text).items()
                 if k not in ("name", "description", "type")}  # fmt: skip
        if SOURCE_OFFSETS_KEY not in extra:
            extra[SOURCE_OFFSETS_KEY] = {}  # the version had none: drop today's
        return self.save_memory(
            name, parsed.description, parsed.type, parsed.body, extra=extra,
            origin=origin, op="revert", write_id=write_id,
        )  # fmt: skip

    def _history_name(self, key: str) -> str:
        check_text("a memory name", key)
        try:
            return self.get(key).name
        except MemoryStoreError:
            return " ".join(key.split())

    def _read(self, action: str, work: Callable[[Connection[Any]], _T]) -> _T:
        try:
            return self._run(work)
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._error(action, exc) from exc

    def _error(self, action: str, exc: BaseException) -> MemoryStoreError:
        return MemoryStoreError(
            f"cannot {action} the memory database {self._where}: {describe(exc)}"
        )


def __getattr__(name: str) -> Any:
    """``PostgresMemoryStore``: the old name of :class:`PostgresStore`, kept for one release."""
    if name == "PostgresMemoryStore":
        import warnings

        warnings.warn(
            "PostgresMemoryStore is deprecated: use asyncrecall.memory.PostgresStore",
            DeprecationWarning,
            stacklevel=2,
        )
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

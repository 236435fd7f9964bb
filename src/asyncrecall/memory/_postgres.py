"""Memories in PostgreSQL, shared by every worker process: :class:`PostgresMemoryStore`.

One table keyed by (namespace, name) holds what the folder's topic files hold (see
``_postgres_schema`` for the schema). What the store promises:

- **Writes.** A save is one transaction: an upsert on (namespace, name) whose row is
  written whole, so two processes saving one name resolve to the last commit, never to
  a mix of the two; a forget is one transaction too. Each announces itself with
  ``NOTIFY`` in the same transaction (delivered at commit). The limits are the
  folder's: a non-empty name, a known type, a rendered document of at most 1 MiB.
- **Recall.** :meth:`candidates` asks the database, in one round trip, for the newest
  memories of the namespace; when it holds more than :data:`SCAN_LIMIT`, for the best
  :data:`MATCHES` full-text matches instead plus the :data:`NEWEST_FILL` newest. The
  match uses a ``tsvector`` column under a GIN index: any of the query's terms except
  those PostgreSQL's statistics expect in over :data:`COMMON_ROWS` rows (a common word
  would match an arbitrary share of a large namespace); at most :data:`MATCH_CAP`
  matching rows are ranked (``ts_rank``), which bounds the query's cost. The selectors
  rank the candidates as they rank a folder.
  The query runs inside the recall task on a connection of the caller's own event
  loop (``_postgres_loops``: psycopg's async I/O never blocks that loop, and no thread
  hop is paid), or on the store's own loop and pool (``_postgres_portal``) when the
  loop has ``max_size`` queries in flight already; the turn never waits for it.
  Synchronous calls (CLI, memory tool) use a synchronous pool in the caller's thread.
- **Caches.** Per-process caches (the index text, scans, candidate lists) are used
  only while the store's ``LISTEN`` connection is up; any save or forget, by this
  process or another, bumps :attr:`generation`, empties them and calls the change
  listeners (selectors can drop their own caches there). A lost ``LISTEN``
  connection empties them, and they stay off until it is back. The selectors' caches
  (term counts, vectors) need no invalidation: every document carries its row
  version's revision (``xmin``, new with each insert or update), which is part of
  ``MemoryDoc.fingerprint``, so a rewrite by another process that keeps size and
  modification time (an import) is still counted or embedded afresh.
- **Faults.** A database that cannot be reached when the store opens, or whose schema
  is newer than this code, is a :class:`ConfigError`. Later, a save, get or forget
  raises :class:`MemoryStoreError`; recall and the index log one warning per outage
  on ``asyncrecall.memory`` and give nothing (the turn goes on without memory) until
  the database answers again (the pool reconnects by itself).
- **Input.** Every query is constant SQL text; names, namespaces and bodies travel
  only as parameters.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, LiteralString, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import AsyncConnection, Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from asyncrecall._exceptions import ConfigError, MemoryStoreError
from asyncrecall.memory._document import render_document, safe_file_stem
from asyncrecall.memory._postgres_loops import LoopConnections
from asyncrecall.memory._postgres_portal import Portal
from asyncrecall.memory._postgres_schema import CHANNEL, ensure_schema
from asyncrecall.memory._postgres_sql import (
    CANDIDATES_SQL,
    COMMON_REFRESH_S,
    COMMON_ROWS,
    COMMON_SQL,
    DELETE_SQL,
    GET_SQL,
    INDEX_SQL,
    LISTEN_SQL,
    MATCH_CAP,
    MATCHES,
    NEWEST_FILL,
    NOTIFY_SQL,
    SCAN_SQL,
    UPSERT_SQL,
)
from asyncrecall.memory._scan import MAX_FILE_BYTES, SCAN_LIMIT
from asyncrecall.memory._store import INDEX_MAX_LINES, _index_line, cut_index
from asyncrecall.memory._types import MEMORY_TYPES, MemoryDoc, MemoryType

__all__ = ["PostgresMemoryStore", "StoreChange", "default_namespace"]

logger = logging.getLogger("asyncrecall.memory")

_T = TypeVar("_T")

_MAX_NAMESPACE: Final = 1000
_MAX_QUERY_WORDS: Final = 32
_CANDIDATE_CACHE: Final = 128
_WORD: Final = re.compile(r"[^\W_]+")
_REL_PATH_KEY: Final = "asyncrecall_memories_namespace_rel_path_key"


@dataclass(frozen=True, slots=True)
class StoreChange:
    """A change seen by a store: a ``save`` or ``forget`` (by any process), or a
    ``reconnect`` of its ``LISTEN`` connection (changes may have been missed)."""

    op: str
    name: str
    version: int
    seen_at: float


def default_namespace(project: Path) -> str:
    """The namespace of a project when none is given: its canonical root folder."""
    from asyncrecall.memory._location import canonical_project_root

    return str(canonical_project_root(project))


def redact_url(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def _check_text(what: str, value: str) -> None:
    if "\x00" in value:
        raise MemoryStoreError(f"{what} holds a NUL character, which a database cannot store")


def _namespace_key(namespace: str) -> str:
    return hashlib.sha1(namespace.encode("utf-8"), usedforsecurity=False).hexdigest()[:16]


def _query_text(query: str) -> str:
    """The query's first 32 distinct words (letters and digits only), for ``to_tsvector``;
    the lexemes it yields are joined by ``or`` in SQL, so no ``websearch`` operator can
    come from the user (and the text is still sent as a parameter)."""
    words = list(dict.fromkeys(_WORD.findall(query.lower())))
    return " ".join(words[:_MAX_QUERY_WORDS])


class PostgresMemoryStore:
    """The memories of one namespace in a PostgreSQL database (psycopg 3 and its pools).

    ``url`` is a libpq connection URI (``postgresql://user@host/db``,
    ``postgresql:///db?host=/run/postgresql``). Nothing connects until
    :meth:`connect` or the first call; :meth:`open` does both. Close with
    :meth:`close` (or ``with``): it stops the store's thread and pools.

    Synchronous calls (the CLI, the agent's memory tool) use a synchronous pool in the
    caller's thread; :meth:`candidates` (recall) uses up to ``max_size`` connections of
    the caller's event loop, then an async pool on the store's own loop, where the
    ``LISTEN`` connection lives (``_postgres_portal``).
    """

    #: A database round trip never runs on the caller's event loop.
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
        if not namespace or len(namespace) > _MAX_NAMESPACE:
            raise ConfigError(f"a memory namespace is 1 to {_MAX_NAMESPACE} characters")
        if "\x00" in namespace:
            raise ConfigError("a memory namespace cannot hold a NUL character")
        self.url = url
        self.namespace = namespace
        self._where = redact_url(url)
        self._ns_key = _namespace_key(namespace)
        self._id = uuid.uuid4().hex  # our own NOTIFYs come back: known by this
        self._doc_root = Path(f"postgresql:{self._ns_key}")
        self._min_size, self._max_size, self._timeout = min_size, max_size, timeout
        self._connect_timeout = max(2, round(timeout))  # libpq: whole seconds, 2 at least
        self._listen_enabled = listen
        self._portal = Portal(f"asyncrecall-pg-{self._ns_key[:8]}")
        self._loop_conns = LoopConnections(
            url,
            connect_timeout=self._connect_timeout,
            limit=max_size,
            name=f"asyncrecall-recall-{self._id[:12]}",
        )
        self._connect_lock = threading.Lock()
        self._pool: ConnectionPool[Connection[Any]] | None = None
        # Owned by the portal's loop (touched only there):
        self._apool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._listener_ready: asyncio.Event | None = None
        # Shared with callers' threads, under _lock:
        self._lock = threading.Lock()
        self._listening = False
        self._generation = 0
        self._index_cache: str | None = None
        self._scan_cache: dict[int | None, list[MemoryDoc]] = {}
        self._candidate_cache: OrderedDict[tuple[str, frozenset[str]], list[MemoryDoc]] = (
            OrderedDict()
        )
        self._change_listeners: list[Callable[[StoreChange], None]] = []
        self._healthy = True
        self._closed = False
        self._common = "{}"  # portal-owned: an array literal, dumped as one string
        self._common_read_at = float("-inf")

    @classmethod
    def open(cls, url: str, *, namespace: str, **options: Any) -> PostgresMemoryStore:
        """A connected store (schema created or migrated), or :class:`ConfigError`."""
        store = cls(url, namespace=namespace, **options)
        try:
            store.connect()
        except BaseException:
            store.close()
            raise
        return store

    def __repr__(self) -> str:
        return f"PostgresMemoryStore({self._where!r}, namespace={self.namespace!r})"

    def __enter__(self) -> PostgresMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def location(self) -> str:
        """The database (password hidden) and the namespace."""
        return f"{self._where} namespace {self.namespace!r}"

    @property
    def generation(self) -> int:
        """Bumped by every change seen (any process) and every ``LISTEN`` reconnect."""
        return self._generation

    @property
    def caching(self) -> bool:
        """Whether the caches are in use: the ``LISTEN`` connection is up."""
        return self._listening

    def add_change_listener(self, callback: Callable[[StoreChange], None]) -> Callable[[], None]:
        """Call ``callback`` (on the store's thread: keep it short, never call the store
        from it) on each change seen; returns a function that removes it."""
        with self._lock:
            self._change_listeners.append(callback)

        def remove() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._change_listeners.remove(callback)

        return remove

    # -- life cycle ---------------------------------------------------------------------

    def connect(self) -> None:
        """Create or migrate the schema, open the pools, start listening; idempotent.

        :class:`ConfigError` (one line) when the database cannot be reached or its
        schema is newer than this code.
        """
        with self._connect_lock:
            if self._closed:
                raise MemoryStoreError(f"the memory store {self.location} is closed")
            if self._pool is not None:
                return
            try:
                # One direct connection first: a database that is down fails fast, with
                # libpq's own reason, and the schema is ready before the pools open.
                with psycopg.connect(
                    self.url, autocommit=True, connect_timeout=self._connect_timeout
                ) as conn:
                    ensure_schema(conn, where=self._where)
            except psycopg.Error as exc:
                raise self._unusable(exc) from exc
            pool: ConnectionPool[Connection[Any]] = ConnectionPool(
                self.url,
                min_size=self._min_size,
                max_size=self._max_size,
                timeout=self._timeout,
                kwargs={"autocommit": True, "connect_timeout": self._connect_timeout},
                name=f"asyncrecall-{self._ns_key[:8]}",
                open=False,
            )
            try:
                pool.open(wait=True, timeout=self._timeout)
                self._portal.call(self._aopen())
            except (PoolTimeout, psycopg.Error) as exc:
                pool.close()
                raise self._unusable(exc) from exc
            except BaseException:
                pool.close()
                raise
            self._pool = pool

    def close(self) -> None:
        """Stop listening, close the pools and the store's thread. Idempotent."""
        with self._connect_lock:
            if self._closed:
                return
            self._closed = True
            pool, self._pool = self._pool, None
        try:
            self._loop_conns.close()
            self._portal.call(self._aclose())
        finally:
            self._portal.stop()
            if pool is not None:
                pool.close()

    async def _aopen(self) -> None:
        apool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=self._max_size,
            timeout=self._timeout,
            kwargs={"autocommit": True, "connect_timeout": self._connect_timeout},
            name=f"asyncrecall-recall-{self._ns_key[:8]}",
            open=False,
        )
        try:
            await apool.open(wait=True, timeout=self._timeout)
        except BaseException:
            await apool.close()
            raise
        self._apool = apool
        if self._listen_enabled:
            self._listener_ready = asyncio.Event()
            self._listener = asyncio.create_task(self._listen(), name="asyncrecall-pg-listen")
            self._listener.add_done_callback(_log_listener_end)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._timeout):
                    await self._listener_ready.wait()  # caches on from the first call

    async def _aclose(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            await asyncio.wait({listener})
        apool, self._apool = self._apool, None
        if apool is not None:
            await apool.close()
        self._set_listening(False)

    def _sync_pool(self) -> ConnectionPool[Connection[Any]]:
        pool = self._pool
        if pool is None:
            self.connect()
            pool = self._pool
            if pool is None:  # pragma: no cover - closed by another thread meanwhile
                raise MemoryStoreError(f"the memory store {self.location} is closed")
        return pool

    def _unusable(self, exc: BaseException) -> ConfigError:
        return ConfigError(f"cannot use the memory database {self._where}: {_describe(exc)}")

    # -- LISTEN/NOTIFY and caches -------------------------------------------------------

    async def _listen(self) -> None:
        """Keep a ``LISTEN`` connection up; caches are on only while it is."""
        delay = 0.05
        ready = self._listener_ready
        while True:
            try:
                conn = await AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=self._connect_timeout
                )
            except psycopg.Error:
                if ready is not None:
                    ready.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            try:
                async with conn:
                    await conn.execute(LISTEN_SQL)
                    self._set_listening(True)
                    self._changed("reconnect", "", 0)  # changes made while away are unknown
                    delay = 0.05
                    if ready is not None:
                        ready.set()
                    async for note in conn.notifies():
                        self._on_notify(note.payload)
            except psycopg.Error:
                pass
            finally:
                self._set_listening(False)
            await asyncio.sleep(delay)

    def _on_notify(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            if data.get("ns") != self._ns_key or data.get("src") == self._id:
                return  # another namespace, or our own change (already applied)
            self._changed(str(data.get("op", "")), str(data.get("name", "")), int(data["v"]))
        except (ValueError, KeyError, TypeError):
            return  # not one of ours

    def _set_listening(self, up: bool) -> None:
        with self._lock:
            self._listening = up
            self._drop_caches_locked()

    def _changed(self, op: str, name: str, version: int) -> None:
        """A change seen: by our listener (another store's), or our own write, applied at
        once rather than when its NOTIFY comes back (that one is skipped)."""
        change = StoreChange(op, name, version, time.time())
        with self._lock:
            self._generation += 1
            self._drop_caches_locked()
            listeners = list(self._change_listeners)
        for callback in listeners:
            try:
                callback(change)
            except Exception:  # a listener's bug must not stop the invalidation of others
                logger.exception("memory store change listener failed")

    def _drop_caches_locked(self) -> None:
        self._index_cache = None
        self._scan_cache.clear()
        self._candidate_cache.clear()

    def _cache_token(self) -> int | None:
        """The generation to tag a read with, or ``None`` when caching is off."""
        with self._lock:
            return self._generation if self._listening else None

    def _still(self, token: int | None) -> bool:
        return token is not None and self._listening and token == self._generation

    def _outage(self, exc: BaseException) -> None:
        if self._healthy:
            self._healthy = False
            logger.warning(
                "memory database %s unreachable (%s): recall goes on without memory "
                "until it is back",
                self._where,
                _describe(exc),
            )

    def _answered(self) -> None:
        if not self._healthy:
            self._healthy = True
            logger.warning("memory database %s is reachable again: recall resumes", self._where)

    # -- reading ------------------------------------------------------------------------

    def ensure(self) -> str:
        """Connect (creating the schema if needed); returns :attr:`location`."""
        self.connect()
        return self.location

    def scan_cached(self, *, limit: int | None = SCAN_LIMIT) -> list[MemoryDoc] | None:
        """Never an answer without a round trip: recall does not run inline on a database."""
        return None

    def scan(self, *, limit: int | None = SCAN_LIMIT) -> list[MemoryDoc]:
        """The namespace's memories, newest first, at most ``limit`` (``None``: all)."""
        with self._lock:
            cached = self._scan_cache.get(limit) if self._listening else None
        if cached is not None:
            return list(cached)
        token = self._cache_token()
        docs = self._rows(SCAN_SQL, {"ns": self.namespace, "limit": limit})
        with self._lock:
            if self._still(token):
                self._scan_cache[limit] = docs
        return list(docs)

    def get(self, name_or_rel_path: str) -> MemoryDoc:
        """The memory with this relative path or name (then the name in any case), or
        :class:`MemoryStoreError`."""
        key = name_or_rel_path.strip()
        _check_text("a memory name", key)
        params = {"ns": self.namespace, "key": key, "stem": f"{safe_file_stem(key)}.md"}
        docs = self._rows(GET_SQL, params)
        if not docs:
            raise MemoryStoreError(f"no memory named {key!r} in {self.location}")
        return docs[0]

    def index_for_prompt(self) -> str:
        """The ``MEMORY.md`` equivalent: one line per memory, oldest first, cut as the
        folder's index is cut (200 lines or 25,000 bytes, with a warning line).

        An unreachable database reads as "" (one warning per outage), as a missing
        ``MEMORY.md`` does: the turn goes on without the index.
        """
        with self._lock:
            cached = self._index_cache if self._listening else None
        if cached is not None:
            return cached
        token = self._cache_token()
        params = {"ns": self.namespace, "lines": INDEX_MAX_LINES + 1}
        try:
            rows = self._run(lambda conn: conn.execute(INDEX_SQL, params).fetchall())
        except (PoolTimeout, psycopg.Error, ConfigError) as exc:
            self._outage(exc)
            return ""
        self._answered()
        text = ""
        if rows:
            lines = [_index_line(name, rel, description) for name, rel, description, _, _ in rows]
            text = cut_index(lines, total_lines=int(rows[0][3]), total_bytes=int(rows[0][4]))
        with self._lock:
            if self._still(token):
                self._index_cache = text
        return text

    async def candidates(self, query: str, *, exclude: Collection[str] = ()) -> list[MemoryDoc]:
        """What recall offers a selector for ``query`` (see the module's promises).

        An unreachable database logs one warning per outage and offers nothing.
        """
        if self._closed:
            return []
        key = (query, frozenset(exclude))
        with self._lock:
            cached = self._candidate_cache.get(key) if self._listening else None
            if cached is not None:
                self._candidate_cache.move_to_end(key)
                return list(cached)
        if self._pool is None:
            try:
                await asyncio.to_thread(self.connect)  # first use: never on our loop
            except (ConfigError, MemoryStoreError) as exc:
                self._outage(exc)
                return []
        token = self._cache_token()
        params = {
            "ns": self.namespace,
            "ex": sorted(key[1]),
            "q": _query_text(query),
            "small": SCAN_LIMIT + 1,
            "matches": MATCHES,
            "fill": NEWEST_FILL,
            "cap": MATCH_CAP,
        }
        try:
            docs = await self._direct_candidates(params)
            if docs is None:  # this loop has all its connections busy: the store's loop
                docs = await self._portal.acall(self._candidate_rows(params))
        except RuntimeError:
            return []  # the store was closed meanwhile
        except (PoolTimeout, psycopg.Error) as exc:
            self._outage(exc)
            return []
        self._answered()
        with self._lock:
            if self._still(token):
                self._candidate_cache[key] = docs
                while len(self._candidate_cache) > _CANDIDATE_CACHE:
                    self._candidate_cache.popitem(last=False)
        return list(docs)

    async def _direct_candidates(self, params: dict[str, Any]) -> list[MemoryDoc] | None:
        """The candidates, queried on the caller's loop (``_postgres_loops``); ``None`` when
        it has no connection to spare. A connection the server has closed (a restart) is
        dropped and the query tried again on a new one."""
        for attempt in range(self._max_size + 1):
            async with self._loop_conns.connection() as conn:
                if conn is None:
                    return None
                try:
                    return await self._query_candidates(conn, params)
                except psycopg.OperationalError:
                    if not conn.closed or attempt == self._max_size:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _candidate_rows(self, params: dict[str, Any]) -> list[MemoryDoc]:
        """The candidates, queried on the store's own loop and pool."""
        apool = self._apool
        if apool is None:
            raise RuntimeError("the store is closed")
        for attempt in range(self._max_size + 1):
            async with apool.connection() as conn:
                try:
                    return await self._query_candidates(conn, params)
                except psycopg.OperationalError:
                    if not conn.closed or attempt == self._max_size:
                        raise
                    # The server closed it (a restart): the pool drops it; try another.
        raise AssertionError("unreachable")  # pragma: no cover

    async def _query_candidates(
        self, conn: AsyncConnection[Any], params: dict[str, Any]
    ) -> list[MemoryDoc]:
        params["common"] = await self._common_lexemes(conn)
        rows = await (await conn.execute(CANDIDATES_SQL, params)).fetchall()
        parts: tuple[list[MemoryDoc], list[MemoryDoc], list[MemoryDoc]] = ([], [], [])
        for row in rows:
            parts[row[0]].append(self._doc(row[1:]))
        if parts[0]:
            return parts[0]
        seen = {doc.rel_path for doc in parts[1]}
        return parts[1] + [doc for doc in parts[2] if doc.rel_path not in seen]

    async def _common_lexemes(self, conn: AsyncConnection[Any]) -> str:
        """The lexemes expected in over :data:`COMMON_ROWS` rows (PostgreSQL's statistics of
        the ``search`` column, re-read every 10 minutes); none before the first ANALYZE.

        A ``text[]`` literal, built once per reading: psycopg would otherwise adapt the
        few hundred elements of a list on every query (half a millisecond of each
        recall's CPU)."""
        now = time.monotonic()
        if now - self._common_read_at < COMMON_REFRESH_S:
            return self._common
        row = await (await conn.execute(COMMON_SQL)).fetchone()
        common: list[str] = []
        if row is not None and row[0] is not None:
            rows = max(float(row[2]), 0.0)
            common = [e for e, f in zip(row[0], row[1], strict=False) if f * rows > COMMON_ROWS]
        self._common, self._common_read_at = _text_array(common), now
        return self._common

    def _rows(self, query: LiteralString, params: dict[str, Any]) -> list[MemoryDoc]:
        try:
            rows = self._run(lambda conn: conn.execute(query, params).fetchall())
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._error("read", exc) from exc
        return [self._doc(row) for row in rows]

    def _run(self, work: Callable[[Connection[Any]], _T]) -> _T:
        """``work(connection)`` on a pooled connection; on a connection the server has
        closed (a restart), again on another (the pool replaces closed ones)."""
        pool = self._sync_pool()
        for attempt in range(self._max_size + 1):
            with pool.connection() as conn:
                try:
                    return work(conn)
                except psycopg.OperationalError:
                    if not conn.closed or attempt == self._max_size:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    # -- writing ------------------------------------------------------------------------

    def save_memory(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        updated_at: float | None = None,
    ) -> MemoryDoc:
        """Create or update the memory ``name`` in one transaction (last write wins).

        ``updated_at`` (a POSIX time) replaces "now" as its modification time: an import
        keeps the original's. An empty name, an unknown type, content over 1 MiB (as a
        topic file) or a NUL character raise :class:`MemoryStoreError`, and nothing is
        written.
        """
        name = " ".join(name.split())
        description = " ".join(description.split())
        if not name:
            raise MemoryStoreError("a memory needs a non-empty name")
        if type not in MEMORY_TYPES:
            raise MemoryStoreError(
                f"invalid memory type {type!r}: expected one of {', '.join(MEMORY_TYPES)}"
            )
        for what, value in (("the name", name), ("the description", description)):
            _check_text(f"memory {what}", value)
        _check_text(f"memory {name!r}", content)
        body = content.strip("\n")
        text = render_document(name=name, description=description, type=type, body=body)
        size = len(text.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise MemoryStoreError(f"memory {name!r} is over 1 MiB; save a shorter one")
        row = {
            "channel": CHANNEL,
            "key": self._ns_key,
            "src": self._id,
            "ns": self.namespace,
            "name": name,
            "rel": f"{safe_file_stem(name)}.md",
            "description": description,
            "type": type,
            "body": body,
            "size": size,
            "at": updated_at,
        }
        for attempt in range(2):
            try:
                found = self._run(lambda conn: conn.execute(UPSERT_SQL, row).fetchone())
                assert found is not None  # RETURNING of an upsert: always one row
                doc = self._doc(found[:9])
                self._changed("save", doc.name, int(found[6]))
                return doc
            except psycopg.errors.UniqueViolation as exc:
                if exc.diag.constraint_name != _REL_PATH_KEY or attempt:
                    raise self._error("save to", exc) from exc
                # Another name owns this file name ("Foo bar" and "foo-bar"): disambiguate.
                digest = hashlib.sha1(name.encode("utf-8"), usedforsecurity=False).hexdigest()
                row["rel"] = f"{safe_file_stem(name)}-{digest[:8]}.md"
            except (PoolTimeout, psycopg.Error) as exc:
                raise self._error("save to", exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def forget(self, name_or_rel_path: str) -> MemoryDoc:
        """Remove a memory (one transaction); returns what was removed."""
        key = name_or_rel_path.strip()
        _check_text("a memory name", key)
        params = {"ns": self.namespace, "key": key, "stem": f"{safe_file_stem(key)}.md"}

        def delete(conn: Connection[Any]) -> tuple[MemoryDoc, int] | None:
            with conn.transaction():
                found = conn.execute(GET_SQL + " FOR UPDATE", params).fetchone()
                if found is None:
                    return None
                doc = self._doc(found)
                conn.execute(DELETE_SQL, {"ns": self.namespace, "name": doc.name})
                payload = {"ns": self._ns_key, "op": "forget", "name": doc.name[:200]}
                payload |= {"v": found[6], "src": self._id}
                conn.execute(NOTIFY_SQL, (CHANNEL, json.dumps(payload)))
                return doc, int(found[6])

        try:
            removed = self._run(delete)
        except (PoolTimeout, psycopg.Error) as exc:
            raise self._error("forget in", exc) from exc
        if removed is None:
            raise MemoryStoreError(f"no memory named {key!r} in {self.location}")
        self._changed("forget", removed[0].name, removed[1])
        return removed[0]

    # -- helpers ------------------------------------------------------------------------

    def _error(self, action: str, exc: BaseException) -> MemoryStoreError:
        return MemoryStoreError(
            f"cannot {action} the memory database {self._where}: {_describe(exc)}"
        )

    def _doc(self, row: Iterable[Any]) -> MemoryDoc:
        name, rel, description, kind, body, size, _version, mtime, revision = row
        return MemoryDoc(
            path=self._doc_root / rel,
            rel_path=rel,
            name=name,
            description=description,
            type=kind,
            body=body,
            mtime=float(mtime),
            size=int(size),
            revision=int(revision),
        )


def _text_array(items: Iterable[str]) -> str:
    """A PostgreSQL ``text[]`` literal of ``items`` (each quoted, ``\\`` and ``"`` escaped)."""
    quoted = (item.replace("\\", "\\\\").replace('"', '\\"') for item in items)
    return "{" + ",".join(f'"{item}"' for item in quoted) + "}"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _log_listener_end(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("memory store listener failed", exc_info=task.exception())

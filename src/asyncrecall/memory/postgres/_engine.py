"""One process's connections to one database, shared by all its stores: :class:`Engine`.

A :class:`~asyncrecall.memory.PostgresStore` is a view of one namespace; what
talks to the server is the engine of its URL and options, one per process (the shape
of LangGraph's ``PostgresStore``: one object per database, the namespace passed with
every call). Before, each store opened two pools, a ``LISTEN`` connection, its
callers' loop connections and four threads: 40 namespaces took 120-142 server
connections (PostgreSQL's default limit is 100) and 201 threads.
Now a process holds, per database, whatever the number of namespaces or stores:

- one private loop and its thread (``_portal``), where the ``LISTEN`` connection and
  the async pool live;
- one synchronous pool (saves, reads, extraction's state) and one async pool (the
  recalls that find their own loop's connections busy), ``max_size`` each;
- ``max_size`` connections per event loop that recalls (``_loops``);
- one ``LISTEN`` connection, whose notifications go to the namespaces' change feeds by
  namespace digest (``_changes``); its loss or return reaches every feed.

:func:`acquire` hands out the engine of a URL and options (opening it: the schema
checked, the pools and the listener started), :func:`release` gives it back; the last
store to close it closes the engine. An engine's health (an outage seen, its end) is
the database's, so an outage is one warning per database, not one per namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg import AsyncConnection, Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from asyncrecall._exceptions import ConfigError
from asyncrecall.memory.postgres._changes import ChangeFeed, log_listener_end
from asyncrecall.memory.postgres._loops import LoopConnections
from asyncrecall.memory.postgres._portal import Portal
from asyncrecall.memory.postgres._rls import NOTIFY_KEY_SQL
from asyncrecall.memory.postgres._schema import ensure_schema, notify_salt
from asyncrecall.memory.postgres._sql import LISTEN_SQL
from asyncrecall.memory.postgres._text import StoreChange, describe, notify_key, redact_url

__all__ = ["RECONNECT_GIVE_UP_S", "Engine", "EngineOptions", "acquire", "release"]

logger = logging.getLogger("asyncrecall.memory")

#: A pool gives a failed reconnection up after this long (its pause doubles after each
#: failure: left to run, a try came up many seconds after the database was back); the next
#: call that finds the pool empty starts a new one at once.
RECONNECT_GIVE_UP_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """What the stores sharing an engine share (with the URL, its key)."""

    min_size: int
    max_size: int
    timeout: float
    listen: bool

    @property
    def connect_timeout(self) -> int:
        return max(2, round(self.timeout))  # libpq: whole seconds, 2 at least


class Engine:
    """The pools, loop connections and listener of one database in one process."""

    def __init__(self, url: str, options: EngineOptions) -> None:
        self.url = url
        self.options = options
        self.where = redact_url(url)
        self._id = uuid.uuid4().hex
        # The database's secret for notification digests, read at open; None for a role
        # row-level security binds to namespaces (it reads their keys, ``notify_key``).
        self.salt: str | None = None
        self.portal: Portal | None = None
        self.pool: ConnectionPool[Connection[Any]] | None = None
        self.loops = LoopConnections(
            url,
            connect_timeout=options.connect_timeout,
            limit=options.max_size,
            name=f"asyncrecall-recall-{self._id[:12]}",
        )
        self._lock = threading.Lock()
        self._feeds: dict[str, list[ChangeFeed]] = {}  # by namespace digest
        self._feeds_lock = threading.Lock()
        self._listening = False
        self.healthy = True
        # Owned by the portal's loop (touched only there):
        self.apool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._listener: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"Engine({self.where!r})"

    # -- life cycle ---------------------------------------------------------------------

    def open(self) -> None:
        """Check the schema (migrating it when behind and allowed), read the secret,
        open the pools, start listening; idempotent. :class:`ConfigError` (one line)
        when the database cannot be used; a failed open leaves nothing open."""
        with self._lock:
            if self.pool is not None:
                return
            opts = self.options
            try:
                # One direct connection first: a database that is down fails fast, with
                # libpq's own reason, and the schema is ready before the pools open.
                with psycopg.connect(
                    self.url, autocommit=True, connect_timeout=opts.connect_timeout
                ) as conn:
                    ensure_schema(conn, where=self.where)
                    with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                        self.salt = notify_salt(conn)
            except psycopg.Error as exc:
                raise self.unusable(exc) from exc
            pool: ConnectionPool[Connection[Any]] = ConnectionPool(
                self.url, min_size=opts.min_size, **self._pool_options("asyncrecall")
            )
            portal = Portal(f"asyncrecall-pg-{self._id[:8]}")
            try:
                pool.open(wait=True, timeout=opts.timeout)
                portal.call(self._aopen())
            except (PoolTimeout, psycopg.Error) as exc:
                self._abandon(pool, portal)
                raise self.unusable(exc) from exc
            except BaseException:
                self._abandon(pool, portal)
                raise
            self.pool, self.portal = pool, portal

    def notify_key(self, namespace: str) -> str | None:
        """The key of ``namespace``'s notification digests (``_text.notify_key``):
        derived from the secret, or for a role bound to namespaces (which may not read
        it) that namespace's key if bound to it, else ``None`` (the role can write
        nothing there; its store hears no changes and caches nothing).
        :class:`ConfigError` when the database fails, or when the role may read neither
        the secret nor keys (row-level security is off: its writes would go unheard)."""
        if self.salt is not None:
            return notify_key(self.salt, namespace)
        assert self.pool is not None  # opened
        try:
            with self.pool.connection() as conn:
                row = conn.execute(NOTIFY_KEY_SQL, (namespace,)).fetchone()
        except psycopg.errors.UndefinedTable:
            raise ConfigError(
                f"this role may not read the notification secret of {self.where} "
                "(asyncrecall_schema.notify_salt): grant it the tables (the README's "
                "PostgreSQL section lists the grants)"
            ) from None
        except (PoolTimeout, psycopg.Error) as exc:
            raise self.unusable(exc) from exc
        return None if row is None else str(row[0])

    def _pool_options(self, prefix: str) -> dict[str, Any]:
        """What the engine's two pools share but their least size; ``open`` later."""
        opts = self.options
        return {
            "max_size": opts.max_size,
            "timeout": opts.timeout,
            "reconnect_timeout": RECONNECT_GIVE_UP_S,
            "kwargs": {"autocommit": True, "connect_timeout": opts.connect_timeout},
            "name": f"{prefix}-{self._id[:8]}",
            "open": False,
        }

    def _abandon(self, pool: ConnectionPool[Connection[Any]], portal: Portal) -> None:
        with contextlib.suppress(RuntimeError):
            portal.call(self._aclose())
        portal.stop()
        pool.close()

    def close(self) -> None:
        """Stop listening, close the pools, the loops' connections and the thread. Each
        part is closed even when closing another fails (that error is raised after):
        nothing is left open behind a failure."""
        with self._lock:
            pool, self.pool = self.pool, None
            portal, self.portal = self.portal, None
        with contextlib.ExitStack() as parts:  # closed last to first
            if pool is not None:
                parts.callback(pool.close)
            if portal is not None:
                parts.callback(portal.stop)
                parts.callback(lambda: portal.call(self._aclose()))
            parts.callback(self.loops.close)

    async def _aopen(self) -> None:
        opts = self.options
        apool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            self.url, min_size=1, **self._pool_options("asyncrecall-recall")
        )
        try:
            await apool.open(wait=True, timeout=opts.timeout)
        except BaseException:
            await apool.close()
            raise
        self.apool = apool
        if opts.listen:
            ready = asyncio.Event()
            self._listener = asyncio.create_task(
                self._listen(ready=ready), name="asyncrecall-pg-listen"
            )
            self._listener.add_done_callback(log_listener_end)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(opts.timeout):
                    await ready.wait()  # caches on from the first call

    async def _aclose(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            await asyncio.wait({listener})
        apool, self.apool = self.apool, None
        if apool is not None:
            await apool.close()
        self._set_listening(False)

    # -- the change feeds ---------------------------------------------------------------

    def attach(self, feed: ChangeFeed) -> None:
        """Deliver the changes of ``feed``'s namespace to it (its announcer set)."""
        key = feed.namespace_key
        with self._feeds_lock:
            self._feeds.setdefault(key, []).append(feed)
            feed.set_listening(self._listening)

    def detach(self, feed: ChangeFeed) -> None:
        key = feed.namespace_key
        with self._feeds_lock:
            feeds = self._feeds.get(key, [])
            with contextlib.suppress(ValueError):
                feeds.remove(feed)
            if not feeds:
                self._feeds.pop(key, None)
        feed.set_listening(False)

    def _all_feeds(self) -> list[ChangeFeed]:
        with self._feeds_lock:
            return [feed for feeds in self._feeds.values() for feed in feeds]

    def _set_listening(self, up: bool) -> None:
        with self._feeds_lock:
            self._listening = up
            feeds = [feed for feeds in self._feeds.values() for feed in feeds]
        for feed in feeds:
            feed.set_listening(up)

    def _on_notify(self, payload: str) -> None:
        change = ChangeFeed.parse(payload)
        if change is None:
            return  # not one of ours
        key, source, seen = change
        with self._feeds_lock:
            feeds = list(self._feeds.get(key, ()))
        for feed in feeds:
            feed.seen_from(source, seen)

    async def _listen(self, *, ready: asyncio.Event) -> None:
        """Keep the ``LISTEN`` connection up (reconnecting with a backoff up to 1 s);
        the feeds' caches are on only while it is. ``ready`` is set once it listens or
        has failed its first try."""
        delay = 0.05
        while True:
            try:
                conn = await AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=self.options.connect_timeout
                )
            except psycopg.Error:
                ready.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            try:
                async with conn:
                    await conn.execute(LISTEN_SQL)
                    self._set_listening(True)
                    missed = StoreChange("reconnect", "", 0, time.time())
                    for feed in self._all_feeds():
                        feed.seen(missed)  # changes may have been missed
                    delay = 0.05
                    ready.set()
                    async for note in conn.notifies():
                        self._on_notify(note.payload)
            except psycopg.Error:
                pass
            finally:
                self._set_listening(False)
            await asyncio.sleep(delay)

    # -- health -------------------------------------------------------------------------

    def unusable(self, exc: BaseException) -> ConfigError:
        return ConfigError(f"cannot use the memory database {self.where}: {describe(exc)}")

    def outage(self, exc: BaseException) -> None:
        """A read failed: one warning per outage of the database."""
        if self.healthy:
            self.healthy = False
            logger.warning(
                "memory database %s unreachable (%s): recall goes on without memory "
                "until it is back",
                self.where,
                describe(exc),
            )

    def answered(self) -> None:
        if not self.healthy:
            self.healthy = True
            logger.warning("memory database %s is reachable again: recall resumes", self.where)


_registry_lock = threading.Lock()
_engines: dict[tuple[int, str, EngineOptions], tuple[Engine, int]] = {}


def acquire(url: str, options: EngineOptions) -> Engine:
    """The open engine of ``url`` and ``options`` in this process (opened if need be),
    counted until :func:`release`. Raises what :meth:`Engine.open` raises (and then
    counts nothing)."""
    key = (os.getpid(), url, options)  # a forked child opens its own
    with _registry_lock:
        engine, refs = _engines.get(key, (None, 0))
        if engine is None:
            engine = Engine(url, options)
        _engines[key] = (engine, refs + 1)
    try:
        engine.open()
    except BaseException:
        release(engine)
        raise
    return engine


def release(engine: Engine) -> None:
    """Give back what :func:`acquire` handed out; the last one closes the engine."""
    key = (os.getpid(), engine.url, engine.options)
    with _registry_lock:
        found, refs = _engines.get(key, (None, 0))
        if found is not engine:  # pragma: no cover - released twice
            return
        if refs > 1:
            _engines[key] = (engine, refs - 1)
            return
        del _engines[key]
    engine.close()

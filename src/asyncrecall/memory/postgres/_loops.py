"""Recall's database connections on the caller's own event loop.

The candidates query used to hop to the store's private loop (``_portal``) and
back: two thread wake-ups and two handovers of the interpreter lock per recall, a
large share of its median and its CPU on a big namespace, and more at the tail when
threads compete. A query is I/O: psycopg's async connection
runs it on any loop without blocking it. So each event loop that recalls gets a few
connections of its own, used only on that loop:

- :meth:`LoopConnections.connection` lends an idle connection of the running loop, or
  opens one (at most ``limit`` per loop), or yields ``None`` when the loop has
  ``limit`` in use (the caller then uses the store's own loop);
- a connection goes back to its loop's idle list only after a clean use; a failure or
  a cancellation closes it (a query cut midway leaves it in an unknown state);
- connections are closed by :meth:`LoopConnections.close` (the store's ``close``, from
  any thread: closing a psycopg connection is synchronous; one in use when its query
  gives it back) or when their loop is garbage-collected, so none outlives its loop
  or the store.

They run only recall's few statements, each prepared by psycopg after its fifth use, so
they are set for them (``RECALL_OPTIONS``, sent with the connection's start-up, no
extra round trip): a prepared statement keeps one generic plan instead of planning
each call with its values, and nothing is JIT compiled (the planner's estimates for a
large namespace can cross ``jit_above_cost``, and compiling costs more than these
queries). At 1,000,000 memories both recall's median and its tail came down (figures:
``docs/benchmarks.md``, "PostgreSQL store").
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator
from typing import Any

from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

__all__ = ["RECALL_OPTIONS", "LoopConnections"]

#: Settings of recall's connections (see the module), after any the URL's ``options`` set.
RECALL_OPTIONS = "-c plan_cache_mode=force_generic_plan -c jit=off"


class _Slots:
    """The connections of one loop: all of them, the idle ones, and how many are being
    opened (they count against the limit already)."""

    def __init__(self) -> None:
        self.all: list[AsyncConnection[Any]] = []
        self.idle: list[AsyncConnection[Any]] = []
        self.opening = 0


def _close_all(connections: list[AsyncConnection[Any]]) -> None:
    for conn in list(connections):
        conn.pgconn.finish()  # what AsyncConnection.close does, without an await
    connections.clear()


class LoopConnections:
    """At most ``limit`` autocommit connections per event loop (see the module)."""

    def __init__(self, url: str, *, connect_timeout: int, limit: int, name: str) -> None:
        self._url = url
        given = conninfo_to_dict(url).get("options")
        self._options = f"{given} {RECALL_OPTIONS}" if given else RECALL_OPTIONS
        self.name = name  #: their ``application_name`` (``pg_stat_activity`` shows it)
        self._connect_timeout = connect_timeout
        self.limit = limit  #: per loop
        self._lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Slots] = (
            weakref.WeakKeyDictionary()
        )
        self._closed = False

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any] | None]:
        """An idle or new connection of the running loop, or ``None`` when it has ``limit``
        in use or the store is closed. Raises what connecting raises."""
        loop = asyncio.get_running_loop()
        slots, conn = self._take(loop)
        if slots is None:
            yield None
            return
        if conn is None:
            opened: AsyncConnection[Any] | None = None
            try:
                opened = await AsyncConnection.connect(
                    self._url,
                    autocommit=True,
                    connect_timeout=self._connect_timeout,
                    application_name=self.name,
                    options=self._options,
                )
            finally:
                adopted = self._adopt(slots, opened)
            assert opened is not None  # else connecting raised
            if not adopted:  # the store was closed meanwhile
                opened.pgconn.finish()
                yield None
                return
            conn = opened
        clean = False
        try:
            yield conn
            clean = True
        finally:
            self._give_back(slots, conn, clean=clean)

    def close(self) -> None:
        """Close the idle connections of every loop (from any thread); the ones in use
        are closed as their query gives them back (or with their loop). Idempotent.

        Never one in use: its query may be running on another thread's loop, and
        ``pgconn.finish()`` frees the libpq connection without psycopg's lock (libpq's
        connections are not safe to share across threads).
        """
        with self._lock:
            self._closed = True
            idle = [conn for slots in self._loops.values() for conn in slots.idle]
            for slots in self._loops.values():
                for conn in slots.idle:
                    slots.all.remove(conn)
                slots.idle.clear()
            self._loops.clear()
        _close_all(idle)

    def _take(
        self, loop: asyncio.AbstractEventLoop
    ) -> tuple[_Slots | None, AsyncConnection[Any] | None]:
        """``(slots, idle connection)``, ``(slots, None)``: open one, ``(None, None)``: none."""
        with self._lock:
            if self._closed:
                return None, None
            try:
                slots = self._loops.get(loop)
            except TypeError:  # pragma: no cover - a C loop may refuse weak references
                return None, None
            if slots is None:
                slots = self._loops[loop] = _Slots()
                weakref.finalize(loop, _close_all, slots.all)
            while slots.idle:
                conn = slots.idle.pop()
                if not conn.closed:
                    return slots, conn
                slots.all.remove(conn)
            if len(slots.all) + slots.opening >= self.limit:
                return None, None
            slots.opening += 1
            return slots, None

    def _adopt(self, slots: _Slots, conn: AsyncConnection[Any] | None) -> bool:
        """Count a connection opened for ``slots`` (``None``: opening it failed)."""
        with self._lock:
            slots.opening -= 1
            if conn is None or self._closed:
                return False
            slots.all.append(conn)
            return True

    def _give_back(self, slots: _Slots, conn: AsyncConnection[Any], *, clean: bool) -> None:
        reusable = (
            clean and not conn.closed and conn.pgconn.transaction_status == TransactionStatus.IDLE
        )
        with self._lock:
            if reusable and not self._closed:
                slots.idle.append(conn)
                return
            with contextlib.suppress(ValueError):
                slots.all.remove(conn)
        conn.pgconn.finish()

"""Recall's query runs on the caller's event loop, on a few connections of that loop.

Each store names these connections (``application_name``), so the tests count them in
``pg_stat_activity``: a recall uses one; a loop never has more than the store's
``max_size``; closing the store, or the end of the loop, closes them.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest

from asyncrecall.memory import PostgresStore


def _connections(url: str, name: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _until(url: str, name: str, count: int) -> int:
    """The number of the store's loop connections once it is ``count`` (a backend that
    was closed leaves ``pg_stat_activity`` a moment later), or after a 10 s hang guard."""
    deadline = time.monotonic() + 10
    found = _connections(url, name)
    while found != count and time.monotonic() < deadline:
        time.sleep(0.02)
        found = _connections(url, name)
    return found


def _name(store: PostgresStore) -> str:
    return store._query.loops.name


async def test_recall_queries_on_the_callers_loop_and_close_closes_it(
    pg_store: PostgresStore,
) -> None:
    """The candidates come over a connection of the caller's loop (no hop to the
    store's thread), which is kept for the next recall and closed with the store."""
    pg_store.save_memory("Deploy", "deploys", "project", "staging first", origin="user")
    url, name = pg_store.url, _name(pg_store)
    assert _connections(url, name) == 0
    assert [d.name for d in await pg_store.candidates("deploy to staging")] == ["Deploy"]
    assert [d.name for d in await pg_store.candidates("staging")] == ["Deploy"]
    assert _connections(url, name) == 1  # one, reused
    pg_store.close()
    assert _until(url, name, 0) == 0


def test_the_end_of_a_loop_closes_its_connections(pg_store: PostgresStore) -> None:
    """A loop that recalled and is gone leaves no connection open behind it, though the
    store lives on (and serves the next loop)."""
    pg_store.save_memory("Deploy", "deploys", "project", "staging first", origin="user")
    url, name = pg_store.url, _name(pg_store)
    loop = asyncio.new_event_loop()
    try:
        found = loop.run_until_complete(pg_store.candidates("staging"))
    finally:
        loop.close()
    assert [d.name for d in found] == ["Deploy"]
    assert _connections(url, name) == 1
    del loop
    gc.collect()
    assert _until(url, name, 0) == 0
    assert [d.name for d in asyncio.run(pg_store.candidates("staging"))] == ["Deploy"]


async def test_a_loop_has_at_most_max_size_connections(open_pg: Any, namespace: str) -> None:
    """Five recalls waiting at once on a store of ``max_size=2``: two connections of the
    loop, the others go through the store's own pool; all five get their answer."""
    store: PostgresStore = open_pg(namespace, max_size=2)
    store.save_memory("Deploy", "deploys", "project", "staging first", origin="user")
    url, name = store.url, _name(store)
    with psycopg.connect(url) as lock:
        lock.execute("LOCK TABLE asyncrecall_memories IN ACCESS EXCLUSIVE MODE")
        tasks = [asyncio.create_task(store.candidates(f"staging {n}")) for n in range(5)]
        await asyncio.sleep(0.3)  # every recall is waiting on the lock by now
        assert not any(task.done() for task in tasks)
        waiting = await asyncio.to_thread(_connections, url, name)
        lock.rollback()
    async with asyncio.timeout(10):
        answers = await asyncio.gather(*tasks)
    assert waiting == 2
    assert all([d.name for d in found] == ["Deploy"] for found in answers)


@pytest.mark.parametrize("when", ["waiting", "answered"])
async def test_a_cancelled_recall_leaves_a_working_store(
    pg_store: PostgresStore, when: str
) -> None:
    """Cancelling a recall whose query waits (on a lock) or has just answered leaves the
    store answering the next recall; the cancellation propagates."""
    pg_store.save_memory("Deploy", "deploys", "project", "staging first", origin="user")
    started = threading.Event()
    with psycopg.connect(pg_store.url) as lock:
        if when == "waiting":
            lock.execute("LOCK TABLE asyncrecall_memories IN ACCESS EXCLUSIVE MODE")
            started.set()
        task = asyncio.create_task(pg_store.candidates("staging"))
        await asyncio.sleep(0.2 if started.is_set() else 0)
        task.cancel()
        async with asyncio.timeout(10):
            await asyncio.wait({task})
        lock.rollback()
    assert task.cancelled()
    async with asyncio.timeout(10):
        assert [d.name for d in await pg_store.candidates("staging")] == ["Deploy"]


async def test_recall_connections_keep_one_generic_plan_and_no_jit(pg_url: str) -> None:
    """Recall's connections plan a prepared statement once, generically, and never JIT
    compile (planning each call was most of recall's p99 at 1,000,000 memories); the
    URL's own ``options`` still apply."""
    url = f"{pg_url}{'&' if '?' in pg_url else '?'}options=-c%20statement_timeout%3D54321"
    store = PostgresStore.open(url, namespace=f"generic-{uuid.uuid4().hex[:8]}")
    try:
        store.save_memory("Deploy", "deploys", "project", "staging first", origin="user")
        for n in range(8):  # psycopg prepares a statement at its fifth use (a new query
            # each time: the store answers a query it has answered from its cache)
            assert [d.name for d in await store.candidates(f"staging {n}")] == ["Deploy"]
        async with store._query.loops.connection() as conn:
            assert conn is not None
            plans = await (
                await conn.execute(
                    "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements"
                    " WHERE statement LIKE '%%asyncrecall_memories%%'"
                )
            ).fetchone()
            settings = await (
                await conn.execute(
                    "SELECT current_setting('jit'), current_setting('statement_timeout')"
                )
            ).fetchone()
    finally:
        store.close()
    assert plans is not None and settings is not None
    generic, custom = plans
    assert generic and generic > 0
    assert custom == 0
    assert settings == ("off", "54321ms")

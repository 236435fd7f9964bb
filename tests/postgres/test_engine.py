"""One engine per process and database: every namespace's store shares its connections.

Before: each store opened its own two pools, ``LISTEN`` connection, loop
connections and threads, so 40 namespaces took 120-142 server connections (the
server's default limit is 100) and 201 threads. The stores of one URL now share one
engine (``_engine``); these tests count what the server and the process see.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import psycopg
import pytest

from asyncrecall.memory import PostgresStore
from asyncrecall.memory.postgres._text import StoreChange

from .conftest import APP_ROLE

#: What one engine may hold at most with ``max_size=4``: the synchronous pool, the
#: async pool, one ``LISTEN`` connection and one loop's recall connections.
_ENGINE_MAX = 4 + 4 + 1 + 4


def _backends(url: str) -> int:
    """The application role's server connections, this counting one excluded."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND pid <> pg_backend_pid()",
            (APP_ROLE,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def _settled(url: str, at_most: int) -> int:
    """The count once it is ``at_most`` or less (a closed backend leaves
    ``pg_stat_activity`` a moment later), or after a 10 s hang guard."""
    deadline = time.monotonic() + 10
    found = _backends(url)
    while found > at_most and time.monotonic() < deadline:
        time.sleep(0.02)
        found = _backends(url)
    return found


async def test_forty_namespaces_share_a_bounded_set_of_connections(
    pg_url: str, open_pg: Any, namespace: str
) -> None:
    """Forty namespaces' stores in one process, each saving, reading its index,
    recalling on the caller's loop and reading its extraction cursor, hold at most one
    engine's connections and threads (before: about four connections and four threads
    per namespace); each still sees only its own memories."""
    before, threads_before = _backends(pg_url), threading.active_count()
    stores: list[PostgresStore] = []
    for number in range(40):
        store: PostgresStore = open_pg(f"{namespace}-{number}")
        store.save_memory(
            f"Fact {number}", "a fact", "project", f"tenant {number} fact", origin="user"
        )
        assert f"Fact {number}" in store.index_for_prompt()
        assert store.extraction_backend().cursor("s1") == 0
        stores.append(store)
    answers = await asyncio.gather(*(store.candidates("tenant fact") for store in stores))
    used = _backends(pg_url) - before
    threads = threading.active_count() - threads_before
    assert [[doc.name for doc in found] for found in answers] == [
        [f"Fact {number}"] for number in range(40)
    ]
    assert used <= _ENGINE_MAX, used
    assert threads <= 6, threads  # the engine's loop thread and the pool's workers
    for store in stores:
        store.close()
    assert _settled(pg_url, before) <= before


async def test_a_closed_store_leaves_the_other_namespaces_working(
    pg_url: str, open_pg: Any, namespace: str
) -> None:
    """Closing one namespace's store closes nothing the others use; the last one to
    close takes the engine's connections with it."""
    before = _backends(pg_url)
    first: PostgresStore = open_pg(f"{namespace}-a")
    second = first.for_namespace(f"{namespace}-b")
    try:
        first.save_memory("Alpha", "", "user", "alpha fact", origin="user")
        second.save_memory("Beta", "", "user", "beta fact", origin="user")
        assert [d.name for d in await first.candidates("fact")] == ["Alpha"]
        first.close()
        assert [d.name for d in await second.candidates("fact")] == ["Beta"]
        assert second.save_memory("Gamma", "", "user", "gamma", origin="user").name == "Gamma"
        assert "Gamma" in second.index_for_prompt()
    finally:
        second.close()
    assert _settled(pg_url, before) <= before


def test_each_store_hears_the_changes_of_its_own_namespace(open_pg: Any, namespace: str) -> None:
    """Over the one shared ``LISTEN`` connection, a save reaches every other store of
    its namespace (their caches dropped), and no store of another namespace: the other
    namespace's store hears only the save made in its own namespace afterwards (the
    notifications come in commit order, so that one is heard after the first would
    have been)."""
    writer: PostgresStore = open_pg(namespace)
    reader: PostgresStore = open_pg(namespace)
    other: PostgresStore = open_pg(f"{namespace}-other")
    other_writer: PostgresStore = open_pg(f"{namespace}-other")
    heard = threading.Event()
    reader.add_change_listener(lambda change: heard.set())
    other_heard: list[StoreChange] = []
    other_done = threading.Event()

    def on_other(change: StoreChange) -> None:
        other_heard.append(change)
        if change.memory_id == other.memory_id("Later"):
            other_done.set()

    other.add_change_listener(on_other)
    assert reader.index_for_prompt() == ""  # cached
    writer.save_memory("Deploy", "deploys", "project", "staging first", origin="user")
    assert heard.wait(10)
    assert "Deploy" in reader.index_for_prompt()
    other_writer.save_memory("Later", "", "user", "after the first save", origin="user")
    assert other_done.wait(10)
    assert [(c.op, c.memory_id) for c in other_heard] == [("save", other.memory_id("Later"))]


def test_a_part_that_fails_to_close_leaves_none_of_the_others_open(
    pg_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing the engine closes every part even when one fails (that error is raised
    after): here the loops' connections fail, and the pool and the private loop's
    thread, with the ``LISTEN`` connection and the async pool, are closed all the same."""
    before = _backends(pg_url)
    store = PostgresStore.open(pg_url, namespace=namespace, max_size=3)  # its own engine
    store.save_memory("Alpha", "", "user", "alpha fact", origin="user")
    engine = store._engine
    assert engine is not None and engine.pool is not None and engine.portal is not None
    pool, portal = engine.pool, engine.portal
    close_loops = engine.loops.close

    def fail() -> None:
        raise OSError("the loops' connections failed to close")

    monkeypatch.setattr(engine.loops, "close", fail)
    with pytest.raises(OSError, match="failed to close"):
        store.close()
    close_loops()
    assert pool.closed and portal.loop.is_closed()
    assert _settled(pg_url, before) <= before

"""One engine per process and database: every namespace's store shares its connections.

Issue 26, point 1: each store opened its own two pools, ``LISTEN`` connection, loop
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

from asyncrecall.memory import PostgresMemoryStore

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
    stores: list[PostgresMemoryStore] = []
    for number in range(40):
        store: PostgresMemoryStore = open_pg(f"{namespace}-{number}")
        store.save_memory(f"Fact {number}", "a fact", "project", f"tenant {number} fact")
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
    first: PostgresMemoryStore = open_pg(f"{namespace}-a")
    second = first.for_namespace(f"{namespace}-b")
    try:
        first.save_memory("Alpha", "", "user", "alpha fact")
        second.save_memory("Beta", "", "user", "beta fact")
        assert [d.name for d in await first.candidates("fact")] == ["Alpha"]
        first.close()
        assert [d.name for d in await second.candidates("fact")] == ["Beta"]
        assert second.save_memory("Gamma", "", "user", "gamma").name == "Gamma"
        assert "Gamma" in second.index_for_prompt()
    finally:
        second.close()
    assert _settled(pg_url, before) <= before


def test_each_store_hears_the_changes_of_its_own_namespace(open_pg: Any, namespace: str) -> None:
    """Over the one shared ``LISTEN`` connection, a save reaches every other store of
    its namespace (their caches dropped), and no store of another namespace."""
    writer: PostgresMemoryStore = open_pg(namespace)
    reader: PostgresMemoryStore = open_pg(namespace)
    other: PostgresMemoryStore = open_pg(f"{namespace}-other")
    heard = threading.Event()
    reader.add_change_listener(lambda change: heard.set())
    other_heard: list[object] = []
    other.add_change_listener(other_heard.append)
    assert reader.index_for_prompt() == ""  # cached
    writer.save_memory("Deploy", "deploys", "project", "staging first")
    assert heard.wait(10)
    assert "Deploy" in reader.index_for_prompt()
    assert other_heard == []

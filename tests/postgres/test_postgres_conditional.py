"""Conditional writes on the database store: ``save_if`` and ``forget_if``.

A write made on what was read writes only if the row is still at the revision read
(``MemoryDoc.revision``: the row version's ``xmin``), in one statement with its
``NOTIFY``; else it writes nothing and answers ``None``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from asyncrecall.memory import MemoryDoc, PostgresStore
from asyncrecall.memory.postgres._store import StoreChange

HANG_GUARD = 60.0


def _version(url: str, namespace: str, name: str) -> Any:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT version FROM asyncrecall_memories WHERE namespace = %s AND name = %s",
            (namespace, name),
        ).fetchone()


def test_save_if_writes_only_at_the_expected_revision(pg_store: PostgresStore) -> None:
    """``None`` expects no memory of that name; a revision expects the row still at
    it. A failed precondition writes nothing and returns ``None``."""
    created = pg_store.save_if("Plan", "d", "project", "v1", expected_revision=None)
    assert created is not None and created.body == "v1"
    assert pg_store.save_if("Plan", "d", "project", "again", expected_revision=None) is None
    updated = pg_store.save_if(
        "Plan", "d2", "project", "v2", expected_revision=created.revision, updated_at=1e9
    )
    assert updated is not None
    assert (updated.description, updated.body, updated.mtime) == ("d2", "v2", 1e9)
    assert updated.revision != created.revision
    stale = pg_store.save_if("Plan", "d", "project", "lost", expected_revision=created.revision)
    assert stale is None
    assert pg_store.get("Plan").body == "v2"
    assert pg_store.save_if("Gone", "d", "project", "x", expected_revision=updated.revision) is None
    assert {d.name for d in pg_store.scan(limit=None)} == {"Plan"}


def test_forget_if_removes_only_at_the_expected_revision(pg_store: PostgresStore) -> None:
    """A forget made on an older read removes nothing once the memory was written since."""
    first = pg_store.save_memory("Note", "d", "user", "old", origin="user")
    second = pg_store.save_memory("Note", "d", "user", "new", origin="user")
    assert pg_store.forget_if("Note", expected_revision=first.revision) is None
    assert pg_store.get("Note").body == "new"
    removed = pg_store.forget_if("Note", expected_revision=second.revision)
    assert removed is not None and removed.body == "new"
    assert pg_store.scan(limit=None) == []
    assert pg_store.forget_if("Note", expected_revision=second.revision) is None


def _race(
    url: str, hold: str, params: tuple[Any, ...], writers: list[Callable[[], Any]]
) -> list[Any]:
    """Run ``writers`` in threads while another transaction holds a lock (``hold``)
    they all need; release it once every one of them waits on it."""
    results: list[Any] = [None] * len(writers)

    def run(index: int) -> None:
        try:
            results[index] = writers[index]()
        except Exception as exc:  # reported by the caller's assertions
            results[index] = exc

    with psycopg.connect(url) as holder:
        holder.execute(hold, params)
        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(writers))]
        for thread in threads:
            thread.start()
        _wait_for_waiters(url, len(writers))
        holder.commit()
        for thread in threads:
            thread.join(HANG_GUARD)
    assert not any(thread.is_alive() for thread in threads)
    return results


def test_two_writers_expecting_one_revision_exactly_one_wins(
    pg_url: str, open_pg: Any, namespace: str
) -> None:
    """Two stores (two processes' worth of pools) update one memory from the same read
    at the same moment: one writes, the other gets ``None``; the row moved one version
    and holds the winner's body."""
    mine: PostgresStore = open_pg(namespace)
    theirs: PostgresStore = open_pg(namespace)
    read = mine.save_memory("Shared", "d", "project", "base", origin="user")
    results = _race(
        pg_url,
        "SELECT 1 FROM asyncrecall_memories WHERE namespace = %s AND name = 'Shared' FOR UPDATE",
        (namespace,),
        [
            lambda: mine.save_if("Shared", "d", "project", "mine", expected_revision=read.revision),
            lambda: theirs.save_if(
                "Shared", "d", "project", "theirs", expected_revision=read.revision
            ),
        ],
    )
    winners = [r for r in results if isinstance(r, MemoryDoc)]
    assert len(winners) == 1 and results.count(None) == 1, results
    assert mine.get("Shared").body == winners[0].body
    assert _version(pg_url, namespace, "Shared") == (2,)


def test_two_creators_of_one_new_name_exactly_one_wins(
    pg_url: str, open_pg: Any, namespace: str
) -> None:
    """Two stores create one new name at the same moment, each expecting it absent:
    one creates it, the other gets ``None`` (no error, no deadlock)."""
    mine: PostgresStore = open_pg(namespace)
    theirs: PostgresStore = open_pg(namespace)
    results = _race(
        pg_url,
        "SELECT pg_advisory_xact_lock(%s)",
        (mine._announcer().lock_key("fresh.md"),),
        [
            lambda: mine.save_if("Fresh", "d", "user", "mine", expected_revision=None),
            lambda: theirs.save_if("Fresh", "d", "user", "theirs", expected_revision=None),
        ],
    )
    winners = [r for r in results if isinstance(r, MemoryDoc)]
    assert len(winners) == 1 and results.count(None) == 1, results
    assert mine.get("Fresh").body == winners[0].body
    assert _version(pg_url, namespace, "Fresh") == (1,)


def test_a_forget_and_a_save_from_one_read_exactly_one_wins(
    pg_url: str, open_pg: Any, namespace: str
) -> None:
    """A conditional forget and a conditional save from the same read, at once: either
    the memory is gone and the save wrote nothing, or it holds the save and stays."""
    mine: PostgresStore = open_pg(namespace)
    theirs: PostgresStore = open_pg(namespace)
    read = mine.save_memory("Fact", "d", "user", "base", origin="user")
    results = _race(
        pg_url,
        "SELECT 1 FROM asyncrecall_memories WHERE namespace = %s AND name = 'Fact' FOR UPDATE",
        (namespace,),
        [
            lambda: mine.forget_if("Fact", expected_revision=read.revision),
            lambda: theirs.save_if("Fact", "d", "user", "new", expected_revision=read.revision),
        ],
    )
    forgot, saved = results
    assert (forgot is None) != (saved is None), results
    left = {d.name: d.body for d in mine.scan(limit=None)}
    assert left == ({} if saved is None else {"Fact": "new"})


@pytest.mark.timeout(180)
def test_conditional_writes_notify_other_stores(open_pg: Any, namespace: str) -> None:
    """``save_if`` and ``forget_if`` announce themselves as saves and forgets do: another
    store's listeners hear both."""
    writer: PostgresStore = open_pg(namespace)
    reader: PostgresStore = open_pg(namespace)
    heard: list[tuple[str, str]] = []
    both = threading.Event()

    def on_change(change: StoreChange) -> None:
        heard.append((change.op, change.memory_id))
        if len(heard) == 2:
            both.set()

    reader.add_change_listener(on_change)
    doc = writer.save_if("Heard", "d", "user", "x", expected_revision=None)
    assert doc is not None
    assert writer.forget_if("Heard", expected_revision=doc.revision) is not None
    assert both.wait(HANG_GUARD)
    heard_id = reader.memory_id("Heard")
    assert heard == [("save", heard_id), ("forget", heard_id)]


def _wait_for_waiters(url: str, count: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(int(HANG_GUARD * 100)):
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND pid <> pg_backend_pid() AND (query LIKE '%%asyncrecall_memories%%' "
                "OR query LIKE '%%pg_advisory_xact_lock%%')"
            ).fetchone()
            if row is not None and row[0] >= count:
                return
            conn.execute("SELECT pg_sleep(0.01)")
    raise AssertionError(f"{count} lock waiters never appeared")

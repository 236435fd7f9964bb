"""Concurrent saves of new names, deadlocks and serialisation failures.

Two inserts of one new name used to deadlock on the table's two unique indexes (the
name's and the file name's) and PostgreSQL aborted one: a save lost. A save now takes
an advisory lock on its (namespace, file name) first, so the second insert finds the
first's row and updates it; and the store's write path retries a transaction
PostgreSQL rolled back (deadlock, serialisation failure) a bounded number of times.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from asyncrecall.memory import PostgresStore
from asyncrecall.testing import LocalPostgres

HANG_GUARD = 60.0

# Each worker opens its store, says "ready", then on each line of stdin saves the
# next new name (n0, n1, ...) and answers "ok" or the error: the test lets all the
# workers go on one name at once, so every name is new to all of them together.
_WORKER = """
import sys
from asyncrecall import MemoryStoreError
from asyncrecall.memory import PostgresStore
url, namespace, worker = sys.argv[1:4]
with PostgresStore.open(url, namespace=namespace, listen=False, max_size=1) as store:
    store.scan(limit=1)  # a pooled connection, warm
    print("ready", flush=True)
    for i, _ in enumerate(sys.stdin):
        try:
            store.save_memory(f"n{i}", f"from {worker}", "project", f"body {worker} {i}",
                              origin="user")
            print("ok", flush=True)
        except MemoryStoreError as exc:
            print(f"error: {exc}", flush=True)
"""


def _server_log(server: LocalPostgres) -> Path:
    return server.folder / "log"


def _log_since(server: LocalPostgres, offset: int) -> str:
    with open(_server_log(server), "rb") as handle:
        handle.seek(offset)
        return handle.read().decode("utf-8", errors="replace")


@pytest.mark.timeout(300)
def test_saves_of_the_same_new_names_from_eight_processes_all_count(
    pg_server: LocalPostgres, pg_url: str, open_pg: Any, namespace: str
) -> None:
    """8 processes save the same 60 new names at once (480 saves): every save returns,
    none raises, each name's row counts all 8 saves (version 8: one insert, seven
    updates), and the server logged no deadlock."""
    workers, count = 8, 60
    log_start = _server_log(pg_server).stat().st_size
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, pg_url, namespace, str(w)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    answers: list[str] = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for _ in range(count):
            for proc in procs:  # all waiting: let them go on this name together
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            for proc in procs:
                assert proc.stdout is not None
                answers.append(proc.stdout.readline().strip())
        for proc in procs:
            proc.communicate(timeout=HANG_GUARD)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for proc in procs:
        assert proc.returncode == 0, proc.stderr
    assert [a for a in answers if a != "ok"] == []
    assert len(answers) == workers * count

    with psycopg.connect(pg_server.url) as conn:
        rows = conn.execute(
            "SELECT name, version FROM asyncrecall_memories WHERE namespace = %s", (namespace,)
        ).fetchall()
    assert sorted(rows) == sorted((f"n{i}", workers) for i in range(count))
    store: PostgresStore = open_pg(namespace)
    assert len(store.scan(limit=None)) == count
    assert "deadlock detected" not in _log_since(pg_server, log_start)


@pytest.mark.timeout(120)
def test_a_save_that_postgres_aborts_in_a_deadlock_is_retried(
    pg_server: LocalPostgres, pg_store: PostgresStore
) -> None:
    """A save PostgreSQL picks as a deadlock's victim (40P01) is run again and lands,
    once: the server logged the deadlock, the save returned, the row moved one version."""
    before = pg_store.save_memory("Y", "first", "project", "one", origin="user")
    rel_lock = pg_store._announcer().lock_key(before.rel_path)
    log_start = _server_log(pg_server).stat().st_size
    saved: list[Any] = []

    def save() -> None:
        try:
            saved.append(pg_store.save_memory("Y", "second", "project", "two", origin="user"))
        except Exception as exc:  # reported by the assertion below
            saved.append(exc)

    with psycopg.connect(pg_server.url) as other:
        # The other transaction waits long before checking for a deadlock, so the
        # store's, which started waiting first, is the one PostgreSQL aborts.
        other.execute("SET deadlock_timeout = '60s'")
        other.execute(
            "UPDATE asyncrecall_memories SET body = body WHERE namespace = %s AND name = 'Y'",
            (pg_store.namespace,),
        )  # holds the row the save will wait for
        writer = threading.Thread(target=save)
        writer.start()
        # The save holds its file name's lock and waits for our row (reading the row as
        # it was, for its history record, FOR UPDATE): take its lock too.
        _wait_for_lock_waiters(pg_server.url, 1, query_part="FOR UPDATE OF m")
        other.execute("SELECT pg_advisory_xact_lock(%s)", (rel_lock,))
        other.commit()
        writer.join(HANG_GUARD)
    assert not writer.is_alive()
    [result] = saved
    assert isinstance(result, type(before)), result
    assert (result.description, result.body) == ("second", "two")
    with psycopg.connect(pg_server.url) as conn:
        version = conn.execute(
            "SELECT version FROM asyncrecall_memories WHERE namespace = %s AND name = 'Y'",
            (pg_store.namespace,),
        ).fetchone()
    assert version == (2,)  # the save, once (ours left the version)
    assert _log_since(pg_server, log_start).count("deadlock detected") == 1


_SERIALIZATION_FAILURE = (
    "DO $$ BEGIN RAISE EXCEPTION 'could not serialize' USING ERRCODE = '40001'; END $$"
)
_OTHER_ROLLBACK = "DO $$ BEGIN RAISE EXCEPTION 'unknown' USING ERRCODE = '40003'; END $$"


def test_serialisation_failures_are_retried_a_bounded_number_of_times(
    pg_store: PostgresStore,
) -> None:
    """A transaction the server rolls back with 40001 is run again, at most
    ``ROLLBACK_RETRIES`` times, then the error is the caller's; another 40xxx state
    (statement completion unknown) is never retried."""
    from asyncrecall.memory.postgres._store import ROLLBACK_RETRIES

    calls = 0

    def fails_then_passes(conn: psycopg.Connection[Any]) -> Any:
        nonlocal calls
        calls += 1
        if calls <= 3:
            conn.execute(_SERIALIZATION_FAILURE)
        return conn.execute("SELECT 42").fetchone()

    assert pg_store._run(fails_then_passes) == (42,)
    assert calls == 4

    calls = 0

    def always_fails(conn: psycopg.Connection[Any]) -> None:
        nonlocal calls
        calls += 1
        conn.execute(_SERIALIZATION_FAILURE)

    with pytest.raises(psycopg.errors.SerializationFailure):
        pg_store._run(always_fails)
    assert calls == ROLLBACK_RETRIES + 1

    calls = 0

    def unknown_completion(conn: psycopg.Connection[Any]) -> None:
        nonlocal calls
        calls += 1
        conn.execute(_OTHER_ROLLBACK)

    with pytest.raises(psycopg.errors.StatementCompletionUnknown):
        pg_store._run(unknown_completion)
    assert calls == 1


def _wait_for_lock_waiters(url: str, count: int, *, query_part: str) -> None:
    """Until ``count`` backends running a statement containing ``query_part`` wait on
    a lock (a hang guard bounds it)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(int(HANG_GUARD * 100)):
            (waiting,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE %s AND pid <> pg_backend_pid()",
                (f"%{query_part}%",),
            ).fetchone() or (0,)
            if waiting >= count:
                return
            conn.execute("SELECT pg_sleep(0.01)")
    raise AssertionError(f"{count} lock waiters never appeared")

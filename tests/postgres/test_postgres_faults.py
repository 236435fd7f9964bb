"""Faults: a database down at start, one that goes away mid-session and comes back."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from asyncrecall import ConfigError, MemoryStoreError
from asyncrecall.memory import LexicalSelector, PostgresStore, Recaller
from asyncrecall.memory.postgres._store import StoreChange
from asyncrecall.testing import LocalPostgres

_NOWHERE = "postgresql:///postgres?host=/nonexistent-asyncrecall-socket&user=postgres"


def test_a_database_down_at_start_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot use the memory database") as caught:
        PostgresStore.open(_NOWHERE, namespace="n")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("command", [["list"], ["recall", "anything"], ["show", "x"]])
def test_the_cli_says_so_in_one_line_and_exits_2(tmp_path: Path, command: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", *command, "--store", _NOWHERE,
         "--project", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyncrecall: cannot use the memory database")
    assert result.stdout == ""


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "asyncrecall.memory"]


async def test_a_database_gone_mid_session_means_no_memory_then_memory_again(
    pg_server: LocalPostgres, open_pg: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Recall returns nothing with one warning while the database is down, the index
    reads as "", saves fail clearly; once it is back, recall resumes by itself and the
    caches were dropped on the way (the listener reconnected)."""
    store: PostgresStore = open_pg(namespace, timeout=1.0)
    store.save_memory("Database", "db", "project", "Use real Postgres.", origin="user")
    manager = Recaller(store, LexicalSelector())
    assert (await manager.recall("postgres")).paths == ("database.md",)
    assert store.index_for_prompt() != ""
    reconnected = threading.Event()

    def on_change(change: StoreChange) -> None:
        if change.op == "reconnect":
            reconnected.set()

    store.add_change_listener(on_change)
    caplog.set_level(logging.WARNING, logger="asyncrecall.memory")
    pg_server.stop()
    try:
        for query in ("postgres", "postgres again", "real"):
            result = await manager.recall(query)
            assert result.selected == () and result.prompt == ""
        assert not store.caching
        assert store.index_for_prompt() == ""
        with pytest.raises(MemoryStoreError, match="cannot save to the memory database"):
            store.save_memory("Lost", "", "user", "x", origin="user")
        warnings = [m for m in _messages(caplog) if "unreachable" in m]
        assert len(warnings) == 1, _messages(caplog)  # one per outage, not per recall
    finally:
        pg_server.start()
    assert reconnected.wait(20)
    assert store.caching
    for _ in range(150):  # the pools reconnect with their own back-off: poll, 30 s at most
        if (await manager.recall("postgres")).paths == ("database.md",):
            break
        await asyncio.sleep(0.2)
    assert (await manager.recall("postgres")).paths == ("database.md",)
    assert any("reachable again" in m for m in _messages(caplog))
    assert (
        store.save_memory("Back", "", "user", "saved after the restart", origin="user").name
        == "Back"
    )


async def test_a_connection_the_server_closed_is_replaced_within_the_same_recall(
    pg_url: str, open_pg: Any, namespace: str
) -> None:
    """The server ends the recall's idle connection (a restart, an idle timeout, an
    administrator): the next recall notices on its query, drops that connection and
    asks again on another, so it still returns its memory, at the first try."""
    import psycopg

    store: PostgresStore = open_pg(namespace)
    store.save_memory("Database", "db", "project", "Use real Postgres.", origin="user")
    manager = Recaller(store, LexicalSelector())
    assert (await manager.recall("postgres")).paths == ("database.md",)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (store._query.loops.name,),
        ).fetchone()
    assert ended is not None and ended[0] >= 1  # the recall's connection was there
    assert (await manager.recall("postgres")).paths == ("database.md",)


def test_saves_resume_at_the_first_try_after_a_long_outage(
    pg_server: LocalPostgres, open_pg: Any, namespace: str
) -> None:
    """Saves fail while the database is down; the first one after it is back lands.

    The pools' background reconnection doubles its pause after each failure (1, 2, 4,
    8 s ...): after an outage of 9 s its next try came up to 8 s after the database was
    back, and every save until then waited for it and failed. The pools now give a
    reconnection up after about a second, and the next call starts a new one at once."""
    store: PostgresStore = open_pg(namespace, timeout=2.0)
    store.save_memory("Before", "", "user", "saved before the outage", origin="user")
    pg_server.stop()
    try:
        failed = 0
        end = time.monotonic() + 9.0
        while time.monotonic() < end:
            with pytest.raises(MemoryStoreError, match="cannot save to the memory database"):
                store.save_memory("Lost", "", "user", "x", origin="user")
            failed += 1
    finally:
        pg_server.start()
    assert failed >= 3
    assert (
        store.save_memory("Back", "", "user", "the first try after", origin="user").name == "Back"
    )
    assert store.get("Back").body == "the first try after"


async def test_the_index_never_waits_for_a_database_that_is_down(
    pg_server: LocalPostgres, open_pg: Any, namespace: str
) -> None:
    """The system prompt's index is read on the event loop (a session's start, a
    reset): with the database down it reads as "" without waiting for the pool to
    connect (5 s froze the loop before), and as the index again once it is back."""
    store: PostgresStore = open_pg(namespace, timeout=5.0)
    store.save_memory("Database", "db", "project", "Use real Postgres.", origin="user")
    assert "Database" in store.index_for_prompt()
    pg_server.stop()
    try:
        for _ in range(100):  # the listener sees its connection end
            if not store.caching:
                break
            await asyncio.sleep(0.05)
        assert not store.caching
        for _ in range(3):
            started = time.monotonic()
            assert store.index_for_prompt() == ""
            assert time.monotonic() - started < 2.5  # the pool's wait is 5 s
    finally:
        pg_server.start()
    for _ in range(100):
        if "Database" in store.index_for_prompt():
            break
        await asyncio.sleep(0.1)
    assert "Database" in store.index_for_prompt()


def test_a_save_waiting_when_the_database_comes_back_lands(
    pg_server: LocalPostgres, open_pg: Any, namespace: str
) -> None:
    """A save that is already waiting for a connection when the database comes back
    lands: the pool makes a new connection only for a caller that arrives, and gives a
    reconnection up after a second, so a caller waiting since before then (here 2.5 s)
    waited out its whole timeout and failed."""
    store: PostgresStore = open_pg(namespace, timeout=6.0)
    store.save_memory("Before", "", "user", "saved before the outage", origin="user")
    pg_server.stop()
    outcome: list[object] = []
    try:
        with pytest.raises(MemoryStoreError):
            store.save_memory(
                "Lost", "", "user", "x", origin="user"
            )  # the pool's reconnection gives up
        saving = threading.Thread(
            target=lambda: outcome.append(_attempt(store, "Waiting", "saved across the return"))
        )
        saving.start()
        time.sleep(2.5)
    finally:
        pg_server.start()
    saving.join(30)
    assert outcome == ["Waiting"]
    assert store.get("Waiting").body == "saved across the return"


def _attempt(store: PostgresStore, name: str, body: str) -> object:
    try:
        return store.save_memory(name, "", "user", body, origin="user").name
    except MemoryStoreError as exc:
        return exc


@pytest.mark.parametrize("where", ["on the loop", "from a thread"])
async def test_closing_a_store_mid_recall_ends_every_recall(
    pg_url: str, open_pg: Any, namespace: str, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Recalls in flight when the store is closed end (with their memory or none),
    both those on the caller's loop and those sent to the store's own loop (more than
    ``max_size`` at once): a connection closed under its query, and the store's loop
    stopped under its tasks, left them waiting for ever. Nothing is reported as an
    outage, and no task is left pending."""
    store: PostgresStore = open_pg(namespace, max_size=2)
    for number in range(30):
        store.save_memory(
            f"note {number}", "db", "project", f"postgres fact {number}", origin="user"
        )
    manager = Recaller(store, LexicalSelector())
    assert (await manager.recall("postgres")).selected
    caplog.set_level(logging.WARNING)
    recalls = [asyncio.create_task(manager.recall(f"postgres fact {n}")) for n in range(8)]
    await asyncio.sleep(0.002)  # the queries are out
    if where == "on the loop":
        store.close()
    else:
        await asyncio.to_thread(store.close)
    results = await asyncio.wait_for(asyncio.gather(*recalls), 20)
    assert len(results) == 8
    assert not [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert not [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR]

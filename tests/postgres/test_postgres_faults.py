"""Faults: a database down at start, one that goes away mid-session and comes back."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from asyncrecall import ConfigError, MemoryStoreError
from asyncrecall.memory import LexicalSelector, MemoryManager, PostgresMemoryStore
from asyncrecall.memory.postgres._store import StoreChange
from asyncrecall.testing import LocalPostgres

_NOWHERE = "postgresql:///postgres?host=/nonexistent-asyncrecall-socket&user=postgres"


def test_a_database_down_at_start_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot use the memory database") as caught:
        PostgresMemoryStore.open(_NOWHERE, namespace="n")
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
    store: PostgresMemoryStore = open_pg(namespace, timeout=1.0)
    store.save_memory("Database", "db", "project", "Use real Postgres.")
    manager = MemoryManager(store, LexicalSelector())
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
            store.save_memory("Lost", "", "user", "x")
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
    assert store.save_memory("Back", "", "user", "saved after the restart").name == "Back"


async def test_a_connection_the_server_closed_is_replaced_within_the_same_recall(
    pg_url: str, open_pg: Any, namespace: str
) -> None:
    """The server ends the recall's idle connection (a restart, an idle timeout, an
    administrator): the next recall notices on its query, drops that connection and
    asks again on another, so it still returns its memory, at the first try."""
    import psycopg

    store: PostgresMemoryStore = open_pg(namespace)
    store.save_memory("Database", "db", "project", "Use real Postgres.")
    manager = MemoryManager(store, LexicalSelector())
    assert (await manager.recall("postgres")).paths == ("database.md",)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s",
            (f"asyncrecall-recall-{store._id[:12]}",),
        ).fetchone()
    assert ended is not None and ended[0] >= 1  # the recall's connection was there
    assert (await manager.recall("postgres")).paths == ("database.md",)

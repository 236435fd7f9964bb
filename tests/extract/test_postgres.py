"""Extraction and consolidation on the PostgreSQL store, against a real cluster.

The same guarantees as the folder's: memories written into the store's namespace with
their provenance, the cursor kept in the database (a new store instance, a new process
see it), names confined as a folder confines paths, consolidation applied through the
store, a crash before or during the writes losing nothing and repeating nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from asyncrecall import MemoryStoreError
from asyncrecall.agent import ExtractionScheduler
from asyncrecall.cli._session import open_session
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import MemoryExtractor, PostgresStore, TranscriptTurn
from asyncrecall.memory.extraction._consolidate import consolidate, consolidation_gate
from asyncrecall.memory.extraction._state import Journal
from asyncrecall.memory.postgres._extraction import PostgresBackend, PostgresConsolidationGate
from asyncrecall.memory.postgres._schema import SCHEMA_VERSION
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalPostgres, LocalServer, Reply

from .conftest import (
    HANG_GUARD,
    SideModel,
    is_extraction,
    kill_mid_extraction,
    memory,
    offsets_in_prompt,
)
from .test_consolidate import DELETE, MERGE, REWRITE, PlanSide, plan

CRASH_WORKER = Path(__file__).with_name("_crash_worker.py")
CONSOLIDATE_WORKER = Path(__file__).with_name("_consolidate_worker.py")


def turns(n: int, start: int = 0) -> list[TranscriptTurn]:
    return [
        TranscriptTurn(i, "user" if i % 2 == 0 else "assistant", f"turn {i}")
        for i in range(start, n)
    ]


def names(store: PostgresStore) -> list[str]:
    return sorted(doc.name for doc in store.scan(limit=None))


def rows(url: str, query: Any, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, params).fetchall()


@pytest.fixture
def pg(open_pg: Any, namespace: str) -> PostgresStore:
    store: PostgresStore = open_pg(namespace)
    return store


async def test_extraction_writes_into_the_namespace_and_the_cursor_outlives_the_store(
    pg: PostgresStore,
    open_pg: Any,
    pg_url: str,
    side_model: OpenAIModel,
    side: SideModel,
    local_server: LocalServer,
) -> None:
    """Accepted proposals become rows of the store's namespace (the index shows them),
    their provenance is kept in the database, and the cursor lives there too: a new
    store instance continues from it, showing the model only the new turns; an update
    merges the provenance."""
    side.add(memory("Staging cluster", [0, 1], content="The staging cluster is blue."))
    extractor = MemoryExtractor(pg, side_model)
    assert isinstance(extractor.backend, PostgresBackend) and extractor.state_dir is None

    result = await extractor.extract("s1", turns(2))

    assert result.created == ("staging-cluster.md",) and extractor.cursor("s1") == 2
    (doc,) = pg.scan()
    assert doc.body == "The staging cluster is blue." and "staging-cluster.md" in (
        pg.index_for_prompt()
    )
    assert extractor.backend.source_offsets(doc) == {"s1": (0, 1)}
    assert rows(pg_url, "SELECT count(*) FROM asyncrecall_memories WHERE namespace = %s",
                f"{pg.namespace}-other") == [(0,)]  # fmt: skip

    again = open_pg(pg.namespace)  # a new instance: the state is in the database
    update = memory("Staging cluster", [2], content="Staging is green now.", action="update")
    side.add({**update, "path": "staging-cluster.md"})
    second = MemoryExtractor(again, side_model)
    assert second.cursor("s1") == 2
    result = await second.extract("s1", turns(4))

    assert result.updated == ("staging-cluster.md",) and second.cursor("s1") == 4
    requests = [r for r in local_server.requests if is_extraction(r)]
    assert [offsets_in_prompt(r) for r in requests] == [[0, 1], [2, 3]]
    (doc,) = again.scan()
    assert doc.body == "Staging is green now."
    assert second.backend.source_offsets(doc) == {"s1": (0, 1, 2)}
    assert rows(pg_url, "SELECT journal FROM asyncrecall_extraction WHERE namespace = %s",
                pg.namespace) == [(None,)]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside.md", "outside the memory folder"),
        ("a/../b.md", "outside the memory folder"),
        ("/etc/passwd.md", "outside the memory folder"),
        ("MEMORY.md", "not a memory file"),
        ("notes.txt", "not a memory file"),
        (".hidden.md", "hidden file"),
    ],
)
async def test_a_name_outside_the_store_is_refused_as_in_a_folder(
    pg: PostgresStore, side_model: OpenAIModel, side: SideModel, path: str, reason: str
) -> None:
    """A proposal naming a path that would leave a memory folder (or is not a memory
    file) is refused on the database too, for that reason, and nothing is written for
    it; the proposal beside it is."""
    side.add(memory("Escape", [0], path=path), memory("Fine", [1]))
    result = await MemoryExtractor(pg, side_model).extract("s1", turns(2))
    (refusal,) = result.refused
    assert refusal.index == 0 and reason in refusal.reason
    assert names(pg) == ["Fine"]


async def test_a_consolidation_plan_is_applied_on_the_database(
    pg: PostgresStore,
    local_server: LocalServer,
    side_model: OpenAIModel,
    pg_url: str,
) -> None:
    """Merge (provenance merged, the other memory removed with its provenance), rewrite
    and delete go through the store; a dry run changes nothing."""
    backend = PostgresBackend(pg)
    backend.save("Office", "where", "project", "The office is in Paris.", {"s1": [0]})
    backend.save("Office location", "where too", "project", "We work in Paris.", {"s1": [4]})
    backend.save("Deploy day", "when", "project", "We deploy on mondays.", None)
    backend.save("Old editor", "tools", "user", "The user uses vim.", None)
    side = PlanSide(local_server)
    side.replies.append(Reply(json=plan(MERGE, DELETE)))
    dry = await consolidate(pg, side_model, dry_run=True)
    assert dry.dry_run and len(names(pg)) == 4

    side.replies.append(Reply(json=plan(MERGE, REWRITE, DELETE)))
    result = await consolidate(pg, side_model)

    assert result.written == ("office.md", "deploy-day.md")
    assert set(result.removed) == {"office-location.md", "old-editor.md"}
    assert names(pg) == ["Deploy day", "Office"]
    assert pg.get("Deploy day").body == "We deploy on fridays now."
    assert backend.source_offsets(pg.get("Office")) == {"s1": (0, 4)}
    left = rows(pg_url, "SELECT name FROM asyncrecall_sources WHERE namespace = %s", pg.namespace)
    assert left == [("Office",)]  # the removed memory's provenance went with it
    assert "office-location.md" not in pg.index_for_prompt()


def test_the_gate_lives_in_the_database(pg: PostgresStore, open_pg: Any) -> None:
    """Due after 24 hours and 5 sessions; one holder at a time across store instances
    (processes); a lock an hour old is taken over; a completed run resets the gate."""
    now = [1_000_000.0]
    gate = consolidation_gate(pg, clock=lambda: now[0])
    assert isinstance(gate, PostgresConsolidationGate)
    other = PostgresConsolidationGate(open_pg(pg.namespace), clock=lambda: now[0])
    for _ in range(5):
        gate.note_session()
    assert not gate.due()
    now[0] += 24 * 3600
    assert gate.due() and other.due()
    assert gate.acquire() and not other.acquire() and not gate.acquire()
    now[0] += 3601
    assert other.acquire()  # stale: taken over
    gate.release(completed=True)  # not its lock any more: changes nothing
    assert other.due()
    other.release(completed=True)
    assert not gate.due() and gate.acquire()


def test_consolidate_with_store_url_through_the_cli(
    pg: PostgresStore,
    local_server: LocalServer,
    pg_url: str,
    tmp_path: Path,
) -> None:
    """``asyncrecall memory consolidate --store URL --namespace NS`` (a real process)
    prints the plan on a dry run, then applies it to the database."""
    pg.save_memory("Deploy day", "when", "project", "We deploy on mondays.", origin="user")
    pg.save_memory("Old editor", "tools", "user", "The user uses vim.", origin="user")
    side = PlanSide(local_server)
    side.replies += [Reply(json=plan(DELETE)), Reply(json=plan(DELETE))]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    command = [sys.executable, "-m", "asyncrecall", "memory", "consolidate", "--json",
               "--base-url", local_server.base_url, "--api-key", "t", "--model", "side",
               "--store", pg_url, "--namespace", pg.namespace]  # fmt: skip

    dry = subprocess.run([*command, "--dry-run"], env=env, capture_output=True, text=True,
                         timeout=HANG_GUARD)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["actions"][0]["paths"] == ["old-editor.md"]
    assert names(pg) == ["Deploy day", "Old editor"]

    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"] == ["old-editor.md"]
    assert names(pg) == ["Deploy day"]


async def test_a_session_on_the_database_extracts_in_the_background(
    pg: PostgresStore,
    side: SideModel,
    local_server: LocalServer,
    tmp_path: Path,
    pg_url: str,
) -> None:
    """``--store postgresql://...``: the session builds extraction on the database; a
    completed query's facts land in the namespace."""
    project = tmp_path / "project"
    project.mkdir()
    settings = Settings(base_url=local_server.base_url, api_key="t", model="main",
                        side_model="side", project=project, home=tmp_path / "home",
                        store=pg_url, namespace=pg.namespace)  # fmt: skip
    side.add(memory("Deploys", [0, 1], content="We deploy on fridays."))
    local_server.script("main", "noted")
    session = open_session(settings)
    try:
        assert session.extraction is not None
        await session.agent.ask("we deploy on fridays")
        await session.extraction.wait_idle()
    finally:
        await session.aclose()
    assert names(pg) == ["Deploys"]


# -- crashes -------------------------------------------------------------------------------


def crash_worker(server: LocalServer, url: str, n: int, *crash: str) -> list[str]:
    transcript = json.dumps(
        [{"offset": i, "role": ("user", "assistant")[i % 2], "text": f"turn {i}"} for i in range(n)]
    )
    return [sys.executable, str(CRASH_WORKER), url, server.base_url, "s1", transcript, *crash]


def crash_env(namespace: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CRASH_NAMESPACE": namespace}


def test_killed_during_the_side_query_leaves_the_cursor_then_nothing_twice(
    pg: PostgresStore,
    local_server: LocalServer,
    side: SideModel,
    pg_url: str,
) -> None:
    """A process killed (SIGKILL) while its side query is out leaves the database cursor
    where the last completed extraction put it; the restart extracts exactly the
    unprocessed turns, and every fact is in the namespace once."""
    backend = PostgresBackend(pg)
    env = crash_env(pg.namespace)
    side.add(memory("First", [0, 1]))
    done = subprocess.run(crash_worker(local_server, pg_url, 2), env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert backend.cursor("s1") == 2

    side.add(memory("Second", [2, 3]), gate=threading.Event())
    kill_mid_extraction(local_server, crash_worker(local_server, pg_url, 4), env, [2, 3])
    assert backend.cursor("s1") == 2 and names(pg) == ["First"]
    assert backend.journal("s1") is None
    side.replies.clear()

    side.add(memory("Second", [2, 3]))
    done = subprocess.run(crash_worker(local_server, pg_url, 4), env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD)  # fmt: skip
    assert done.returncode == 0, done.stderr
    extractions = [r for r in local_server.requests if is_extraction(r)]
    assert [offsets_in_prompt(r) for r in extractions] == [[0, 1], [2, 3], [2, 3]]
    assert names(pg) == ["First", "Second"] and backend.cursor("s1") == 4
    assert backend.source_offsets(pg.get("Second")) == {"s1": (2, 3)}


def test_a_crash_half_way_through_the_writes_is_rolled_forward_from_the_database(
    pg: PostgresStore,
    local_server: LocalServer,
    side: SideModel,
    pg_url: str,
) -> None:
    """A process dying after the first of two memory writes leaves its journal in the
    database; the restart writes the rest from it (no new side query), moves the cursor
    and drops the journal: every memory exactly once, with its provenance."""
    backend = PostgresBackend(pg)
    env = crash_env(pg.namespace)
    side.add(memory("Alpha", [0]), memory("Beta", [1]))
    crashed = subprocess.run(crash_worker(local_server, pg_url, 2, "1"), env=env,
                             capture_output=True, text=True, timeout=HANG_GUARD)  # fmt: skip
    assert crashed.returncode == 9, crashed.stderr
    assert names(pg) == ["Alpha"] and backend.cursor("s1") == 0
    journal = backend.journal("s1")
    assert journal is not None and [w.name for w in journal.writes] == ["Alpha", "Beta"]

    done = subprocess.run(crash_worker(local_server, pg_url, 2), env=env, capture_output=True,
                          text=True, timeout=HANG_GUARD)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["recovered"] is True
    assert len([r for r in local_server.requests if is_extraction(r)]) == 1
    assert names(pg) == ["Alpha", "Beta"]
    assert backend.cursor("s1") == 2 and backend.journal("s1") is None
    assert backend.source_offsets(pg.get("Beta")) == {"s1": (1,)}


# -- the schema --------------------------------------------------------------------------


@pytest.fixture
def fresh_database(pg_server: LocalPostgres) -> Iterator[str]:
    """A database of its own on the cluster, made and used by the owner (dropped
    afterwards)."""
    pg_url = pg_server.url
    name = f"migrate_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # a generated identifier, not user input
    try:
        yield pg_url.replace("///postgres?", f"///{name}?")
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_a_version_1_database_is_migrated_forward_keeping_its_memories(
    fresh_database: str,
) -> None:
    """A database made by the previous version (schema 1: memories only) gets the
    extraction tables on the next open; its memories stay, and extraction works."""
    with PostgresStore.open(fresh_database, namespace="ns") as store:
        store.save_memory("Kept", "d", "project", "a memory from before", origin="user")
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        for table in ("asyncrecall_extraction", "asyncrecall_sources", "asyncrecall_consolidation"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("ALTER TABLE asyncrecall_memories DROP COLUMN front_matter")  # schema 3
        conn.execute("DROP TABLE asyncrecall_history")  # schema 4
        conn.execute("DROP INDEX asyncrecall_memories_folded, asyncrecall_memories_wide")  # 5
        conn.execute("ALTER TABLE asyncrecall_schema DROP COLUMN notify_salt")  # schema 6
        conn.execute("ALTER TABLE asyncrecall_memories DROP COLUMN provenance")  # schema 7
        conn.execute("UPDATE asyncrecall_schema SET version = 1")

    with PostgresStore.open(fresh_database, namespace="ns") as store:
        assert [(d.name, d.origin, d.quarantined) for d in store.scan()] == [
            ("Kept", "user", False)  # no provenance: the user's own (schema 7)
        ]
        backend = PostgresBackend(store)
        backend.commit(backend.journal("s") or _journal("s", 3))
        assert backend.cursor("s") == 3
    assert rows(fresh_database, "SELECT version FROM asyncrecall_schema") == [(SCHEMA_VERSION,)]
    assert SCHEMA_VERSION == 9  # a new migration: undo it above too (8 and 9 have no DDL)


def _journal(session: str, end: int) -> Any:
    from asyncrecall.memory.extraction._state import Journal

    return Journal(session, 0, end, ())


# -- consolidation: a crash, and automatic runs ---------------------------------------------


def test_a_consolidation_crash_half_way_leaves_every_memory_old_or_new(
    pg: PostgresStore, pg_url: str
) -> None:
    """A process killed right after the first memory of a plan was replaced: every
    memory of the namespace is whole, either its old or its new text, none is lost."""
    backend = PostgresBackend(pg)
    backend.save("Office", "where", "project", "The office is in Paris.", {"s1": [0]})
    backend.save("Office location", "where too", "project", "We work in Paris.", {"s1": [4]})
    backend.save("Deploy day", "when", "project", "We deploy on mondays.", None)
    backend.save("Old editor", "tools", "user", "The user uses vim.", None)
    old = {d.name: d.body for d in pg.scan()}
    done = subprocess.run(
        [sys.executable, str(CONSOLIDATE_WORKER), pg_url, json.dumps(plan(REWRITE, MERGE, DELETE))],
        env=crash_env(pg.namespace), capture_output=True, text=True, timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 9, done.stderr
    now = {d.name: d.body for d in pg.scan()}
    assert set(now) == set(old)  # nothing removed yet
    assert [name for name in now if now[name] != old[name]] == ["Deploy day"]
    assert now["Deploy day"] == "We deploy on fridays now."
    assert backend.source_offsets(pg.get("Office")) == {"s1": (0,)}


async def test_an_extraction_on_the_database_triggers_a_due_consolidation(
    pg: PostgresStore, local_server: LocalServer, side_model: OpenAIModel
) -> None:
    """The session's scheduler on a database store: when the database's gate says a
    consolidation is due, it runs after the extraction (``memory_consolidated``) and
    the gate is reset, in the database."""
    pg.save_memory("Old editor", "tools", "user", "The user uses vim.", origin="user")
    pg.save_memory("Deploy day", "when", "project", "We deploy on mondays.", origin="user")
    side = SideModel()
    local_server.set_default(
        "side",
        lambda r: Reply(json=plan(DELETE)) if "memory_consolidation" in json.dumps(r.body)
        else side(r),
    )  # fmt: skip
    side.add(memory("New fact", [0]))
    gate = consolidation_gate(pg, min_hours=0, min_sessions=1)
    scheduler = ExtractionScheduler(MemoryExtractor(pg, side_model), consolidation=gate)
    seen: list[str] = []
    scheduler.add_listener(lambda e: seen.append(e.type))
    scheduler.query_completed("a new fact", "ok", saved_memory=False)
    async with asyncio.timeout(HANG_GUARD):
        await scheduler.wait_idle()
    await scheduler.aclose()
    assert seen == ["memory_extraction_started", "memory_extracted", "memory_consolidated"]
    assert names(pg) == ["Deploy day", "New fact"]
    assert not gate.due() and isinstance(gate, PostgresConsolidationGate)


async def test_a_database_that_goes_away_fails_the_extraction_and_loses_nothing(
    pg: PostgresStore,
    pg_server: LocalPostgres,
    side_model: OpenAIModel,
    side: SideModel,
    local_server: LocalServer,
) -> None:
    """With the database down, an extraction fails with one clear line (the scheduler
    reports it as ``error``) and moves nothing; once the database is back, the next one
    covers the same turns and writes them once."""
    extractor = MemoryExtractor(pg, side_model)
    pg_server.stop()
    try:
        with pytest.raises(MemoryStoreError, match=r"cannot .* in the memory database") as caught:
            await extractor.extract("s1", turns(2))
        assert "\n" not in str(caught.value)
    finally:
        pg_server.start()
    side.add(memory("Deploys", [0, 1]))
    result = await extractor.extract("s1", turns(2))
    assert result.created == ("deploys.md",) and extractor.cursor("s1") == 2
    assert [offsets_in_prompt(r) for r in local_server.requests if is_extraction(r)] == [[0, 1]]


async def test_a_crashed_sessions_journal_in_the_database_is_rolled_forward_by_another(
    pg: PostgresStore,
    local_server: LocalServer,
    side: SideModel,
    side_model: OpenAIModel,
    pg_url: str,
) -> None:
    """As for a folder: a stale journal (over ten minutes) of a session that never comes
    back is rolled forward by another session's extraction, except for the memories
    written since by anyone; a fresh one is left alone."""
    backend = PostgresBackend(pg)
    side.add(memory("Alpha", [0]), memory("Beta", [1]), memory("Gamma", [1]))
    command = crash_worker(local_server, pg_url, 2, "1")
    command[command.index("s1")] = "dead"
    crashed = await asyncio.to_thread(
        subprocess.run, command, env=crash_env(pg.namespace), capture_output=True, text=True,
        timeout=HANG_GUARD,
    )  # fmt: skip
    assert crashed.returncode == 9, crashed.stderr
    assert names(pg) == ["Alpha"] and backend.journal("dead") is not None
    extractor = MemoryExtractor(pg, side_model)
    await extractor.extract("live", turns(1))
    assert backend.journal("dead") is not None and names(pg) == ["Alpha"]  # fresh: alone

    pg.save_memory("Gamma", "newer", "project", "Gamma as someone wrote it later.", origin="user")
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            "UPDATE asyncrecall_extraction SET updated_at = updated_at - interval '1 hour'"
            " WHERE namespace = %s AND session = 'dead'",
            (pg.namespace,),
        )
    await extractor.extract("live", turns(2))

    assert names(pg) == ["Alpha", "Beta", "Gamma"]
    assert pg.get("Gamma").body == "Gamma as someone wrote it later."
    assert backend.source_offsets(pg.get("Beta")) == {"dead": (1,)}
    assert backend.journal("dead") is None and backend.cursor("dead") == 2


async def test_an_ended_sessions_cursor_is_dropped_unless_a_journal_waits(
    pg: PostgresStore, pg_url: str, side_model: OpenAIModel, side: SideModel
) -> None:
    """``end_session`` (its command ended, its extraction is done) removes the session's
    row; a session whose journal still waits to be rolled forward keeps it."""
    side.add(memory("Staging cluster", [0, 1], content="The staging cluster is blue."))
    extractor = MemoryExtractor(pg, side_model)
    await extractor.extract("s1", turns(2))
    backend = extractor.backend
    assert isinstance(backend, PostgresBackend)
    backend.write_journal(Journal("s2", 0, 2, ()))
    query = "SELECT session FROM asyncrecall_extraction WHERE namespace = %s ORDER BY session"
    assert rows(pg_url, query, pg.namespace) == [("s1",), ("s2",)]

    assert extractor.end_session("s1") and not extractor.end_session("s2")

    assert rows(pg_url, query, pg.namespace) == [("s2",)]
    assert extractor.cursor("s1") == 0 and backend.journal("s2") is not None

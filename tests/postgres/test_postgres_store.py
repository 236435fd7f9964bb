"""What only the database store does: schema versions, namespaces, full-text candidates,
and caches kept true by LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import defaultdict
from typing import Any

import psycopg
import pytest
from psycopg import sql

from asyncrecall import ConfigError, MemoryStoreError
from asyncrecall.memory import SCAN_LIMIT, LexicalSelector, PostgresStore, Recaller
from asyncrecall.memory.postgres._schema import SCHEMA_VERSION
from asyncrecall.memory.postgres._sql import NEWEST_FILL
from asyncrecall.memory.postgres._store import StoreChange, redact_url
from asyncrecall.memory.postgres._text import text_array
from asyncrecall.testing import LocalPostgres

from .conftest import analyze


def _scratch_database(server: LocalPostgres) -> str:
    """A new, empty database on the session's server; returns its URL."""
    name = f"scratch_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    return server.url.replace("/postgres?", f"/{name}?")


def test_the_store_creates_and_records_its_schema(pg_server: LocalPostgres) -> None:
    url = _scratch_database(pg_server)
    for _ in range(2):  # the second open finds the schema and changes nothing
        with PostgresStore.open(url, namespace="n") as store:
            store.save_memory("A", "", "user", "x", origin="user")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM asyncrecall_schema").fetchall() == [
            (SCHEMA_VERSION,)
        ]
        assert conn.execute("SELECT count(*) FROM asyncrecall_memories").fetchone() == (1,)


def test_a_database_of_version_5_gets_its_secret_and_keeps_its_memories(
    pg_server: LocalPostgres,
) -> None:
    """Migration 6 on a database made before it: the one schema row gets a random
    secret, the memories stay, and two stores of the namespace agree on the digests."""
    url = _scratch_database(pg_server)
    with PostgresStore.open(url, namespace="n") as store:
        store.save_memory("Kept", "", "user", "x", origin="user")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE asyncrecall_schema DROP COLUMN notify_salt")
        conn.execute("UPDATE asyncrecall_schema SET version = 5")
    with (
        PostgresStore.open(url, namespace="n") as one,
        PostgresStore.open(url, namespace="n") as two,
    ):
        assert one.get("Kept").body == "x"
        assert one.memory_id("Kept") == two.memory_id("Kept")
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version, length(notify_salt) FROM asyncrecall_schema").fetchone()
        assert row == (SCHEMA_VERSION, 72)


def test_a_newer_schema_is_refused_with_a_clear_error(pg_server: LocalPostgres) -> None:
    """Older code never touches a schema it does not know."""
    url = _scratch_database(pg_server)
    PostgresStore.open(url, namespace="n").close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE asyncrecall_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(ConfigError, match=rf"schema version {SCHEMA_VERSION + 1}, newer than"):
        PostgresStore.open(url, namespace="n")


@pytest.mark.parametrize(
    "namespace",
    ["user 'quoted'", 'x"; DROP TABLE asyncrecall_memories; --', "%(ns)s", "émoji 🧠 / \\", " "],
)
def test_odd_namespaces_are_data_and_stay_apart(open_pg: Any, namespace: str) -> None:
    odd = open_pg(namespace)
    other = open_pg(f"plain-{uuid.uuid4().hex[:8]}")
    odd.save_memory("Secret", "only here", "user", "in the odd namespace", origin="user")
    other.save_memory("Other", "", "user", "elsewhere", origin="user")
    assert [d.name for d in odd.scan()] == ["Secret"]
    assert [d.name for d in other.scan()] == ["Other"]
    assert odd.get("secret").body == "in the odd namespace"


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ("", "namespace is 1 to 1,000 bytes"),
        ("bad\x00namespace", "namespace cannot hold a NUL"),
        ("x" * 1001, "namespace is 1 to 1,000 bytes in UTF-8; this one is 1,001"),
        # 1,000 characters, 2,000 bytes: the B-tree entry would not fit.
        ("ü" * 1000, "namespace is 1 to 1,000 bytes in UTF-8; this one is 2,000"),
        ("half \ud83d", "namespace holds a lone surrogate .U.D83D"),
    ],
)
def test_an_impossible_namespace_is_a_config_error(
    pg_url: str, namespace: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        PostgresStore(pg_url, namespace=namespace)


def test_the_largest_namespace_and_name_fit_together(open_pg: Any) -> None:
    """The caps are the database's: a 1,000-byte namespace holding a 1,000-byte name is
    saved, found, listed and forgotten (its key, history and index entries all fit)."""
    store = open_pg("ü" * 500)
    name = "é" * 500
    store.save_memory(name, "both at their limit", "user", "body", origin="user")
    assert store.get(name).body == "body"
    assert any(line.startswith(f"- [{name}]") for line in store.index_for_prompt().splitlines())
    assert store.forget(name).name == name
    assert [r.op for r in store.history_of(name)] == ["save", "forget"]


def test_a_lone_surrogate_in_a_key_is_a_store_error(pg_store: PostgresStore) -> None:
    """Not the driver's bare ``UnicodeEncodeError``: the same one-line error as bad input."""
    for call in (pg_store.get, pg_store.forget, pg_store.find, pg_store.history_of):
        with pytest.raises(MemoryStoreError, match="lone surrogate"):
            call("half \udc00")


def test_a_nul_character_is_rejected_before_the_database(pg_store: PostgresStore) -> None:
    with pytest.raises(MemoryStoreError, match="NUL"):
        pg_store.save_memory("N", "", "user", "before\x00after", origin="user")
    assert pg_store.scan() == []


def test_the_password_never_shows_in_messages() -> None:
    assert redact_url("postgresql://ann:s3cret@db:5432/app") == "postgresql://ann:***@db:5432/app"
    store = PostgresStore("postgresql://ann:s3cret@db/app", namespace="n")
    try:
        assert "s3cret" not in repr(store) and "s3cret" not in store.location
    finally:
        store.close()


async def test_a_large_namespace_offers_full_text_matches_and_the_newest(
    pg_store: PostgresStore,
) -> None:
    """Past 200 memories, an old memory that matches the query is still offered."""
    pg_store.save_memory(
        "Airship", "transport", "project", "We ship parts by zeppelin.", origin="user"
    )
    for number in range(SCAN_LIMIT + 50):
        pg_store.save_memory(
            f"Filler {number}", "routine", "project", f"routine note {number}", origin="user"
        )
    assert "Airship" not in {d.name for d in pg_store.scan()}  # not among the newest 200
    offered = await pg_store.candidates("how do parts travel by zeppelin?")
    names = [d.name for d in offered]
    assert names[0] == "Airship"
    assert len(names) <= SCAN_LIMIT and len(set(names)) == len(names)
    assert f"Filler {SCAN_LIMIT + 49}" in names  # the newest fill
    assert len(names) == 1 + NEWEST_FILL
    result = await Recaller(pg_store, LexicalSelector()).recall("zeppelin parts")
    assert result.paths[0] == "airship.md"
    excluded = await pg_store.candidates("zeppelin", exclude={"airship.md"})
    assert "Airship" not in {d.name for d in excluded}


async def test_recall_never_blocks_the_callers_event_loop(pg_store: PostgresStore) -> None:
    """The database round trip is asynchronous I/O: our loop keeps turning while the
    candidates query waits on a table lock held elsewhere."""
    pg_store.save_memory("A", "", "user", "alpha", origin="user")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    try:
        with psycopg.connect(pg_store.url) as conn:
            conn.execute("LOCK TABLE asyncrecall_memories IN ACCESS EXCLUSIVE MODE")
            task = asyncio.create_task(pg_store.candidates("alpha"))
            await asyncio.sleep(0.3)
            assert not task.done() and ticks > 10  # our loop ran while the query waited
            conn.rollback()
        async with asyncio.timeout(10):
            assert [d.name for d in await task] == ["A"]
    finally:
        ticker.cancel()
        await asyncio.wait({ticker})


def test_caches_follow_changes_made_through_another_connection(
    open_pg: Any, namespace: str
) -> None:
    """A store caches its index and scans, and drops them when another store (its own
    LISTEN connection, as another process) saves or forgets."""
    reader, writer = open_pg(namespace), open_pg(namespace)
    assert reader.caching
    writer.save_memory("First", "one", "user", "1", origin="user")
    seen: dict[tuple[str, str], threading.Event] = defaultdict(threading.Event)

    def on_change(change: StoreChange) -> None:
        seen[(change.op, change.memory_id)].set()

    remove = reader.add_change_listener(on_change)
    assert reader.index_for_prompt() == "- [First](first.md) — one"
    assert [d.name for d in reader.scan()] == ["First"]
    writer.save_memory("Second", "two", "user", "2", origin="user")
    assert seen[("save", reader.memory_id("Second"))].wait(10)
    assert "Second" in reader.index_for_prompt()
    assert [d.name for d in reader.scan()] == ["Second", "First"]
    writer.forget("First")
    assert seen[("forget", reader.memory_id("First"))].wait(10)
    assert "First" not in reader.index_for_prompt()
    remove()
    remove()  # twice is harmless


def test_a_cached_read_is_served_without_the_database(pg_store: PostgresStore) -> None:
    """While listening, a repeated index read is a cache hit (the cache is real)."""
    pg_store.save_memory("A", "a", "user", "x", origin="user")
    first = pg_store.index_for_prompt()
    generation = pg_store.generation
    with psycopg.connect(pg_store.url, autocommit=True) as conn:
        # A change that bypasses the store and sends no NOTIFY: a cache hit cannot see it.
        conn.execute(
            "UPDATE asyncrecall_memories SET description = 'changed' WHERE namespace = %s",
            (pg_store.namespace,),
        )
    assert pg_store.index_for_prompt() == first
    assert pg_store.generation == generation


def test_a_closed_store_says_so(pg_store: PostgresStore) -> None:
    pg_store.close()
    pg_store.close()
    with pytest.raises(MemoryStoreError, match="closed"):
        pg_store.scan()
    assert asyncio.run(pg_store.candidates("x")) == []


def test_the_common_lexemes_literal_reads_back_as_the_same_array(pg_url: str) -> None:
    """The common lexemes travel as one ``text[]`` literal: any text reads back as is."""
    items = ["plain", 'qu"ote', "back\\slash", "a,b", "{brace}", " sp ace ", "NULL", "", "é"]
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT %s::text[]", (text_array(items),)).fetchone()
        assert row is not None and row[0] == items
        empty = conn.execute("SELECT %s::text[]", (text_array([]),)).fetchone()
        assert empty is not None and empty[0] == []


def _insert_rows(url: str, rows: list[tuple[object, ...]]) -> None:
    """Rows straight into the table (namespace, name, rel_path, description, type, body,
    size[, updated_at]), then ``ANALYZE``: a large namespace in a second."""
    columns = "namespace, name, rel_path, description, type, body, size"
    if len(rows[0]) == 8:
        columns += ", updated_at"
    marks = ", ".join(["%s"] * len(rows[0]))
    statement = f"INSERT INTO asyncrecall_memories ({columns}) VALUES ({marks})"
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cursor:
        cursor.executemany(statement, rows)  # type: ignore[arg-type]
    analyze(url)


async def test_a_common_word_does_not_crowd_out_a_rare_one(pg_store: PostgresStore) -> None:
    """A query term the statistics expect in over 1,000 rows does not select candidates:
    with it, the 1,000 rows ranked at most would be arbitrary rows holding the common
    word (the rare match, stored last, would be left out); without it, the rare term
    decides."""
    rows = [
        (pg_store.namespace, f"Note {n}", f"note-{n}.md", "", "project", "zebra crossing", 20)
        for n in range(3000)
    ]
    _insert_rows(pg_store.url, rows)
    pg_store.save_memory("Rare", "", "project", "zebra quokka sighting", origin="user")
    offered = await pg_store.candidates("zebra quokka")
    assert offered[0].name == "Rare"
    # Only common words: none selects, and the newest lead (Rare, saved last); were they
    # used, 1,000 arbitrary rows holding both would be ranked before it.
    offered = await pg_store.candidates("zebra crossing")
    assert offered[0].name == "Rare"


async def test_the_row_holding_every_term_is_ranked_before_the_cap(
    pg_store: PostgresStore,
) -> None:
    """1,800 rows hold one of two rare terms each (900 apiece: neither is common), so
    matching any term finds more rows than the 1,000 ranked; the one row holding both,
    stored last and old (the newest-memories fill does not bring it), is ranked first
    all the same (it used to be cut before ranking)."""
    rows = [
        (pg_store.namespace, f"Note {n}", f"note-{n}.md", "", "project", body, 20)
        for n, body in enumerate(["alpaca grazing"] * 900 + ["bison herd"] * 900)
    ]
    rows = [(*row, "2024-01-01") for row in rows]
    rows.append((pg_store.namespace, "Both", "both.md", "", "project", "alpaca and bison", 20,
                 "2020-01-01"))  # fmt: skip
    _insert_rows(pg_store.url, rows)
    offered = await pg_store.candidates("alpaca bison")
    assert offered[0].name == "Both"


async def test_another_tenants_words_do_not_hide_a_memory(pg_store: PostgresStore) -> None:
    """Another namespace's 3,000 memories about a cluster make "cluster" common in the
    table, not in this namespace, whose one memory about it is still found (judged over
    the whole table, the word was dropped from the query, and only this namespace's 20
    newest memories were offered)."""

    def note(namespace: str, n: int, body: str, at: str) -> tuple[object, ...]:
        return (namespace, f"Note {n}", f"note-{n}.md", "", "project", body, 20, at)

    rows = [note(f"{pg_store.namespace}-other", n, "cluster migration", "2024-01-01")
            for n in range(3000)]  # fmt: skip
    rows.append((pg_store.namespace, "Cluster setup", "cluster-setup.md", "", "project",
                 "three nodes behind one load balancer", 20, "2020-01-01"))  # fmt: skip
    rows += [note(pg_store.namespace, n, "gardening tips", "2024-01-01") for n in range(300)]
    _insert_rows(pg_store.url, rows)
    offered = await pg_store.candidates("cluster")
    assert offered[0].name == "Cluster setup"


@pytest.mark.timeout(180)
def test_notifications_tell_an_outsider_no_name_and_no_namespace(
    pg_store: PostgresStore, pg_server: LocalPostgres
) -> None:
    """A role that may connect but is denied every table can still ``LISTEN``: what it
    hears of a save is digests keyed by a secret it cannot read, with neither the
    memory's name nor the namespace, nor the plain digest of either that a guess could be
    checked against (the name used to go out in every notification)."""
    import hashlib

    from asyncrecall.memory.postgres._text import namespace_key

    role = f"outsider_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server.url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    outsider_url = pg_server.url.replace("user=postgres", f"user={role}")
    name = "Alice is being laid off on 2025-03-01 (confidential)"
    with psycopg.connect(outsider_url, autocommit=True) as outsider:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            outsider.execute("SELECT notify_salt FROM asyncrecall_schema")
        outsider.execute("LISTEN asyncrecall_memories")
        pg_store.save_memory(name, "hr", "user", "the plan", origin="user")
        payload = next(outsider.notifies(timeout=10)).payload
    for secret in (name, name[:20], "Alice", pg_store.namespace, namespace_key(pg_store.namespace),
                   hashlib.sha256(name.encode()).hexdigest()[:32]):  # fmt: skip
        assert secret not in payload
    data = json.loads(payload)
    assert data["id"] == pg_store.memory_id(name) and data["op"] == "save"

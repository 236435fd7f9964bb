"""Row-level security per namespace (issue 26, point 5's option; ``_rls``).

Each test runs in a scratch database of its own: the policies must not reach the
session's shared one.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from asyncrecall import ConfigError, MemoryStoreError
from asyncrecall.memory import PostgresMemoryStore
from asyncrecall.memory.postgres._rls import RLS_TABLES
from asyncrecall.testing import LocalPostgres

from .test_postgres_roles import _app_role, _migrate_cli
from .test_postgres_store import _scratch_database


def _role(url: str) -> str:
    return url.split("user=", 1)[1].split("&", 1)[0]


def _namespaces(url: str) -> dict[str, list[str]]:
    """Per table, the namespaces the role at ``url`` sees with its own SQL."""
    with psycopg.connect(url, autocommit=True) as conn:
        return {
            table: [
                str(ns)
                for (ns,) in conn.execute(
                    psycopg.sql.SQL("SELECT DISTINCT namespace FROM {} ORDER BY 1").format(
                        psycopg.sql.Identifier(table)
                    )
                ).fetchall()
            ]
            for table in RLS_TABLES
        }


def test_a_role_bound_to_one_namespace_sees_and_writes_nothing_else(
    pg_server: LocalPostgres,
) -> None:
    """With row-level security on, a role bound to "bob" sees only bob's rows in every
    table, through the store or with its own SQL; alice's cannot be read, changed or
    written into, and her store reads as empty; the fleet's role, bound to none, still
    serves both."""
    url = _scratch_database(pg_server)
    PostgresMemoryStore.migrate(url)
    fleet_url, bob_url = _app_role(url), _app_role(url)
    for namespace, name in (("alice", "Alice layoff"), ("bob", "Bob plan")):
        with PostgresMemoryStore.open(fleet_url, namespace=namespace) as store:
            store.save_memory(name, "private", "project", f"{name} is confidential.")
            store.consolidation_gate().note_session()

    PostgresMemoryStore.enable_row_security(url, bind={_role(bob_url): "bob"})
    PostgresMemoryStore.enable_row_security(url)  # idempotent

    seen = _namespaces(bob_url)
    assert seen["asyncrecall_memories"] == ["bob"] and seen["asyncrecall_history"] == ["bob"]
    assert all(namespaces in ([], ["bob"]) for namespaces in seen.values()), seen
    with psycopg.connect(bob_url, autocommit=True) as conn:
        changed = conn.execute(
            "UPDATE asyncrecall_memories SET body = 'gone' WHERE namespace = 'alice'"
        ).rowcount
        assert changed == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                "INSERT INTO asyncrecall_memories (namespace, name, rel_path, type, body, size)"
                " VALUES ('alice', 'Planted', 'planted.md', 'user', 'x', 1)"
            )
        (bindings,) = conn.execute("SELECT count(*) FROM asyncrecall_tenants").fetchall()
        assert bindings == (1,)  # its own binding only

    with PostgresMemoryStore.open(bob_url, namespace="bob") as bob:
        assert bob.save_memory("Bob second", "", "user", "also bob").name == "Bob second"
        found = asyncio.run(bob.candidates("bob plan"))
        assert sorted(d.name for d in found) == ["Bob plan", "Bob second"]
        assert "Bob plan" in bob.index_for_prompt()
        assert len(bob.history_of("Bob plan")) == 1
    with PostgresMemoryStore.open(bob_url, namespace="alice") as alice:
        assert alice.scan() == [] and alice.index_for_prompt() == ""
        assert asyncio.run(alice.candidates("alice layoff")) == []
        with pytest.raises(MemoryStoreError):
            alice.get("Alice layoff")
        with pytest.raises(MemoryStoreError, match="row-level security"):
            alice.save_memory("Planted", "", "user", "x")
    with PostgresMemoryStore.open(fleet_url, namespace="alice") as alice:
        assert alice.get("Alice layoff").body == "Alice layoff is confidential."
        assert [d.name for d in alice.scan()] == ["Alice layoff"]


def test_only_the_owner_may_enable_it(pg_server: LocalPostgres) -> None:
    """An application role asking for row-level security gets a one-line error."""
    url = _scratch_database(pg_server)
    PostgresMemoryStore.migrate(url)
    with pytest.raises(ConfigError, match="cannot enable row-level security"):
        PostgresMemoryStore.enable_row_security(_app_role(url))


def test_memory_migrate_turns_it_on_and_binds_roles(pg_server: LocalPostgres) -> None:
    """``asyncrecall memory migrate --row-security --bind ROLE=NAMESPACE`` (the owner's
    command) migrates, turns the policies on and binds the role; a malformed --bind is a
    one-line error (exit 2) that changes nothing."""
    url = _scratch_database(pg_server)
    PostgresMemoryStore.migrate(url)
    bob_url = _app_role(url)
    bad = _migrate_cli("--store", url, "--row-security", "--bind", "no-equals-sign")
    assert bad.returncode == 2 and "ROLE=NAMESPACE" in bad.stderr
    done = _migrate_cli("--store", url, "--row-security", "--bind", f"{_role(bob_url)}=bob")
    assert done.returncode == 0, done.stderr
    assert "row-level security on (1 role(s) bound now)" in done.stdout
    with PostgresMemoryStore.open(url, namespace="alice") as owner:
        owner.save_memory("Alice layoff", "", "project", "confidential")
    with PostgresMemoryStore.open(bob_url, namespace="alice") as alice:
        assert alice.scan() == []

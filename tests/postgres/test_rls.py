"""Row-level security per namespace, the least-privilege option (``_rls``).

Each test runs in a scratch database of its own: the policies must not reach the
session's shared one.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from typing import LiteralString

import psycopg
import pytest

from asyncrecall import ConfigError, MemoryStoreError
from asyncrecall.memory import PostgresStore
from asyncrecall.memory.postgres._rls import RLS_TABLES
from asyncrecall.memory.postgres._text import Announcer
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
    written into, and her store reads as empty; the fleet's role, bound to all
    namespaces, still serves both."""
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    fleet_url, bob_url = _app_role(url), _app_role(url)
    for namespace, name in (("alice", "Alice layoff"), ("bob", "Bob plan")):
        with PostgresStore.open(fleet_url, namespace=namespace) as store:
            store.save_memory(name, "private", "project", f"{name} is confidential.", origin="user")
            store.consolidation_gate().note_session()

    warnings = PostgresStore.enable_row_security(
        url, bind=[(_role(bob_url), "bob")], bind_all=[_role(fleet_url)]
    )
    assert warnings == ()
    PostgresStore.enable_row_security(url)  # idempotent

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

    with PostgresStore.open(bob_url, namespace="bob") as bob:
        assert (
            bob.save_memory("Bob second", "", "user", "also bob", origin="user").name
            == "Bob second"
        )
        found = asyncio.run(bob.candidates("bob plan"))
        assert sorted(d.name for d in found) == ["Bob plan", "Bob second"]
        assert "Bob plan" in bob.index_for_prompt()
        assert len(bob.history_of("Bob plan")) == 1
    with PostgresStore.open(bob_url, namespace="alice") as alice:
        assert alice.scan() == [] and alice.index_for_prompt() == ""
        assert asyncio.run(alice.candidates("alice layoff")) == []
        with pytest.raises(MemoryStoreError):
            alice.get("Alice layoff")
        with pytest.raises(MemoryStoreError, match="row-level security"):
            alice.save_memory("Planted", "", "user", "x", origin="user")
    with PostgresStore.open(fleet_url, namespace="alice") as alice:
        assert alice.get("Alice layoff").body == "Alice layoff is confidential."
        assert [d.name for d in alice.scan()] == ["Alice layoff"]


def test_only_the_owner_may_enable_it(pg_server: LocalPostgres) -> None:
    """An application role asking for row-level security gets a one-line error."""
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    with pytest.raises(ConfigError, match="cannot enable row-level security"):
        PostgresStore.enable_row_security(_app_role(url))


_OLD_POLICY = """
CREATE POLICY asyncrecall_namespace ON {table}
USING (
    NOT EXISTS (SELECT 1 FROM asyncrecall_tenants)
    OR namespace IN (SELECT t.namespace FROM asyncrecall_tenants t)
)
"""


def _install_the_old_policy(url: str) -> None:
    """The policy before this fix, as a database made then holds it: a role bound to
    nothing saw every namespace."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE asyncrecall_tenants (role name NOT NULL, namespace text NOT NULL,"
            " PRIMARY KEY (role, namespace))"
        )
        conn.execute("ALTER TABLE asyncrecall_tenants ENABLE ROW LEVEL SECURITY")
        conn.execute(
            "CREATE POLICY asyncrecall_own ON asyncrecall_tenants USING (role = current_user)"
        )
        conn.execute("GRANT SELECT ON asyncrecall_tenants TO PUBLIC")
        for name in RLS_TABLES:
            table = psycopg.sql.Identifier(name)
            conn.execute(psycopg.sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(table))
            conn.execute(psycopg.sql.SQL(_OLD_POLICY).format(table=table))


def test_a_role_bound_to_nothing_sees_and_writes_nothing(pg_server: LocalPostgres) -> None:
    """Row-level security fails closed: a role with the data grants but no binding (one
    forgotten, or misspelt at binding time) reads no row of any table, through the store
    or its own SQL, and cannot write one. A database holding the older policy (under
    which such a role saw every namespace) gets the new one when it is turned on again."""
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    fleet_url, stray_url, bob_url = _app_role(url), _app_role(url), _app_role(url)
    for namespace in ("alice", "bob"):
        with PostgresStore.open(fleet_url, namespace=namespace) as store:
            store.save_memory(
                f"{namespace} secret", "private", "project", "confidential", origin="user"
            )
            store.consolidation_gate().note_session()
    _install_the_old_policy(url)
    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute("INSERT INTO asyncrecall_tenants VALUES (%s, 'bob')", (_role(bob_url),))
    assert _namespaces(stray_url)["asyncrecall_memories"] == ["alice", "bob"]  # the old hole

    PostgresStore.enable_row_security(url, bind_all=[_role(fleet_url)])

    assert _namespaces(stray_url) == {table: [] for table in RLS_TABLES}
    assert _namespaces(bob_url)["asyncrecall_memories"] == ["bob"]  # kept its binding
    with psycopg.connect(stray_url, autocommit=True) as conn:
        assert conn.execute("DELETE FROM asyncrecall_memories").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                "INSERT INTO asyncrecall_memories (namespace, name, rel_path, type, body, size)"
                " VALUES ('carol', 'Planted', 'planted.md', 'user', 'x', 1)"
            )
    with PostgresStore.open(stray_url, namespace="alice") as alice:
        assert alice.scan() == [] and alice.index_for_prompt() == ""
        assert asyncio.run(alice.candidates("alice secret")) == []
        with pytest.raises(MemoryStoreError, match="row-level security"):
            alice.save_memory("Planted", "", "user", "x", origin="user")
    with PostgresStore.open(fleet_url, namespace="alice") as alice:
        assert [d.name for d in alice.scan()] == ["alice secret"]


def _migrate(*args: str) -> subprocess.CompletedProcess[str]:
    return _migrate_cli("--store", *args)


_BINDINGS: dict[str, LiteralString] = {
    "asyncrecall_tenants": "SELECT role::text, namespace FROM asyncrecall_tenants ORDER BY 1, 2",
    "asyncrecall_fleet": "SELECT role::text FROM asyncrecall_fleet ORDER BY 1",
}


def _state(url: str) -> list[tuple[object, ...]]:
    """What row-level security left in the database: the tables it is on, the policies,
    the bindings."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname::text, relrowsecurity FROM pg_class"
            " WHERE relname LIKE 'asyncrecall%%' AND relkind = 'r' ORDER BY 1"
        ).fetchall()
        rows += conn.execute(
            "SELECT tablename::text, policyname::text, qual FROM pg_policies ORDER BY 1, 2"
        ).fetchall()
        for table, query in _BINDINGS.items():
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() != (None,):
                rows += conn.execute(query).fetchall()
    return rows


def test_memory_migrate_binds_a_role_to_several_namespaces_and_the_fleet_to_all(
    pg_server: LocalPostgres,
) -> None:
    """``memory migrate --row-security --bind ROLE=NS --bind ROLE=NS2 --bind-all FLEET``
    (the owner's command, the real CLI): the role reads and writes both its namespaces
    and no other, the fleet's role every namespace; the JSON report lists the pairs. A
    role bound that the policies cannot hold (a superuser) is reported on stderr."""
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    fleet_url, bob_url = _app_role(url), _app_role(url)
    bob, fleet = _role(bob_url), _role(fleet_url)
    for namespace in ("alice", "bob-work", "bob-home"):
        with PostgresStore.open(fleet_url, namespace=namespace) as store:
            store.save_memory(f"{namespace} fact", "", "project", "x", origin="user")
    done = _migrate(url, "--row-security", "--bind", f"{bob}=bob-work",
                    "--bind", f"{bob}=bob-home", "--bind-all", fleet, "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["row_security"] == {
        "bound": [
            {"role": bob, "namespace": "bob-work"},
            {"role": bob, "namespace": "bob-home"},
        ],
        "bound_to_all": [fleet],
        "warnings": [],
    }
    assert done.stderr == ""
    assert _namespaces(bob_url)["asyncrecall_memories"] == ["bob-home", "bob-work"]
    assert _namespaces(fleet_url)["asyncrecall_memories"] == ["alice", "bob-home", "bob-work"]
    for namespace in ("bob-work", "bob-home"):
        with PostgresStore.open(bob_url, namespace=namespace) as store:
            assert store.save_memory("Second", "", "user", "y", origin="user").name == "Second"
            assert sorted(d.name for d in store.scan()) == ["Second", f"{namespace} fact"]

    text = _migrate(url, "--row-security", "--bind-all", "postgres")
    assert text.returncode == 0, text.stderr
    assert (
        text.stdout.splitlines()[-1]
        == "row-level security on; bound now: postgres -> every namespace"
    )
    assert text.stderr.strip() == (
        "asyncrecall: warning: role 'postgres' is a superuser: row-level security does not "
        "apply to it, it sees every namespace"
    )


def test_a_misspelt_role_is_refused_and_changes_nothing(pg_server: LocalPostgres) -> None:
    """A ``--bind`` naming a role the database does not have is a one-line error (exit
    2) that changes nothing: neither the policies nor the bindings given with it (before,
    it was accepted, and the real role, bound to nothing, saw every namespace)."""
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    bob = _role(_app_role(url))
    before = _state(url)
    for args in (("--bind", f"{bob}=bob", "--bind", f"{bob}x=bob"), ("--bind-all", "Postgres")):
        refused = _migrate(url, "--row-security", *args)
        assert refused.returncode == 2
        assert refused.stderr.count("\n") == 1 and "in this database" in refused.stderr, refused
        assert _state(url) == before
    bad = _migrate(url, "--row-security", "--bind", "no-equals-sign")
    assert bad.returncode == 2 and "ROLE=NAMESPACE" in bad.stderr
    assert _migrate(url, "--row-security", "--bind", f"{bob}=bob").returncode == 0
    after = _state(url)
    refused = _migrate(url, "--row-security", "--bind", f"{bob}=more", "--bind", "nobody=x")
    assert refused.returncode == 2 and "'nobody'" in refused.stderr
    assert _state(url) == after
    unbound = _migrate(url, "--row-security")
    assert "no role is bound to all namespaces" in unbound.stderr


def test_a_tenant_hears_its_own_namespace_and_gets_no_secret_to_test_others(
    pg_server: LocalPostgres,
) -> None:
    """A role bound to namespaces may not read the notification secret (with it, it
    could test guessed names of any namespace's memories against the notifications it
    can ``LISTEN`` to); it gets the keys of its own namespaces only, with which its
    stores and the fleet's still hear each other's changes there. A later grant of the
    secret is taken back by turning row-level security on again; one through PUBLIC is
    reported; binding the role to all namespaces gives the secret back."""
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    fleet_url, bob_url = _app_role(url), _app_role(url)
    bob = _role(bob_url)
    assert (
        PostgresStore.enable_row_security(url, bind=[(bob, "bob")], bind_all=[_role(fleet_url)])
        == ()
    )

    def secret_readable() -> bool:
        with psycopg.connect(bob_url, autocommit=True) as conn:
            assert conn.execute("SELECT version FROM asyncrecall_schema").fetchone() is not None
            try:
                conn.execute("SELECT notify_salt FROM asyncrecall_schema")
            except psycopg.errors.InsufficientPrivilege:
                return False
            return True

    assert not secret_readable()
    with psycopg.connect(bob_url, autocommit=True) as conn:
        keys = conn.execute("SELECT namespace, key FROM asyncrecall_notify_keys").fetchall()
    assert [namespace for namespace, _ in keys] == ["bob"]

    with (
        PostgresStore.open(fleet_url, namespace="bob") as fleet_side,
        PostgresStore.open(bob_url, namespace="bob") as bob_side,
        PostgresStore.open(fleet_url, namespace="alice") as alice,
        PostgresStore.open(bob_url, namespace="alice") as alice_seen_by_bob,
    ):
        assert bob_side.caching and not alice_seen_by_bob.caching
        assert bob_side.memory_id("Plan") == fleet_side.memory_id("Plan")
        heard = {"bob": threading.Event(), "fleet": threading.Event()}
        bob_side.add_change_listener(
            lambda c: heard["bob"].set() if c.memory_id == bob_side.memory_id("F") else None
        )
        fleet_side.add_change_listener(
            lambda c: heard["fleet"].set() if c.memory_id == fleet_side.memory_id("B") else None
        )
        assert bob_side.index_for_prompt() == ""  # cached
        fleet_side.save_memory("F", "", "user", "from the fleet", origin="user")
        assert heard["bob"].wait(10)
        assert "F" in bob_side.index_for_prompt()
        bob_side.save_memory("B", "", "user", "from bob's own process", origin="user")
        assert heard["fleet"].wait(10)

        with psycopg.connect(bob_url, autocommit=True) as listener:
            listener.execute("LISTEN asyncrecall_memories")
            alice.save_memory("Alice layoff", "", "user", "confidential", origin="user")
            payload = json.loads(next(listener.notifies(timeout=10)).payload)
        guesses = [Announcer(key, "alice") for _, key in keys]
        assert payload["id"] == alice.memory_id("Alice layoff")
        assert payload["id"] not in [g.memory_id("Alice layoff") for g in guesses]
        assert payload["ns"] not in [g.namespace_key for g in guesses]
        assert alice_seen_by_bob.memory_id("Alice layoff") != payload["id"]

    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute(psycopg.sql.SQL("GRANT SELECT ON asyncrecall_schema TO {}").format(
            psycopg.sql.Identifier(bob)))  # fmt: skip
    assert secret_readable()
    assert PostgresStore.enable_row_security(url) == ()
    assert not secret_readable()
    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute("GRANT SELECT ON asyncrecall_schema TO PUBLIC")
        (warning,) = PostgresStore.enable_row_security(url)
        assert f"role {bob!r} can still read asyncrecall_schema.notify_salt" in warning
        owner.execute("REVOKE SELECT ON asyncrecall_schema FROM PUBLIC")
    assert not secret_readable()
    PostgresStore.enable_row_security(url, bind_all=[bob])  # now one of the fleet
    assert secret_readable()


def test_a_tenant_cannot_make_the_keys_view_leak_other_tenants_keys(
    pg_server: LocalPostgres,
) -> None:
    """The view of notification keys is a security barrier: a condition of the tenant's
    own that tells what it sees (a function raising a notice, made cheap so the planner
    would run it first) sees only the tenant's own rows, not another tenant's binding."""
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    bob_url, carol_url = _app_role(url), _app_role(url)
    PostgresStore.enable_row_security(
        url, bind=[(_role(bob_url), "bob"), (_role(carol_url), "carol")]
    )
    seen: list[str] = []
    with psycopg.connect(bob_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda notice: seen.append(str(notice.message_primary)))
        conn.execute("SET enable_indexscan = off")  # every row to the cheapest condition
        conn.execute("SET enable_bitmapscan = off")
        conn.execute(
            """CREATE FUNCTION pg_temp.leak(namespace text) RETURNS boolean
               LANGUAGE plpgsql COST 0.0000001 AS
               $$ BEGIN RAISE NOTICE '%', namespace; RETURN true; END $$"""
        )
        rows = conn.execute(
            "SELECT namespace FROM asyncrecall_notify_keys WHERE pg_temp.leak(namespace)"
        ).fetchall()
    assert rows == [("bob",)]
    assert seen == ["bob"]


def test_a_tenant_cannot_test_guesses_against_another_namespaces_save_locks(
    pg_server: LocalPostgres,
) -> None:
    """A save holds an advisory lock on its file name, and ``pg_locks`` shows every role
    the keys held: the key is keyed by the namespace's own key, so a tenant seeing another
    namespace's save in flight cannot tell which name it writes, from the namespace and a
    guessed path alone nor with the keys of its own namespaces."""
    import hashlib

    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    fleet_url, bob_url = _app_role(url), _app_role(url)
    PostgresStore.enable_row_security(
        url, bind=[(_role(bob_url), "bob")], bind_all=[_role(fleet_url)]
    )
    with (
        PostgresStore.open(fleet_url, namespace="alice") as alice,
        psycopg.connect(url) as blocker,
        psycopg.connect(bob_url, autocommit=True) as bob,
    ):
        alice.save_memory("Alice layoff", "", "user", "confidential", origin="user")
        # The owner holds the row: alice's next save takes its advisory lock, then waits.
        blocker.execute("SELECT 1 FROM asyncrecall_memories WHERE namespace = 'alice' FOR UPDATE")
        saving = threading.Thread(
            target=alice.save_memory, args=("Alice layoff", "", "user", "changed")
        )
        saving.start()
        held: list[int] = []
        for _ in range(400):
            rows = bob.execute(
                "SELECT classid::bigint, objid::bigint FROM pg_locks "
                "WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
            ).fetchall()
            held = [((c << 32) | o) - (1 << 64) if c >= 1 << 31 else (c << 32) | o for c, o in rows]
            if held:
                break
            threading.Event().wait(0.05)
        blocker.rollback()
        saving.join(timeout=30)
        keys = bob.execute("SELECT key FROM asyncrecall_notify_keys").fetchall()

    rel = "alice-layoff.md"
    assert held == [alice._announcer().lock_key(rel)]  # the save's lock, seen by bob
    unkeyed = hashlib.sha1(f"asyncrecall rel_path\x00alice\x00{rel}".encode()).digest()
    guesses = [Announcer(key, "alice").lock_key(rel) for (key,) in keys]
    guesses += [
        Announcer("", "alice").lock_key(rel),
        int.from_bytes(unkeyed[:8], "big", signed=True),
    ]
    assert held[0] not in guesses

"""Least privilege: an application role without CREATE uses a schema
its owner migrated; DDL runs only when the schema is behind; ``memory migrate`` is the
owner's command.

Each test runs in a scratch database of its own, as PostgreSQL 15 makes one: ``public``
belongs to the database's owner and nobody else may CREATE in it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from asyncrecall import ConfigError
from asyncrecall.memory import PostgresStore
from asyncrecall.memory.postgres._schema import GRANTS, SCHEMA_VERSION
from asyncrecall.testing import LocalPostgres

from .test_postgres_store import _scratch_database


def _app_role(url: str) -> str:
    """A login role granted :data:`GRANTS` on the database at ``url``; its URL."""
    role = f"app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        for grant in GRANTS:
            owner.execute(grant.format(role=role))  # type: ignore[arg-type]
    return url.replace("user=postgres", f"user={role}")


def test_an_application_role_without_create_uses_the_migrated_schema(
    pg_server: LocalPostgres,
) -> None:
    """With only the documented grants (no CREATE anywhere) the role opens the store and
    saves, reads, recalls, conditionally writes, lists its history and forgets; before,
    every open ran ``CREATE TABLE IF NOT EXISTS`` and was refused."""
    url = _scratch_database(pg_server)
    assert PostgresStore.migrate(url) == (0, SCHEMA_VERSION)
    app_url = _app_role(url)
    with (
        psycopg.connect(app_url, autocommit=True) as app,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        app.execute("CREATE TABLE app_probe (x int)")
    with PostgresStore.open(app_url, namespace="tenant") as store:
        store.save_memory("Deploy", "how we ship", "project", "staging first", origin="user")
        assert store.get("deploy").body == "staging first"
        assert [d.name for d in asyncio.run(store.candidates("ship"))] == ["Deploy"]
        assert "Deploy" in store.index_for_prompt()
        saved = store.save_if("New", "d", "user", "x", expected_revision=None)
        assert saved is not None
        assert store.forget_if("New", expected_revision=saved.revision) is not None
        assert store.forget("Deploy").name == "Deploy"
        assert [r.op for r in store.history_of("Deploy")] == ["save", "forget"]


def test_a_schema_behind_tells_a_role_that_may_not_migrate_what_to_run(
    pg_server: LocalPostgres,
) -> None:
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    app_url = _app_role(url)
    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute("UPDATE asyncrecall_schema SET version = %s", (SCHEMA_VERSION - 1,))
    with pytest.raises(ConfigError) as refused:
        PostgresStore.open(app_url, namespace="tenant")
    message = str(refused.value)
    assert f"schema version {SCHEMA_VERSION - 1}, this asyncrecall needs {SCHEMA_VERSION}" in (
        message
    )
    assert "asyncrecall memory migrate --store URL" in message and "\n" not in message


def test_a_role_without_the_grants_is_told_what_it_lacks(pg_server: LocalPostgres) -> None:
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    role = f"bare_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    with pytest.raises(ConfigError, match=r"may not read the memory schema.*lists the grants"):
        PostgresStore.open(url.replace("user=postgres", f"user={role}"), namespace="t")


def _migrate_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", "migrate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


def test_memory_migrate_brings_the_schema_up_and_then_finds_it_current(
    pg_server: LocalPostgres, tmp_path: Path
) -> None:
    url = _scratch_database(pg_server)
    first = _migrate_cli("--store", url, "--project", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"schema version 0 -> {SCHEMA_VERSION}"
    again = _migrate_cli("--store", url, "--project", str(tmp_path), "--json")
    assert json.loads(again.stdout) == {"found": SCHEMA_VERSION, "version": SCHEMA_VERSION}
    folder = _migrate_cli("--memory-dir", str(tmp_path / "memory"))
    assert folder.returncode == 2
    assert folder.stderr.strip() == (
        "asyncrecall: memory migrate needs a database store: --store postgresql://..."
    )


def test_the_docs_list_the_grants_the_code_uses() -> None:
    page = (Path(__file__).parents[2] / "docs" / "postgres.md").read_text(encoding="utf-8")
    block = page.split("```sql\n", 1)[1].split("```", 1)[0]
    statements = [" ".join(s.split()) for s in block.split(";") if s.strip()]
    assert statements == [" ".join(g.format(role="app").split()) for g in GRANTS]


def test_a_role_that_may_not_read_the_secret_is_told_so(pg_server: LocalPostgres) -> None:
    """Without row-level security, a role that may read the schema's version but not its
    notification secret (nor any namespace's key) is refused with a one-line error: its
    saves would announce themselves with digests no other process can match, so their
    caches would not hear them."""
    url = _scratch_database(pg_server)
    PostgresStore.migrate(url)
    app_url = _app_role(url)
    role = sql.Identifier(app_url.split("user=", 1)[1].split("&", 1)[0])
    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute(sql.SQL("REVOKE SELECT ON asyncrecall_schema FROM {}").format(role))
        owner.execute(
            sql.SQL("GRANT SELECT (singleton, version) ON asyncrecall_schema TO {}").format(role)
        )
    with pytest.raises(ConfigError, match=r"may not read the notification secret") as refused:
        PostgresStore.open(app_url, namespace="tenant")
    assert "\n" not in str(refused.value)

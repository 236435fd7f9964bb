"""A real PostgreSQL for the store tests: one throw-away cluster per test session.

The cluster is started from the machine's binaries (``pg_config --bindir``) on a private
data and socket folder, as the ``postgres`` user when the suite runs as root (see
``asyncrecall.testing._postgres``). Each test gets its own namespace. Without the
binaries (or psycopg) the tests skip with the reason; with ``ASYNCRECALL_REQUIRE_POSTGRES=1``
(set by ``.ci/run``) that skip is an error.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from asyncrecall.memory.postgres._store import PostgresStore
    from asyncrecall.testing import LocalPostgres

REQUIRE = os.environ.get("ASYNCRECALL_REQUIRE_POSTGRES") == "1"


def _unavailable(reason: str) -> None:
    message = f"PostgreSQL store tests NOT RUN: {reason}"
    if REQUIRE:
        pytest.fail(f"{message} (ASYNCRECALL_REQUIRE_POSTGRES=1 makes this an error)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'asyncrecall[postgres]')")
    from asyncrecall.testing import LocalPostgres
    from asyncrecall.testing._postgres import find_postgres_bindir

    bindir = find_postgres_bindir()
    if bindir is None:
        _unavailable("no PostgreSQL binaries (pg_config --bindir); apt-get install postgresql-15")
    server = LocalPostgres(bindir).start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def pg_server(postgres_server: LocalPostgres) -> LocalPostgres:
    """The session's server, running (a fault test may have stopped it)."""
    if not postgres_server.running:
        postgres_server.start()
    return postgres_server


#: The role the store tests run as: an application role granted only the documented
#: data (``GRANTS``), no CREATE anywhere, on a schema migrated by the server's owner
#: (least privilege). Tests that need the owner (ANALYZE, DDL, roles, databases) use
#: ``pg_server.url``.
APP_ROLE = "asyncrecall_app"


@pytest.fixture(scope="session")
def app_url(postgres_server: LocalPostgres) -> str:
    import psycopg
    from psycopg import sql

    from asyncrecall.memory import PostgresStore
    from asyncrecall.memory.postgres._schema import GRANTS

    if not postgres_server.running:
        postgres_server.start()
    PostgresStore.migrate(postgres_server.url)
    with psycopg.connect(postgres_server.url, autocommit=True) as owner:
        owner.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")  # PostgreSQL 15's default
        owner.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(APP_ROLE)))
        for grant in GRANTS:
            owner.execute(grant.format(role=APP_ROLE))  # type: ignore[arg-type]
        may_create = owner.execute(
            "SELECT has_schema_privilege(%s, 'public', 'CREATE'),"
            " has_database_privilege(%s, current_database(), 'CREATE')",
            (APP_ROLE, APP_ROLE),
        ).fetchone()
    assert may_create == (False, False)  # the whole store suite runs without CREATE
    return postgres_server.url.replace("user=postgres", f"user={APP_ROLE}")


@pytest.fixture
def pg_url(pg_server: LocalPostgres, app_url: str) -> str:
    """The database as the application role (see :data:`APP_ROLE`)."""
    return app_url


@pytest.fixture
def namespace() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def open_pg(pg_url: str) -> Iterator[Any]:
    """``open_pg(namespace=..., **options)``: a connected store, closed after the test."""
    from asyncrecall.memory.postgres._store import PostgresStore

    stores: list[PostgresStore] = []

    def open_store(namespace: str, **options: Any) -> PostgresStore:
        options.setdefault("timeout", 2.0)
        store = PostgresStore.open(pg_url, namespace=namespace, **options)
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        store.close()


@pytest.fixture
def pg_store(open_pg: Any, namespace: str) -> PostgresStore:
    store: PostgresStore = open_pg(namespace)
    return store


def analyze(url: str) -> None:
    """``ANALYZE`` the memories table as its owner (the application role may not)."""
    import psycopg

    owner = url.replace(f"user={APP_ROLE}", "user=postgres")
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute("ANALYZE asyncrecall_memories")

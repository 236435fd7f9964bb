"""The two stores the conformance cases run on: a folder in a temporary directory and a
fresh namespace of the session's throw-away PostgreSQL cluster (``tests/postgres``'s
fixtures: without PostgreSQL the ``postgres`` cases skip, or fail under
``ASYNCRECALL_REQUIRE_POSTGRES=1``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore, Store
from postgres.conftest import (  # noqa: F401
    app_url,
    namespace,
    open_pg,
    pg_server,
    pg_url,
    postgres_server,
)


@pytest.fixture(params=["folder", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _open(kind: str, request: pytest.FixtureRequest, place: str) -> Store:
    if kind == "folder":
        tmp_path: Path = request.getfixturevalue("tmp_path")
        return FolderStore(tmp_path / place)
    open_store: Any = request.getfixturevalue("open_pg")
    prefix: str = request.getfixturevalue("namespace")
    store: Store = open_store(f"{prefix}-{place}")
    return store


@pytest.fixture
def store(kind: str, request: pytest.FixtureRequest) -> Store:
    """An empty store."""
    return _open(kind, request, "memory")


@pytest.fixture
def other(kind: str, request: pytest.FixtureRequest) -> Store:
    """A second empty store of the same kind (another folder, another namespace)."""
    return _open(kind, request, "other")

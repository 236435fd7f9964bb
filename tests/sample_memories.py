"""The three memories the agent, prefetch and integration tests share, and a folder of them.

Imported by those areas' conftests (``tests/`` is on the path: pytest puts the folder of
the root ``conftest.py`` there).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncrecall.memory import FolderStore

MEMORIES = (
    (
        "db-testing",
        "feedback",
        "integration tests must hit a real database, never mocks",
        "We were burned when mocked tests passed and the prod migration failed.",
    ),
    (
        "deploy-flow",
        "project",
        "deploys go through the staging cluster first",
        "Run `make deploy-staging`, wait for the smoke tests, then promote.",
    ),
    (
        "user-role",
        "user",
        "the user is a data scientist, new to the frontend code",
        "Explain frontend concepts by analogy with pandas and notebooks.",
    ),
)


def seeded_store(root: Path) -> FolderStore:
    """A memory folder at ``root`` holding :data:`MEMORIES`."""
    store = FolderStore(root)
    store.ensure()
    for name, kind, description, body in MEMORIES:
        store.save_memory(name, description, kind, body, origin="user")
    return store


@pytest.fixture
def store(tmp_path: Path) -> FolderStore:
    """A fixture: :func:`seeded_store` in the test's own folder (conftests import it)."""
    return seeded_store(tmp_path / "memory")


@pytest.fixture
def paths(store: FolderStore) -> dict[str, str]:
    """A fixture: the relative path of each saved memory, by name."""
    return {doc.name: doc.rel_path for doc in store.scan()}

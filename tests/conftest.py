"""Suite-wide fixtures: a clean environment and a shared local OpenAI-compatible server.

Keep this file small and generic; fixtures for one area live in that area's conftest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncrecall.testing import LocalServer

# The seeded memory folder's fixtures (``store``, ``paths``), shared by the agent, prefetch
# and adapter tests; a folder's own conftest may define its own ``store`` instead.
pytest_plugins = ["sample_memories"]

# Variables that could point a test at a real endpoint, a real key or the user's home.
_SCRUBBED = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ASYNCRECALL_API_KEY",
    "ASYNCRECALL_BASE_URL",
    "ASYNCRECALL_MODEL",
    "ASYNCRECALL_SIDE_MODEL",
    "ASYNCRECALL_DEBUG",
    "ASYNCRECALL_STORE",
    "ASYNCRECALL_NAMESPACE",
)


@pytest.fixture(autouse=True)
def _isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No test can reach a real API or the real ``~/.asyncrecall`` by accident."""
    for name in _SCRUBBED:
        monkeypatch.delenv(name, raising=False)
    home: Path = tmp_path_factory.mktemp("asyncrecall-home")
    monkeypatch.setenv("ASYNCRECALL_HOME", str(home))


@pytest.fixture(scope="session")
def _local_server_session() -> Iterator[LocalServer]:
    with LocalServer() as server:
        yield server


@pytest.fixture
def local_server(_local_server_session: LocalServer) -> LocalServer:
    """The suite's :class:`LocalServer`, with scripts and records cleared for this test, and
    what OpenAI models learned about its endpoints forgotten (it is one server for all)."""
    from asyncrecall.models._openai import forget_endpoints

    forget_endpoints()
    _local_server_session.reset()
    return _local_server_session

"""The interop suite: a real ``llama_cpp.server`` serving the embedded SmolLM2 GGUF.

One server for the whole session (started once, a few seconds), with a small context
so a prompt over it is easy, behind a :class:`RecordingProxy` that shows what went on
the wire. Every test here is marked ``interop`` (``make test-interop`` runs them
alone). Needs the ``local`` and ``interop`` extras; without them the suite is skipped
with the reason, or fails with ``ASYNCRECALL_REQUIRE_INTEROP=1`` (``make test``'s main
run sets it: there the extras are installed, and these tests must run; its Python 3.13
run has no ``local`` extra and skips them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .server import REQUIRE_ENV, LlamaServer, missing_packages, running_llama_server


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.interop)
            # One worker runs them all (``--dist loadgroup``): one server to start, not
            # one a worker, and no two of them sharing the cores with the rest.
            item.add_marker(pytest.mark.xdist_group("interop"))


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    if missing := missing_packages():
        message = f"needs the local and interop extras (missing {missing})"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{message} ({REQUIRE_ENV}=1 makes this an error)")
        pytest.skip(message)
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with running_llama_server(log) as server:
        yield server


@pytest.fixture
def server(llama_server: LlamaServer) -> LlamaServer:
    """The session's server with the proxy's records cleared and what models learned
    about endpoints forgotten (each test starts as a fresh process would)."""
    from asyncrecall.models._openai import forget_endpoints
    from asyncrecall.models._traffic import forget_traffic

    forget_endpoints()
    forget_traffic(llama_server.base_url)
    llama_server.proxy.clear()
    return llama_server

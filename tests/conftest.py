"""Suite-wide fixtures: a clean environment and a shared local OpenAI-compatible server.

Keep this file small and generic; fixtures for one area live in that area's conftest.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import time
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


def _default_signal_actions() -> None:
    """The CLI processes the tests start get the default actions of the signals they
    test, even when the suite itself was started with them ignored (``nohup``, a
    background job of a non-interactive shell): an ignored signal stays ignored across
    exec, the CLI keeps an ignored SIGHUP ignored (as ``nohup`` asks), and Python sets
    up no KeyboardInterrupt for an ignored SIGINT, so those tests would fail for how the
    suite was started, not for the code."""
    for name in ("SIGHUP", "SIGINT", "SIGTERM"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) == signal.SIG_IGN:
            default = signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL
            signal.signal(signum, default)


_default_signal_actions()


_UNGROUPED = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``xdist_group`` share one worker under ``--dist loadgroup`` (one
    llama.cpp server, one built wheel, one cluster for the group): pytest-xdist's worker
    adds the group to each such test's node id, and the scheduler groups by it. A
    pytest release that ignores that change spreads the groups over every worker
    without a word, so such a test fails, saying why (see :func:`_grouped_as_marked`)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
            item.stash[_UNGROUPED] = (
                f"--dist loadgroup did not group this test marked xdist_group: this "
                f"pytest-xdist does not work with pytest {pytest.__version__}"
            )


@pytest.fixture(autouse=True)
def _grouped_as_marked(request: pytest.FixtureRequest) -> None:
    """A test marked ``xdist_group`` that the workers did not group fails before it runs."""
    if message := request.node.stash.get(_UNGROUPED, None):
        pytest.fail(message)


@pytest.fixture(autouse=True, scope="module")
def _leaks_fail_in_their_module() -> Iterator[None]:
    """Something a test leaves open (a socket, a transport, a file, an event loop) warns
    when the garbage collector frees it, and ``filterwarnings = error`` fails whichever
    test runs at that moment, often in another folder. Collecting at the end of every
    module fails the module's last test instead, naming the module that leaked;
    ``PYTHONTRACEMALLOC=20`` adds where the object was made."""
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def _isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No test can reach a real API or the real ``~/.asyncrecall`` by accident."""
    for name in _SCRUBBED:
        monkeypatch.delenv(name, raising=False)
    home: Path = tmp_path_factory.mktemp("asyncrecall-home")
    monkeypatch.setenv("ASYNCRECALL_HOME", str(home))


@pytest.fixture(autouse=True)
def _no_worker_mode_left_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that runs the hand-off worker's code in this process switches the process
    to the worker's cross-process traffic (``enable_cross_process``): put it back after
    the test, or every later session's own extraction would keep out of the way of its
    main requests as only a worker's does."""
    from asyncrecall.models import _traffic

    monkeypatch.setitem(_traffic._CROSS, "on", _traffic._CROSS["on"])


#: How long a test's hand-off workers may go on after it (then they are killed).
WORKER_GUARD_S = 30.0


def handoff_workers(marker: str) -> list[int]:
    """Pids of extraction hand-off workers (``asyncrecall.cli._handoff_worker``) whose
    command line contains ``marker`` (a folder of the test's)."""
    return processes("asyncrecall.cli._handoff_worker", marker)


def processes(program: str, marker: str) -> list[int]:
    """Pids of processes whose command line contains both ``program`` and ``marker``."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if program in cmdline and marker in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def _no_stray_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No hand-off worker a test's CLI started outlives the test: it would answer to
    the next test's scripts on the shared server. They are waited for, then killed."""
    yield
    marker = str(tmp_path_factory.getbasetemp())
    deadline = time.monotonic() + WORKER_GUARD_S
    while (pids := handoff_workers(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def _local_server_session() -> Iterator[LocalServer]:
    with LocalServer() as server:
        yield server


@pytest.fixture
def local_server(_local_server_session: LocalServer) -> LocalServer:
    """The suite's :class:`LocalServer`, with scripts and records cleared for this test, and
    what OpenAI models learned about its endpoints forgotten (it is one server for all)."""
    from asyncrecall.models._openai import forget_endpoints
    from asyncrecall.models._traffic import forget_traffic

    forget_endpoints()
    forget_traffic(_local_server_session.base_url)
    _local_server_session.reset()
    return _local_server_session

"""Windows, simulated: the real CLI and the README's library example run on an
interpreter without the POSIX-only APIs (``tests/simwin/sitecustomize.py``: no
``fcntl``, ``os.getuid``, ``os.O_NONBLOCK``, ``os.fork``, ``signal.SIGHUP``, signal
handlers on the loop ..., and ``msvcrt.locking`` with Windows' semantics), since no
Windows machine runs these tests. Each test runs its subprocesses under it (the last
ones a whole test file of the cross-process guarantees), and the first checks that the
simulation really takes those APIs away."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore
from asyncrecall.memory.extraction._extract import SCHEMA_NAME
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from conftest import handoff_workers
from test_readme import _block

TESTS = Path(__file__).resolve().parent
SIMWIN = TESTS / "simwin"
HANG_GUARD = 120.0  # below the suite's per-test timeout

# The simulation's msvcrt is built on Linux's open-file-description locks.
if not (sys.platform == "linux" and platform.machine() in {"x86_64", "aarch64"}):
    if os.environ.get("CI") == "true":
        raise RuntimeError("the simulated-Windows tests need Linux on x86_64 or aarch64")
    pytest.skip(
        "the simulated-Windows tests need Linux on x86_64 or aarch64", allow_module_level=True
    )


def simulated_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment (no OPENAI_*/ASYNCRECALL_*, a home of the test's) whose
    interpreters are simulated Windows ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SIMWIN), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    return env


def python(tmp_path: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True, text=True, env=simulated_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip


def cli(
    tmp_path: Path, *args: str, server: LocalServer | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m asyncrecall ARGS`` on simulated Windows, the test's memory folder."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    endpoint = (
        ["--base-url", server.base_url, "--api-key", "t", "--model", "main", "--side-model", "side"]
        if server is not None
        else []
    )
    return subprocess.run(
        [sys.executable, "-m", "asyncrecall", *args, *endpoint,
         "--project", str(project), "--memory-dir", str(tmp_path / "memory")],
        input="", capture_output=True, text=True, env=simulated_env(tmp_path), cwd=project,
        timeout=HANG_GUARD,
    )  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> FolderStore:
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    store.save_memory(
        "deploy-flow", "deploys go through staging first", "project", "Use blue.", origin="user"
    )
    return store


def test_the_simulation_takes_away_what_windows_lacks(tmp_path: Path) -> None:
    """Under the simulation the POSIX-only APIs are gone (a module that reaches for one
    at import fails, as ``asyncrecall.memory`` did), the loop refuses signal handlers,
    and the only file lock is ``msvcrt.locking``."""
    done = python(
        tmp_path,
        """
        import asyncio, importlib, os, signal
        gone = [n for n in ("O_NONBLOCK", "O_CLOEXEC", "getuid", "geteuid", "fork", "setsid",
                            "register_at_fork") if hasattr(os, n)]
        gone += [n for n in ("SIGHUP",) if hasattr(signal, n)]
        for module in ("fcntl", "termios", "resource", "pwd"):
            try:
                importlib.import_module(module)
                gone.append(module)
            except ImportError:
                pass
        async def main():
            try:
                asyncio.get_running_loop().add_signal_handler(signal.SIGINT, print)
                return "added"
            except NotImplementedError:
                return "refused"
        import msvcrt
        print(gone, asyncio.run(main()), callable(msvcrt.locking))
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[] refused True\n"


def test_msvcrt_locks_are_exclusive_per_open_file_and_die_with_their_holder(
    tmp_path: Path,
) -> None:
    """The platform locks on the ``msvcrt`` path: an exclusive lock excludes every other
    open file (of another process, or of this one), shared ones coexist and exclude an
    exclusive one, an unlock lets the next one in, and a holder killed with SIGKILL
    leaves the lock free."""
    path = tmp_path / "x.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(
            """
            import os, sys
            from asyncrecall import _platform
            assert not _platform.LOCK_INHERITED
            fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
            assert _platform.lock(fd, block=False)
            print("locked", flush=True)
            sys.stdin.read()
            """), str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=simulated_env(tmp_path),
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        probe = """
            import os, sys
            from asyncrecall import _platform
            def opened():
                return os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
            a, b, c = opened(), opened(), opened()
            print(_platform.lock(a, block=False), _platform.lock(b, shared=True, block=False))
            """
        assert python(tmp_path, probe, str(path)).stdout == "False False\n"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=HANG_GUARD)
    finally:
        holder.kill()
        holder.communicate()
    done = python(
        tmp_path,
        probe
        + """
            print(_platform.lock(c, block=False))
            _platform.unlock(a)
            shares = _platform.lock(b, shared=True, block=False), _platform.lock(c, shared=True)
            print(*shares)
            print(_platform.lock(a, block=False))
            _platform.unlock(b)
            print(_platform.lock(a, block=False))
            _platform.unlock(c)
            print(_platform.lock(a, block=False))
            """,
        str(path),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "True False",  # the dead holder's lock is gone; a's excludes b, in the same process
        "False",  # and c
        "True True",  # a let go: shares coexist
        "False",  # and exclude an exclusive lock
        "False",  # all of them
        "True",  # the last one let go
    ]


def test_memory_list_and_recall(tmp_path: Path, store: FolderStore) -> None:
    """``memory list`` and ``memory recall`` (lexical, no endpoint) work on Windows: the
    folder is read without a folder watch."""
    listed = cli(tmp_path, "memory", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [d["rel_path"] for d in json.loads(listed.stdout)] == ["deploy-flow.md"]

    recalled = cli(tmp_path, "memory", "recall", "how do deploys go", "--json")
    assert recalled.returncode == 0, recalled.stderr
    assert [d["rel_path"] for d in json.loads(recalled.stdout)["selected"]] == ["deploy-flow.md"]


def test_run_sends_the_memory_in_its_first_request(
    tmp_path: Path, store: FolderStore, local_server: LocalServer
) -> None:
    """``run`` against an OpenAI-compatible endpoint works on Windows, its instant
    recall puts the memory into the very first main request, and it answers."""
    local_server.script("main", "Through staging.")
    local_server.set_default("side", lambda _r: Reply(json={"selected_memories": []}))

    done = cli(tmp_path, "run", "how do deploys go?", "--no-extract", server=local_server)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Through staging.\n"
    [first, *_] = [r for r in local_server.requests if r.model == "main"]
    assert "Use blue." in json.dumps(first.messages)


def is_extraction(record: RecordedRequest) -> bool:
    fmt = record.body.get("response_format")
    return isinstance(fmt, dict) and (
        fmt.get("json_schema", {}).get("name") == SCHEMA_NAME
        or "memories" in str(record.messages[0].get("content", ""))
    )


def side_model(extraction: Reply) -> Callable[[RecordedRequest], Reply]:
    """The side model: ``extraction`` for extraction queries, nothing for recall."""
    return lambda r: extraction if is_extraction(r) else Reply(json={"selected_memories": []})


def wait_until(check: Callable[[], bool], memory_dir: Path) -> None:
    deadline = time.monotonic() + HANG_GUARD  # a hang guard
    while not check():
        if time.monotonic() > deadline:
            log = memory_dir.parent / "memory.state" / "handoff" / "worker.log"
            raise TimeoutError(log.read_text() if log.is_file() else "no worker log")
        time.sleep(0.02)


def test_run_hands_on_an_extraction_that_takes_3_s_and_the_fact_is_saved(
    tmp_path: Path, store: FolderStore, local_server: LocalServer
) -> None:
    """On Windows ``run`` does not drop what it learned: it exits with its answer while
    its extraction is unanswered, and the extraction, answered 3 s after it is asked
    (more than the 2 s an exit would ever wait), is saved after ``run`` is gone (the
    hand-off worker takes the session's lock itself: a lock is not inherited there)."""
    fact: dict[str, Any] = {
        "action": "create", "path": "", "name": "Release day", "description": "when we release",
        "type": "project", "content": "We release on tuesdays.", "source_offsets": [0],
    }  # fmt: skip
    local_server.set_default(
        "side", side_model(Reply(json={"memories": [fact]}, first_token_delay=3.0))
    )
    local_server.script("main", "noted")

    done = cli(tmp_path, "run", "we release on tuesdays", server=local_server)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "noted\n"
    answered = [r for r in local_server.requests if is_extraction(r) and r.finished_at is not None]
    assert answered == []  # run did not wait for it
    saved = store.root / "release-day.md"
    wait_until(saved.is_file, store.root)
    assert "We release on tuesdays." in saved.read_text(encoding="utf-8")
    wait_until(lambda: not handoff_workers(str(store.root)), store.root)


def test_the_readme_library_example(tmp_path: Path) -> None:
    """The README's library example (an agent client with a folder store) prints on
    Windows what the README says it prints."""
    script = tmp_path / "example.py"
    script.write_text(_block("example: readme-library"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True,
        env=simulated_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == _block("output: readme-library")


@pytest.mark.timeout(300)  # a whole test file runs inside: a hang guard for all of it
@pytest.mark.parametrize(
    ("tests", "only"),
    [
        ("models/test_single_slot.py", None),
        # The hand-off's lock cases; its retry policy is the same on every platform.
        ("extract/test_handoff.py", "not failing_extraction"),
    ],
)
def test_the_cross_process_tests_pass(tmp_path: Path, tests: str, only: str | None) -> None:
    """What processes of ours agree on through file locks holds with ``msvcrt`` locks as
    with ``flock``, each test file run whole under the simulation: a main turn wins over
    the background queries of other processes (the endpoint's marker files, a shared
    lock per holder: ``test_single_slot.py``); exit hands extraction on, and a worker
    killed with SIGKILL leaves its hand-off to the next session (``test_handoff.py``)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         # platformdirs' own pytest plugin (a docs dependency) reads os.getuid at import,
         # a POSIX call the simulated interpreter does not have: not ours to test
         "-p", "no:platformdirs",
         "--basetemp", str(tmp_path / "inner"), *(["-k", only] if only else []),
         str(TESTS / tests)],
        capture_output=True, text=True, env=simulated_env(tmp_path), cwd=TESTS.parent,
        timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout

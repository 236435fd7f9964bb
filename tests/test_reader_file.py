"""``run QUESTION``'s reader file (``asyncrecall-primed-*.json`` in the temporary folder,
holding recalled memory text): private, never written through a path someone else can
plant a link at, and never left behind: not after a mistyped flag, not after SIGTERM,
and one a ``kill -9`` left is swept by the next run (the real CLI in subprocesses)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from asyncrecall.cli import _reader
from asyncrecall.cli._common import settings_from_args
from asyncrecall.cli._main import _build_parser
from asyncrecall.cli._memory_config import prime_child
from asyncrecall.memory import FolderStore
from asyncrecall.testing import LocalServer, Reply
from conftest import processes

HANG_GUARD = 60.0
QUESTION = "why does CI hang on real sockets?"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    store = FolderStore(tmp_path / "memory")
    store.save_memory(
        "ci hang", "CI hangs on real sockets", "project", "Use fake_bank.", origin="user"
    )
    return store.root


@pytest.fixture
def tmpdir_(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder of this test's processes (and of this one)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    _reader._started.clear()
    return folder


def readers(tmpdir_: Path) -> list[str]:
    return sorted(p.name for p in tmpdir_.iterdir() if p.name.startswith("asyncrecall-primed-"))


def reader_processes(marker: str) -> list[int]:
    """Pids of reader processes (``prime_child``) whose command line names ``marker``."""
    return processes("prime_child", marker)


def until(condition: object, what: str) -> None:
    """Poll ``condition`` (a callable) until true; a hang guard, not a delay."""
    deadline = time.monotonic() + HANG_GUARD
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.01)


def cli(tmp_path: Path, folder: Path, *args: str, server: LocalServer | None = None) -> list[str]:
    endpoint = ["--base-url", server.base_url, "--model", "main"] if server else []
    return [
        sys.executable, "-m", "asyncrecall", "run", QUESTION, *endpoint, "--api-key", "t",
        "--memory-dir", str(folder), "--project", str(tmp_path), "--no-extract", *args,
    ]  # fmt: skip


def env(tmp_path: Path, tmpdir_: Path) -> dict[str, str]:
    found = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    return found | {"ASYNCRECALL_HOME": str(tmp_path / "home"), "TMPDIR": str(tmpdir_)}


def test_no_reader_file_is_left_after_a_mistyped_flag(
    tmp_path: Path, folder: Path, tmpdir_: Path
) -> None:
    """An argparse error (exit 2) ends the command before any reader process or
    reader file is made (the command line is read before the read-ahead starts), and
    none is left (3 of 3)."""
    for _ in range(3):
        done = subprocess.run(
            cli(tmp_path, folder, "--no-such-flag"),
            capture_output=True, text=True, env=env(tmp_path, tmpdir_), timeout=HANG_GUARD,
        )  # fmt: skip
        assert done.returncode == 2 and "--no-such-flag" in done.stderr
        until(lambda: not reader_processes(str(tmpdir_)), "the reader process did not end")
        assert readers(tmpdir_) == []


def test_no_reader_file_is_left_after_sigterm(
    tmp_path: Path, folder: Path, tmpdir_: Path, local_server: LocalServer
) -> None:
    """``SIGTERM`` while the reader file exists (the command still importing, or waiting
    for its answer) removes it, and the reader cannot bring it back."""
    local_server.script("main", Reply(text="never", hang=True))
    process = subprocess.Popen(
        cli(tmp_path, folder, server=local_server),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(tmp_path, tmpdir_),
    )  # fmt: skip
    try:
        until(lambda: readers(tmpdir_), "no reader file appeared")
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=HANG_GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode in (-signal.SIGTERM, 128 + signal.SIGTERM)
    until(lambda: not reader_processes(str(tmpdir_)), "the reader process did not end")
    assert readers(tmpdir_) == []


def test_a_reader_file_a_killed_command_left_is_swept_by_the_next_run(
    tmp_path: Path, folder: Path, tmpdir_: Path, local_server: LocalServer
) -> None:
    """A reader file whose command was killed (``kill -9``: nothing of it could run) is
    removed by the next run's reader; a live command's is kept."""
    killed = subprocess.Popen(
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    )
    assert killed.wait(HANG_GUARD) == -signal.SIGKILL
    dead = tmpdir_ / f"asyncrecall-primed-{killed.pid}-k1ll3d.json"
    dead.write_text('{"2": "recalled memory text"}')
    dead.chmod(0o600)
    live = tmpdir_ / f"asyncrecall-primed-{os.getpid()}-l1v3.json"
    live.touch()
    local_server.set_default("main", "ok")  # the answer, and any side query: no pick
    done = subprocess.run(
        cli(tmp_path, folder, server=local_server),
        capture_output=True, text=True, env=env(tmp_path, tmpdir_), timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    until(lambda: not reader_processes(str(tmpdir_)), "the reader process did not end")
    assert readers(tmpdir_) == [live.name]


def test_the_reader_file_is_private(tmp_path: Path, folder: Path, tmpdir_: Path) -> None:
    """The reader file is made exclusively with mode 0600 and keeps it once the reader
    has written the recalled memory into it."""
    argv = ["run", QUESTION, "--memory-dir", str(folder), "--project", str(tmp_path)]
    args = _build_parser("run").parse_args(argv)
    settings = settings_from_args(args)
    warmup = _reader.start_reading_memory(settings, QUESTION)
    assert warmup is not None and warmup.primed is not None
    try:
        [name] = readers(tmpdir_)
        assert stat.S_IMODE((tmpdir_ / name).stat().st_mode) == 0o600
        assert warmup.primed._child.wait(HANG_GUARD) == 0
        written = tmpdir_ / name
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        assert "CI hangs on real sockets" in written.read_text()
        taken = warmup.primed.take(settings.instant_files)
        assert taken is not None and "CI hangs on real sockets" in taken.prompt
    finally:
        _reader.discard_reader_files()
    assert readers(tmpdir_) == []


def test_the_reader_follows_no_link_planted_where_it_writes(tmp_path: Path, folder: Path) -> None:
    """A link planted at the result's path, or at any name derived from it, is not
    written through: the file it points at is untouched."""
    flags = json.dumps({"memory_dir": str(folder), "project": str(tmp_path)})
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out.json"
    out.touch()
    for derived in (".part", ".tmp", ".new"):
        (tmp_path / f"out.json{derived}").symlink_to(victim)
    assert prime_child([str(out), QUESTION, flags]) == 0
    assert "CI hangs on real sockets" in out.read_text()
    assert victim.read_text() == "precious\n"
    linked = tmp_path / "linked.json"
    linked.symlink_to(victim)
    assert prime_child([str(linked), QUESTION, flags]) != 0
    assert victim.read_text() == "precious\n" and linked.is_symlink()


_SIGNALLED_WHILE_STARTING = """
import os, signal, sys
from pathlib import Path
from asyncrecall.cli import _reader
from asyncrecall.cli._signals import die_cleanly

die_cleanly()
started = _reader.subprocess.Popen

def signalled(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)  # the file exists; the reader is not started yet
    return started(*args, **kwargs)

_reader.subprocess.Popen = signalled
_reader._prime(Path(sys.argv[1]), "why does CI hang?", {"memory_dir": sys.argv[1]})
"""


@pytest.mark.skipif(os.name != "posix", reason="a POSIX signal's handler and exit status")
def test_no_reader_file_is_left_by_a_signal_while_the_reader_starts(
    tmp_path: Path, folder: Path, tmpdir_: Path
) -> None:
    """A terminating signal between the reader file's making and its reader's start
    (the window the real CLI's test hits under load) removes the file too."""
    done = subprocess.run(
        [sys.executable, "-c", _SIGNALLED_WHILE_STARTING, str(folder)],
        capture_output=True, text=True, env=env(tmp_path, tmpdir_), timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert readers(tmpdir_) == []

"""``asyncrecall console`` run for real: the CLI in a subprocess over a temp memory folder.

The folder is made through the CLI as a user makes it: memories the user added, and an
import without ``--trusted`` that holds one new memory and leaves a change waiting beside
one the user kept. :class:`ConsoleProcess` starts the console on a free port and reads
the URL (with its token) it prints; its stderr is collected, and a traceback in it
fails the module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from asyncrecall.memory import FolderStore

#: A hang guard: the console starts in about a second, far longer on busy cores.
HANG_GUARD = 90.0


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(home)
    return env


class Folder:
    """A memory folder and the CLI over it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.memory = root / "memory"
        self.home = root / "home"
        self.project = root / "project"
        self.project.mkdir(parents=True)
        self.env = clean_env(self.home)

    def cli(self, *args: str, input: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asyncrecall", *args, "--memory-dir", str(self.memory)],
            input=input, capture_output=True, text=True, env=self.env, cwd=self.project,
            timeout=HANG_GUARD,
        )  # fmt: skip

    def json(self, *args: str) -> Any:
        done = self.cli(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def listed(self) -> dict[str, dict[str, Any]]:
        """``memory list --json``, by name."""
        return {m["name"]: m for m in self.json("memory", "list")}

    def add(self, name: str, kind: str, content: str) -> None:
        done = self.cli("memory", "add", "--name", name, "--type", kind, "--content", content)
        assert done.returncode == 0, done.stderr


def held_folder(root: Path) -> Folder:
    """A folder with the user's memories, one held memory (``Coffee``, imported without
    ``--trusted``) and a change waiting beside a memory the user kept (``Deploy target``)."""
    folder = Folder(root)
    folder.add("Deploy target", "project", "We deploy to fly.io from the main branch.")
    folder.add("Editor", "user", "The user edits in vim.")
    folder.add("Editor", "user", "The user edits in helix now.")
    # Someone else's folder (written directly: it is only the import's source).
    other = FolderStore(root / "other")
    other.save_memory("Coffee", "", "user", "The user drinks oat-milk flat whites.", origin="user")
    other.save_memory("Deploy target", "", "project", "We deploy to Heroku.", origin="user")
    done = folder.cli("memory", "import", "--from", str(other.root))
    assert done.returncode == 0, done.stderr
    listed = folder.listed()
    assert listed["Coffee"]["quarantined"] and listed["Deploy target"]["pending"]
    return folder


class ConsoleProcess:
    """``asyncrecall console --port 0 --no-browser`` over ``folder``, until :meth:`stop`."""

    def __init__(
        self, folder: Folder, *args: str, event_log: Path | None = None, figures: Path | None = None
    ) -> None:
        self.folder = folder
        self.event_log = event_log
        self.figures = figures
        if event_log is not None:
            args = (*args, "--event-log", str(event_log))
        if figures is not None:
            args = (*args, "--figures", str(figures))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "asyncrecall", "console", "--port", "0", "--no-browser",
             "--memory-dir", str(folder.memory), *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env=folder.env, cwd=folder.project,
        )  # fmt: skip
        assert self.process.stderr is not None
        first = self.process.stderr.readline()  # the URL line (pytest-timeout guards it)
        self.lines = [first]
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        assert "http://" in first, f"no URL: {first!r} (exit {self.process.poll()})"
        self.url = first[first.index("http://") :].split()[0]
        parts = urlsplit(self.url)
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.token = parse_qs(parts.query)["token"][0]

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=HANG_GUARD)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._reader.join(HANG_GUARD)
            assert self.process.stderr is not None
            self.process.stderr.close()


@pytest.fixture(scope="module")
def console_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console")


@pytest.fixture(scope="module")
def folder(console_root: Path) -> Folder:
    return held_folder(console_root)


@pytest.fixture(scope="module")
def console(folder: Folder, console_root: Path) -> Iterator[ConsoleProcess]:
    figures = console_root / "figures"
    figures.mkdir()
    log = console_root / "events.jsonl"
    running = ConsoleProcess(folder, event_log=log, figures=figures)
    try:
        yield running
    finally:
        running.stop()
    assert "Traceback" not in running.stderr, running.stderr

"""Every command the docs show is run here, with the real CLI, or says why it is not.

A fenced shell block of README.md, CHANGELOG.md or docs/**/*.md (``sh``, ``bash``,
``shell``, ``console``, or a block with no language whose first line is a command) runs
as a script in a scratch project with a scratch ``ASYNCRECALL_HOME`` and no endpoint,
and must exit 0; a block that cannot run here (it needs an endpoint, a database, the
network, or it installs something) carries ``<!-- not run: REASON -->`` on the line
just before it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]

SHELLS = {"sh", "bash", "shell", "console"}
# A block with no language is a command block when its first word is one of these.
COMMANDS = {"asyncrecall", "python", "python3", "pip", "make", "uv", "pipx", "export"}
# What an unmarked block may run: the real CLI, offline, in a scratch home.
RUNNABLE = {"--help", "--version", "memory", "demo", "trust"}

_FENCE = re.compile(r"^```([A-Za-z]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
_NOT_RUN = re.compile(r"<!-- not run: (\S[^>]*?) -->\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    text: str
    not_run: str | None

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _is_command(lang: str, body: str) -> bool:
    if lang in SHELLS:
        return True
    if lang:
        return False
    words = body.split()
    first = words[0] if words else ""
    return first in COMMANDS or bool(re.match(r"[A-Z_]+=", first))


def command_blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for fence in _FENCE.finditer(text):
            lang, body = fence.group(1), fence.group(2)
            if not _is_command(lang, body):
                continue
            before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = _NOT_RUN.search(before)
            line = text.count("\n", 0, fence.start()) + 1
            found.append(Block(page, line, body, marker.group(1) if marker else None))
    return found


BLOCKS = command_blocks()
RUN = [b for b in BLOCKS if b.not_run is None]


def _commands(block: Block) -> list[list[str]]:
    """Each command line of the block, split as the shell splits it."""
    joined = block.text.replace("\\\n", " ")
    lines = [line.split(" #", 1)[0].strip() for line in joined.splitlines()]
    return [shlex.split(line, comments=True) for line in lines if line and line[0] != "#"]


def test_the_docs_have_command_blocks_both_run_and_not() -> None:
    """The collector finds the README's blocks, those it runs and those marked."""
    readme = [b for b in BLOCKS if b.page.name == "README.md"]
    assert any(b.not_run is None for b in readme)
    assert any(b.not_run for b in readme)


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_every_command_block_runs_or_says_why_not(block: Block) -> None:
    """A block with no ``not run`` marker holds only commands this test runs: the real
    ``asyncrecall`` CLI, offline."""
    if block.not_run is not None:
        return
    for argv in _commands(block):
        assert argv[0] == "asyncrecall" and argv[1] in RUNNABLE, (
            f"{block}: {shlex.join(argv)!r} cannot run here: run it in this test, or put "
            "<!-- not run: REASON --> just before the block"
        )


def _env(tmp_path: Path) -> dict[str, str]:
    """No endpoint, no key, a scratch home; ``asyncrecall`` is this interpreter's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "asyncrecall"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m asyncrecall "$@"\n')
    shim.chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


@pytest.mark.skipif(sys.platform == "win32", reason="the blocks are POSIX shell")
@pytest.mark.timeout(600)  # the demo runs three sessions; a hang guard on a busy machine
@pytest.mark.parametrize("block", RUN, ids=str)
def test_the_command_block_runs(tmp_path: Path, block: Block) -> None:
    """The block, run as a script by the shell in a scratch project, exits 0."""
    project = tmp_path / "project"
    project.mkdir()
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=project, env=_env(tmp_path), capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, f"{block} exited {done.returncode}:\n{done.stderr}"


def test_no_page_installs_from_an_index() -> None:
    """asyncrecall is on no package index: every install names a path (``./asyncrecall``
    or a built wheel), never ``asyncrecall[...]`` from an index."""
    bad = re.compile(r"(pip|pipx|uv tool|uv pip) install +'?asyncrecall\b")
    found = [
        f"{page.relative_to(ROOT)}: {m.group(0)}"
        for page in PAGES
        for m in bad.finditer(page.read_text(encoding="utf-8"))
    ]
    assert found == []

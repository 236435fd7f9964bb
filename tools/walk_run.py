"""The walk of one ``asyncrecall run`` to its first request: which of the package's
source files it enters before the model sees that request.

Starts :class:`asyncrecall.testing.LocalServer` (a scripted reply), a throw-away
project with a few notes in its memory folder, and ``asyncrecall run QUESTION`` as a
new process whose every thread has a ``sys.setprofile`` hook: each ``asyncrecall``
source file entered for the first time is written down with the time it was entered.
The files entered before the server received the first main request are counted and
listed (the monotonic clock is the machine's, shared by both processes). Files of
child processes (the folder's reader) are not counted: they run beside the command.

    PYTHONPATH=src python tools/walk_run.py [--json]

Point ``PYTHONPATH`` at another tree's ``src`` to walk that tree's ``run``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from asyncrecall.testing import LocalServer, Reply

_CHILD = r"""
import importlib.util, os, sys, threading, time

root = importlib.util.find_spec("asyncrecall").submodule_search_locations[0] + os.sep
seen = set()
out = open(sys.argv[1], "a", buffering=1)

def hook(frame, event, arg):
    if event != "call":
        return
    name = frame.f_code.co_filename
    if name in seen:
        return
    seen.add(name)
    if name.startswith(root):
        out.write(f"{time.monotonic()!r}\t{name[len(root):]}\n")

threading.setprofile(hook)
sys.setprofile(hook)
from asyncrecall.cli import main
sys.exit(main(sys.argv[2:]))
"""

_NOTES = {
    "ci-hang.md": (
        "CI hangs on real sockets",
        "The CI job hangs when a test opens a real socket: the runner blocks outbound "
        "traffic, so connect() waits for its full timeout. Use the local server.",
    ),
    "deploys.md": ("How deploys work", "Deploys go through the staging cluster first."),
    "editor.md": ("Editor", "The user edits with neovim."),
}


def _folder(root: Path) -> Path:
    folder = root / "memory"
    folder.mkdir()
    index = []
    for name, (title, body) in _NOTES.items():
        stem = name.removesuffix(".md")
        (folder / name).write_text(
            f"---\nname: {stem}\ndescription: {title}\ntype: project\n---\n\n{body}\n",
            encoding="utf-8",
        )
        index.append(f"- [{title}]({name}) — {title}")
    (folder / "MEMORY.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    return folder


def walk(question: str) -> tuple[list[str], list[str]]:
    """The files entered before the first main request, and all files entered."""
    with tempfile.TemporaryDirectory() as tmp, LocalServer() as server:
        root = Path(tmp)
        folder = _folder(root)
        trace = root / "walk.tsv"
        server.script("main", "ok")
        server.set_default("side", lambda _request: Reply(text='{"selected_memories": []}'))
        env = {
            **os.environ,
            "ASYNCRECALL_HOME": str(root / "home"),
            "NO_COLOR": "1",
        }
        argv = [
            "run",
            question,
            "--base-url",
            server.base_url,
            "--model",
            "main",
            "--side-model",
            "side",
            "--memory-dir",
            str(folder),
            "--project",
            str(root),
            "--no-extract",
        ]
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(trace), *argv],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"run failed ({done.returncode}): {done.stderr.strip()}")
        main = next((r for r in server.requests if r.model == "main"), None)
        if main is None:
            raise SystemExit("the server saw no main request")
        entered = [line.split("\t", 1) for line in trace.read_text().splitlines() if line]
        before = [name for at, name in entered if float(at) <= main.arrived_at]
        return before, [name for _at, name in entered]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--question", default="why does CI hang on real sockets?")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.monotonic()
    before, entered = walk(args.question)
    if args.json:
        found = {"before_first_request": before, "entered": len(entered)}
        sys.stdout.write(json.dumps(found, indent=1) + "\n")
        return 0
    took = time.monotonic() - started
    lines = [
        f"asyncrecall source files entered before the first main request: {len(before)}",
        f"(entered in the whole run: {len(entered)}; walked in {took:.1f} s)",
        *(f"  {name}" for name in sorted(before)),
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

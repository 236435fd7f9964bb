"""``asyncrecall console --store postgresql://... --namespace NS``: the same pages over a
database namespace, the same writes as the CLI's."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from asyncrecall.memory import FolderStore

HANG_GUARD = 120.0


def _memory(*args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", *args, "--json"],
        capture_output=True, text=True, timeout=HANG_GUARD, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _held_queue(store: list[str], tmp_path: Path) -> None:
    """A memory held in the namespace: ``Queue``, imported without ``--trusted``."""
    folder = FolderStore(tmp_path / "export")
    folder.save_memory("Queue", "", "project", "Jobs go through the blue queue.", origin="user")
    _memory("import", "--from", str(folder.root), *store)
    assert _memory("list", *store)[0]["quarantined"]


@contextlib.contextmanager
def _console(store: list[str]) -> Iterator[tuple[httpx.Client, str]]:
    """The console over ``store``, and a client holding its cookie; no traceback after."""
    console = subprocess.Popen(
        [sys.executable, "-m", "asyncrecall", "console", "--port", "0", "--no-browser", *store],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert console.stderr is not None
    try:
        line = console.stderr.readline()
        url = line[line.index("http://") :].split()[0]
        base, token = url.split("/?token=")
        with httpx.Client(base_url=base, timeout=HANG_GUARD) as client:
            assert client.get("/", params={"token": token}).status_code == 303
            yield client, token
    finally:
        console.terminate()
        console.wait(timeout=HANG_GUARD)
        rest = console.stderr.read()
        console.stderr.close()
    assert "Traceback" not in rest, rest


def test_the_console_confirms_a_held_memory_of_a_namespace(
    pg_url: str, namespace: str, tmp_path: Path
) -> None:
    """A memory held in a database namespace (imported without ``--trusted``) shows in
    the console over that namespace, and its Confirm there lifts the hold in the
    database: ``memory list --store ... --json`` reads it confirmed."""
    store = ["--store", pg_url, "--namespace", namespace, "--project", str(tmp_path)]
    _held_queue(store, tmp_path)
    with _console(store) as (client, token):
        held = client.get("/held")
        assert held.status_code == 200 and "blue queue" in held.text
        confirmed = client.post("/held/confirm", data={"name": "Queue", "token": token})
        assert confirmed.status_code == 303
    listed = _memory("list", *store)
    assert [(m["name"], m["quarantined"]) for m in listed] == [("Queue", False)]

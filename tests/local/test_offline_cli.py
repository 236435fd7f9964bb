"""With no endpoint and no key, the whole product works offline on the embedded models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("wordllama")

from asyncrecall.memory import MemoryStore


def test_chat_with_no_endpoint_runs_a_turn_offline_with_hybrid_recall(tmp_path: Path) -> None:
    """`asyncrecall chat` with nothing configured: the embedded model answers (with a
    one-line notice), recall uses the embedded hybrid selector, and the turn finishes."""
    project = tmp_path / "project"
    project.mkdir()
    store = MemoryStore(tmp_path / "memory")
    store.save_memory("cluster", "the staging cluster is called blue", "project", "blue")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")

    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "chat", "--output-format", "stream-json",
         "--max-turns", "2", "--project", str(project), "--memory-dir", str(store.root)],
        input="what is the staging cluster called?\n",
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "embedded model" in done.stderr and "offline" in done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "memory_recall_started" and kinds[-1] == "finished"
    assert "request_sent" in kinds and "error" not in kinds
    injected = [e for e in events if e["type"] == "memory_injected"]
    assert all(e["strategy"] == "hybrid" for e in injected)

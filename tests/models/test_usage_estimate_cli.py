"""``--session-token-limit`` works against a server that reports no usage.

The model estimates the usage and marks it; the agent's ``usage`` event says so
(``estimated: true``). Checked end to end: the real CLI, piped ``chat``, a LocalServer
that never sends usage (llama-cpp-python, LM Studio and older Ollama do not).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from asyncrecall.testing import LocalServer, Reply

GUARD = 60


def test_session_token_limit_fires_on_estimated_usage(
    local_server: LocalServer, tmp_path: Path
) -> None:
    local_server.script("main", Reply(text="first answer", usage=False))
    local_server.script("main", Reply(text="second answer", usage=False))
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    long_query = "please consider " * 200  # about 3,200 characters: some 800 tokens
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "chat", "--base-url", local_server.base_url,
         "--model", "main", "--no-memory", "--project", str(project),
         "--session-token-limit", "500", "--output-format", "stream-json"],
        input=f"{long_query}\nand now?\n", capture_output=True, text=True, env=env,
        timeout=GUARD,
    )  # fmt: skip
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    usage = [e for e in events if e["type"] == "usage"]
    assert usage and all(e["estimated"] is True for e in usage), done.stdout
    assert usage[0]["prompt_tokens"] > 500
    assert "session_token_limit_exceeded" in [e["type"] for e in events], done.stdout
    assert len(local_server.requests) == 1  # the second query stopped before sending

"""With no endpoint and no key, the whole product works offline on the embedded models.

These run the real CLI on SmolLM2-135M: a turn takes seconds on a small machine, so each
test asks what it needs of one process (the timeouts are hang guards only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("wordllama")

from asyncrecall.memory import FolderStore

QUESTION = "what is the staging cluster called?"


def _offline(tmp_path: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Run ``asyncrecall ARGS`` with nothing configured, a memory about the staging cluster."""
    project = tmp_path / "project"
    project.mkdir()
    store = FolderStore(tmp_path / "memory")
    store.save_memory(
        "cluster",
        "the name of the staging cluster",
        "project",
        "The staging cluster is called blue. Deploys go through it.",
        origin="user",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", *args, "--output-format", "stream-json",
         "--project", str(project), "--memory-dir", str(store.root)],
        input=stdin, capture_output=True, text=True, env=env, timeout=540,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@pytest.mark.timeout(600)
def test_offline_run_answers_from_its_memory_without_tools(tmp_path: Path) -> None:
    """`asyncrecall run` with nothing configured answers the question from its memory
    and exits 0: the tiny embedded model is offered no tools (it only looped on them),
    its memory reaches it in the first request, and the answer is not a runaway."""
    code, stdout, stderr = _offline(tmp_path, "run", QUESTION)

    assert code == 0, stderr
    assert "embedded model" in stderr and "offline" in stderr
    events = _events(stdout)
    kinds = [e["type"] for e in events]
    assert "tool_call" not in kinds and "error" not in kinds
    injected = [e for e in events if e["type"] == "memory_injected"]
    assert [e["point"] for e in injected] == ["user_query"]
    assert injected[0]["paths"] == ["cluster.md"]
    assert kinds.index("memory_injected") < kinds.index("request_sent")
    [finished] = [e for e in events if e["type"] == "finished"]
    assert "blue" in finished["text"].lower()
    [usage] = [e for e in events if e["type"] == "usage"]
    assert usage["completion_tokens"] < 256  # the main turn's cap; it stopped by itself


@pytest.mark.timeout(600)
def test_offline_chat_answers_two_piped_lines_with_its_memory(tmp_path: Path) -> None:
    """`asyncrecall chat` with nothing configured and two piped lines answers both, in
    one session: the notice once, recall on each query, a non-empty answer to each."""
    lines = f"{QUESTION}\nwhat goes through the staging cluster?\n"
    code, stdout, stderr = _offline(tmp_path, "chat", "--max-turns", "2", stdin=lines)

    assert code == 0, stderr
    assert stderr.count("embedded model") == 1
    events = _events(stdout)
    kinds = [e["type"] for e in events]
    assert "tool_call" not in kinds and "error" not in kinds
    assert kinds.count("memory_recall_started") == 2 and kinds.count("request_sent") == 2
    answers = [e["text"] for e in events if e["type"] == "finished"]
    assert len(answers) == 2 and all(answer.strip() for answer in answers)
    assert "blue" in answers[0].lower()
    assert any(e["type"] == "memory_injected" and e["point"] == "user_query" for e in events)


def test_only_the_embedded_model_goes_without_tools_unless_asked(tmp_path: Path) -> None:
    """Tools are offered to every model but the tiny embedded one; ``--tools`` (or
    ``tools = true``) forces them. Without tools the embedded default adds the instant
    lexical pass, since no tool result will come for a late recall to land at."""
    from asyncrecall.cli._common import common_parser, settings_from_args
    from asyncrecall.cli._settings import load_settings

    env = {"ASYNCRECALL_HOME": str(tmp_path)}
    default = load_settings({}, env=env, cwd=tmp_path)
    assert not default.tools_enabled(embedded=True)
    assert default.tools_enabled(embedded=False)
    # The default is async+lexical everywhere (bench recall: most gold at zero wait).
    assert default.effective_recall_mode(embedded=True) == "async+lexical"
    assert default.effective_recall_mode(embedded=False) == "async+lexical"
    plain = load_settings({"recall_mode": "async"}, env=env, cwd=tmp_path)
    assert plain.effective_recall_mode(embedded=True) == "async+lexical"
    assert plain.effective_recall_mode(embedded=False) == "async"
    blocking = load_settings({"recall_mode": "blocking"}, env=env, cwd=tmp_path)
    assert blocking.effective_recall_mode(embedded=True) == "blocking"

    forced = settings_from_args(
        common_parser().parse_args(["--tools", "--recall-mode", "async"]), cwd=tmp_path
    )
    assert forced.tools_enabled(embedded=True)
    assert forced.effective_recall_mode(embedded=True) == "async"
    (tmp_path / "settings.toml").write_text("tools = true\n")
    assert load_settings({}, env=env, cwd=tmp_path).tools_enabled(embedded=True)

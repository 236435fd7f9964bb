"""``asyncrecall hooks`` inside the agents' real CLIs, headless: Claude Code (the CLI the
``claude-agent-sdk`` wheel bundles, or ``ASYNCRECALL_CLAUDE_CLI``) pointed at
:class:`~asyncrecall.testing.AnthropicServer`, Qwen Code (``ASYNCRECALL_QWEN_CLI``, or
``qwen`` on ``PATH``: ``npm install @qwen-code/qwen-code``) at
:class:`~asyncrecall.testing.LocalServer`. The same server answers the side query on its
OpenAI-compatible endpoint. Assertions read the wire: which request carried the memory.

Each test skips, saying why, when its CLI is not installed.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.cli.hooks._install import hook_command
from asyncrecall.memory import FolderStore
from asyncrecall.testing import AnthropicServer, LocalServer, RecordedRequest, Reply

SRC = Path(__file__).resolve().parents[2] / "src"
CLIENT = Path(hook_command("SessionStart", "claude-code", "python").split()[3])
MAIN = "claude-sonnet-4-5"  # a model the CLI knows: hook context in the user message
QWEN_MAIN = "qwen-test-main"
NOTES = {
    "deploy.md": (
        "deploy",
        "how the staging deploy works",
        "Staging deploys go through the blue-green pipeline.",
    ),
    "tabs.md": ("tabs", "indentation preference", "The user indents with tabs, never spaces."),
}

pytestmark = pytest.mark.timeout(600)


def claude_cli() -> str:
    path = os.environ.get("ASYNCRECALL_CLAUDE_CLI")
    if not path:
        try:
            import claude_agent_sdk
        except ImportError:
            pytest.skip("Claude Code is not installed (pip install claude-agent-sdk)")
        bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
        path = str(bundled) if bundled.exists() else shutil.which("claude")
    if not path:
        pytest.skip("Claude Code's CLI is not installed (claude-agent-sdk bundles it)")
    return path


def qwen_cli() -> str:
    path = os.environ.get("ASYNCRECALL_QWEN_CLI") or shutil.which("qwen")
    if not path:
        pytest.skip(
            "Qwen Code is not installed: npm install --prefix DIR @qwen-code/qwen-code, then "
            "ASYNCRECALL_QWEN_CLI=DIR/node_modules/.bin/qwen"
        )
    return path


class Folders:
    def __init__(self, root: Path) -> None:
        self.home, self.memory, self.project = root / "home", root / "mem", root / "proj"
        for folder in (self.home, self.memory, self.project):
            folder.mkdir()
        (self.project / "a.md").write_text("hello\n")
        for file, (name, description, body) in NOTES.items():
            (self.memory / file).write_text(
                f"---\nname: {name}\ndescription: {description}\ntype: project\n---\n{body}\n"
            )
        (self.memory / "MEMORY.md").write_text(
            "".join(f"- [{n}]({f}) — {d}\n" for f, (n, d, _) in NOTES.items())
        )
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home),
            "PYTHONPATH": str(SRC),
            "ASYNCRECALL_HOME": str(self.home),
            "ASYNCRECALL_MEMORY_DIR": str(self.memory),
            "ASYNCRECALL_SELECTOR": "lexical",
            "ASYNCRECALL_HOOKS_IDLE": "120",
        }

    def hook(self, event: str, session: str = "warm-up", **fields: Any) -> str:
        payload = {"session_id": session, "cwd": str(self.project), **fields}
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(CLIENT), "claude-code", event],
            input=json.dumps(payload).encode(),
            capture_output=True,
            env=self.env,
            timeout=30,
        )
        return done.stdout.decode()

    def warm(self) -> None:
        """The service started and the folder read, as after the agent's first session."""
        deadline = time.monotonic() + 60
        self.hook("SessionStart")
        while "blue-green" not in self.hook("UserPromptSubmit", prompt="staging deploy"):
            assert time.monotonic() < deadline, "the recall service did not warm up"
            self.hook("SessionEnd")  # a block it took can no longer be shown in it
            time.sleep(0.1)
        self.hook("SessionEnd")

    def install(self, agent: str) -> None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "asyncrecall",
                "hooks",
                "install",
                "--agent",
                agent,
                "--project",
                str(self.project),
            ],
            env=self.env,
            check=True,
            capture_output=True,
        )


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[Folders]:
    made = Folders(tmp_path)
    yield made
    # The service outlives a node start here (a loaded machine takes seconds), so it
    # is stopped as a user would: its socket removed, it leaves within a second.
    (made.home / "run" / "hooks.sock").unlink(missing_ok=True)
    lock = made.home / "run" / "hooks.lock"
    deadline = time.monotonic() + 60
    while lock.exists():
        with lock.open("rb") as held:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break  # nobody holds it: the service has exited
            except BlockingIOError:
                pass
        assert time.monotonic() < deadline, "the recall service did not exit"
        time.sleep(0.2)


def _text(request: Any) -> str:
    return json.dumps(request.body.get("messages"))


def _main_requests(server: LocalServer, model: str) -> list[Any]:
    return [r for r in server.requests if r.body.get("model") == model]


# -- Claude Code ---------------------------------------------------------------------


def run_claude(folders: Folders, server: AnthropicServer, prompt: str, model: str = MAIN) -> None:
    env = {
        **folders.env,
        "ANTHROPIC_BASE_URL": server.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "CLAUDE_CONFIG_DIR": str(folders.home / ".claude-config"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    done = subprocess.run(
        [
            claude_cli(),
            "-p",
            prompt,
            "--model",
            model,
            "--output-format",
            "json",
            "--allowedTools",
            "Read",
        ],
        cwd=folders.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_claude_code_word_sharing_memory_rides_on_the_first_request(folders: Folders) -> None:
    claude_cli()
    folders.install("claude-code")
    folders.warm()
    with AnthropicServer() as server:
        server.set_default(MAIN, Reply(text="done"))
        server.script(
            MAIN, Reply(tool_calls=[("Read", {"file_path": str(folders.project / "a.md")})])
        )
        run_claude(folders, server, "how does the staging deploy work?")
        first, *later = _main_requests(server, MAIN)
        assert "blue-green" in _text(first) and "never spaces" not in _text(first)
        assert "notes, not instructions" in _text(first)
        assert later and all(_text(r).count("Relevant memory") == 1 for r in later)


def _side_answers(server: LocalServer, run: Reply) -> None:
    """The side model answers the recall of the run's question (``how should I lay out
    this file?``) with ``run``, and any other (the warm-up's, even one that reaches the
    server only after the warm-up on busy cores; an extraction's) with deploy.md. A
    script would go to whichever side query came first."""

    def answer(request: RecordedRequest) -> Reply:
        asked = json.dumps(request.body)
        if "lay out this file" in asked and "selected_memories" in asked:
            return run
        return Reply(json={"selected_memories": ["deploy.md"]})

    server.set_default("side", answer)


@pytest.mark.parametrize("delay", [0.1, 0.9])
def test_claude_code_side_query_memory_comes_with_the_tool_results(
    folders: Folders, delay: float
) -> None:
    claude_cli()
    folders.install("claude-code")
    with AnthropicServer() as server:
        folders.env.update(
            ASYNCRECALL_SELECTOR="model",
            ASYNCRECALL_BASE_URL=f"{server.base_url}/v1",
            ASYNCRECALL_MODEL="side",
            ASYNCRECALL_API_KEY="test",
        )
        _side_answers(
            server, Reply(json={"selected_memories": ["tabs.md"]}, first_token_delay=delay)
        )
        folders.warm()
        server.set_default(MAIN, Reply(text="done"))
        # the tool round ends after the side query settles
        server.script(
            MAIN,
            Reply(
                tool_calls=[("Read", {"file_path": str(folders.project / "a.md")})],
                first_token_delay=delay + 1.0,
            ),
        )
        run_claude(folders, server, "how should I lay out this file?")
        first, after_tools, *_ = _main_requests(server, MAIN)
        assert "never spaces" not in _text(first) and "blue-green" not in _text(first)
        assert "never spaces" in _text(after_tools)
        assert _text(after_tools).count("Relevant memory") == 1


# -- Qwen Code -----------------------------------------------------------------------


def run_qwen(folders: Folders, server: LocalServer, prompt: str, model: str) -> None:
    env = {
        **folders.env,
        "OPENAI_BASE_URL": f"{server.base_url}",
        "OPENAI_API_KEY": "test-key",
        "OPENAI_MODEL": model,
    }
    done = subprocess.run(
        [
            qwen_cli(),
            "-p",
            prompt,
            "--auth-type",
            "openai",
            "--model",
            model,
            "--approval-mode",
            "yolo",
            "--output-format",
            "json",
        ],
        cwd=folders.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_qwen_code_word_sharing_memory_rides_on_the_first_request(folders: Folders) -> None:
    qwen_cli()
    folders.install("qwen-code")
    folders.warm()
    with LocalServer() as server:
        server.set_default(QWEN_MAIN, Reply(text="done"))
        server.script(
            QWEN_MAIN,
            Reply(tool_calls=[("read_file", {"file_path": str(folders.project / "a.md")})]),
        )
        run_qwen(folders, server, "how does the staging deploy work?", QWEN_MAIN)
        first, *later = _main_requests(server, QWEN_MAIN)
        assert "blue-green" in _text(first) and "never spaces" not in _text(first)
        assert "notes, not instructions" in _text(first)
        # the empty-prompt repeat before the tool results delivers nothing again
        assert later and all(_text(r).count("Relevant memory") == 1 for r in later)


@pytest.mark.parametrize("delay", [0.1, 0.9])
def test_qwen_code_side_query_memory_comes_with_the_tool_results(
    folders: Folders, delay: float
) -> None:
    qwen_cli()
    folders.install("qwen-code")
    with LocalServer() as server:
        folders.env.update(
            ASYNCRECALL_SELECTOR="model",
            ASYNCRECALL_BASE_URL=server.base_url,
            ASYNCRECALL_MODEL="side",
            ASYNCRECALL_API_KEY="test",
        )
        _side_answers(
            server, Reply(json={"selected_memories": ["tabs.md"]}, first_token_delay=delay)
        )
        folders.warm()
        server.set_default(QWEN_MAIN, Reply(text="done"))
        server.script(
            QWEN_MAIN,
            Reply(
                tool_calls=[("read_file", {"file_path": str(folders.project / "a.md")})],
                first_token_delay=delay + 1.0,
            ),
        )
        run_qwen(folders, server, "how should I lay out this file?", QWEN_MAIN)
        first, after_tools, *_ = _main_requests(server, QWEN_MAIN)
        assert "never spaces" not in _text(first) and "blue-green" not in _text(first)
        assert "never spaces" in _text(after_tools)
        assert _text(after_tools).count("Relevant memory") == 1


# -- both: the end of the turn hangs the side query up ---------------------------------


@pytest.mark.parametrize("agent", ["claude-code", "qwen-code"])
def test_the_side_query_is_hung_up_when_the_turn_ends(folders: Folders, agent: str) -> None:
    """A side query that never answers, a turn that needs no tool: the agent's ``Stop``
    hook hangs it up (the server sees the client go), before the idle service exits."""
    cli = claude_cli() if agent == "claude-code" else qwen_cli()
    del cli
    folders.install(agent)
    server: LocalServer = AnthropicServer() if agent == "claude-code" else LocalServer()
    with server:
        base = f"{server.base_url}/v1" if agent == "claude-code" else server.base_url
        folders.env.update(
            ASYNCRECALL_SELECTOR="model",
            ASYNCRECALL_BASE_URL=base,
            ASYNCRECALL_MODEL="side",
            ASYNCRECALL_API_KEY="test",
        )
        _side_answers(server, Reply(hang=True))
        folders.warm()
        before = len(server.requests)
        main = MAIN if agent == "claude-code" else QWEN_MAIN
        server.set_default(main, Reply(text="done", first_token_delay=1.0))
        prompt = "how should I lay out this file?"
        if agent == "claude-code":
            run_claude(folders, server, prompt)  # type: ignore[arg-type]
        else:
            run_qwen(folders, server, prompt, main)
        # The recall's side query, the first after the warm-up (the turn's end may send an
        # extraction's after it, which is not hung up: it runs on after the turn).
        hung = next(r for r in server.requests[before:] if r.body.get("model") == "side")
        assert "lay out this file" in json.dumps(hung.body)
        server.wait_disconnected(hung, timeout=30)


# -- both: what a session says is extracted at its turn's end ----------------------------


class _Extraction:
    """The side model: an extraction request gets one note citing the user's turn that
    states the fact (its offset as the prompt numbers it); anything else, nothing."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, record: Any) -> Reply:
        prompt = str(record.messages[-1]["content"])
        found = re.search(r"^\[(\d+)\] user: .*Fridays", prompt, flags=re.MULTILINE)
        if found is None:
            return Reply(json={"memories": [], "selected_memories": []})
        self.prompts.append(prompt)
        note = {
            "action": "create",
            "path": "",
            "name": "Deploy day",
            "description": "which day staging deploys go out",
            "type": "project",
            "content": "Staging deploys go out on Fridays.",
            "source_offsets": [int(found.group(1))],
        }
        return Reply(json={"memories": [note]})


@pytest.mark.parametrize("agent", ["claude-code", "qwen-code"])
def test_what_a_session_says_reaches_the_next_sessions_first_request(
    folders: Folders, agent: str
) -> None:
    """A session states a fact; its turn's end hands the turn to extraction (the agent
    does not wait); the note lands in the memory folder, as the user's words; the next
    session's question on it has it on its first request."""
    (claude_cli if agent == "claude-code" else qwen_cli)()  # skips without the CLI
    folders.install(agent)
    server: LocalServer = AnthropicServer() if agent == "claude-code" else LocalServer()
    with server:
        base = f"{server.base_url}/v1" if agent == "claude-code" else server.base_url
        folders.env.update(
            ASYNCRECALL_BASE_URL=base, ASYNCRECALL_MODEL="side", ASYNCRECALL_API_KEY="test"
        )
        side = _Extraction()
        server.set_default("side", side)
        folders.warm()
        main = MAIN if agent == "claude-code" else QWEN_MAIN
        server.set_default(main, Reply(text="Noted."))
        run = run_claude if agent == "claude-code" else run_qwen
        run(folders, server, "Remember: our staging deploys go out on Fridays.", main)
        deadline = time.monotonic() + 120
        store = FolderStore(folders.memory)
        while "Deploy day" not in {doc.name for doc in store.scan()}:
            assert time.monotonic() < deadline, "the session's turn was never extracted"
            folders.hook("PostToolUse", "busy")  # the user works on: the service stays
            time.sleep(0.2)
        (source,) = [s.to_json() for s in store.provenance_of(store.get("Deploy day"))]
        assert source["origin"] == "extraction-user" and not store.get("Deploy day").quarantined
        before = len(_main_requests(server, main))
        run(folders, server, "which day do staging deploys go out?", main)
        first = _main_requests(server, main)[before]
        assert "Fridays" in _text(first)

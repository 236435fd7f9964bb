"""The demo's scripted coding session: a throw-away project, its memories, four queries.

The side query answers like a cold fast model (about 0.9 s), except for one query
where it is warm (0.12 s); the main model's first token comes after 0.4-0.6 s; the
tools are the agent's real read-only tools over the throw-away project. Replies are
chosen by the server from the request itself (which user query, how many model turns
already), so blocking and async mode meet exactly the same session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncrecall.cli.demo._memories import write_memories
from asyncrecall.testing import LocalServer, RecordedRequest, Reply

__all__ = ["SCRIPT", "DemoQuery", "ToolStep", "build_project", "install_script"]


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One model turn that calls a tool, after ``first_token`` seconds."""

    tool: str
    args: Mapping[str, Any]
    first_token: float


@dataclass(frozen=True, slots=True)
class DemoQuery:
    """A user query, the memories a good selector picks, and how the session unfolds."""

    text: str
    memories: tuple[str, ...]
    side_delay: float
    steps: tuple[ToolStep, ...]
    answer: str
    answer_first_token: float = 0.4


SCRIPT: tuple[DemoQuery, ...] = (
    DemoQuery(
        "Why does CI hang on the integration tests?",
        ("ci-hang", "test-runner"),
        side_delay=0.9,
        steps=(
            ToolStep("grep_search", {"pattern": "socket", "path": "tests"}, 0.5),
            ToolStep("read_file", {"path": "tests/conftest.py"}, 0.55),
        ),
        answer="test_settlement opens a real socket to the bank sandbox; use fake_bank.",
    ),
    DemoQuery(
        "Write the commit message for this change",
        ("commit-style",),
        side_delay=0.9,
        steps=(),
        answer="Use the fake bank in settlement tests\n\nCI has no egress: the test hung.",
        answer_first_token=0.45,
    ),
    DemoQuery(
        "Add retries to the webhook sender",
        ("retry-policy", "webhooks"),
        side_delay=0.12,
        steps=(ToolStep("read_file", {"path": "ledger/http/retry.py"}, 0.5),),
        answer="Wrapped send_webhook in with_retries (3 attempts, backoff from 200 ms).",
        answer_first_token=0.45,
    ),
    DemoQuery(
        "Fix the flaky token expiry test",
        ("clock-in-tests", "auth-tokens"),
        side_delay=0.88,
        steps=(
            ToolStep("grep_search", {"pattern": "sleep", "path": "tests"}, 0.45),
            ToolStep("read_file", {"path": "tests/test_tokens.py"}, 0.6),
        ),
        answer="The test slept past the expiry; it now advances an injected clock.",
    ),
)

_PROJECT_FILES = {
    "README.md": "# ledgerline\n\nA payments service (demo project of asyncrecall).\n",
    "ledger/__init__.py": "",
    "ledger/http/__init__.py": "",
    "ledger/http/retry.py": (
        "def with_retries(call, attempts=3, first_delay=0.2):\n"
        '    """Retry on 5xx and 429, honouring Retry-After."""\n'
        "    ...\n"
    ),
    "ledger/webhooks.py": "def send_webhook(url, body):\n    ...\n",
    "tests/conftest.py": (
        "import pytest\n\n\n@pytest.fixture\ndef fake_bank():\n"
        '    """A local stand-in for the bank sandbox: no socket leaves the runner."""\n'
    ),
    "tests/test_settlement.py": (
        "import socket\n\n\ndef test_settlement():\n"
        '    socket.create_connection(("sandbox.bank.example", 443))\n'
    ),
    "tests/test_tokens.py": (
        "import time\n\n\ndef test_token_expires(issue):\n"
        "    token = issue(ttl=1)\n    time.sleep(1.1)\n    assert token.expired\n"
    ),
}


def build_project(root: Path, memory_dir: Path) -> Mapping[str, str]:
    """Write the throw-away project and its memories; returns memory name -> path."""
    for rel, text in _PROJECT_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return write_memories(memory_dir)


def install_script(server: LocalServer, *, main: str, side: str, paths: Mapping[str, str]) -> None:
    """Make ``server`` play :data:`SCRIPT` for the models named ``main`` and ``side``."""
    server.set_default(side, lambda request: _side_reply(request, paths))
    server.set_default(main, _main_reply)


def _query_of(messages: Sequence[Mapping[str, Any]]) -> tuple[DemoQuery, int]:
    """The user query a request belongs to, and how many model turns it already had."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        content = str(message.get("content", ""))
        for query in SCRIPT:
            if query.text in content:
                turns = sum(1 for m in messages[index:] if m.get("role") == "assistant")
                return query, turns
    raise LookupError("the demo server got a request for no scripted user query")


def _side_reply(request: RecordedRequest, paths: Mapping[str, str]) -> Reply:
    query, _ = _query_of(request.messages)
    offered = "\n".join(str(m.get("content", "")) for m in request.messages)
    chosen = [paths[name] for name in query.memories if paths[name] in offered]
    return Reply(json={"selected_memories": chosen}, first_token_delay=query.side_delay)


def _main_reply(request: RecordedRequest) -> Reply:
    query, turns = _query_of(request.messages)
    if turns < len(query.steps):
        step = query.steps[turns]
        return Reply(tool_calls=[(step.tool, dict(step.args))], first_token_delay=step.first_token)
    return Reply(text=query.answer, first_token_delay=query.answer_first_token, chunk_size=24)

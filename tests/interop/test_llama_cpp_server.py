"""Conformance against a real OpenAI-compatible server nobody here wrote: llama-cpp-python's
``llama_cpp.server`` serving SmolLM2-135M. Everything goes over HTTP through a
recording proxy, so the assertions are about what went on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asyncrecall import ModelError, ModelProtocolError
from asyncrecall.memory import FolderStore
from asyncrecall.models import (
    Finished,
    FunctionResponse,
    OpenAIModel,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
    model_content,
    open_openai_models,
    user_content,
)
from asyncrecall.models._openai import SIDE_QUERY_MAX_TOKENS

from .server import LlamaServer

GUARD = 120
MAIN_TOKENS = 12  # main answers are capped: the suite checks the wire, not the prose
pytestmark = pytest.mark.timeout(240)  # a hang guard: CPU-bound on busy shared cores
READ_FILE = ToolSpec(
    "read_file",
    "Read a text file of the project.",
    # An enum keeps the forced call short: the server's grammar can only write this path.
    {
        "type": "object",
        "properties": {"path": {"type": "string", "enum": ["notes.md"]}},
        "required": ["path"],
    },
)
SCHEMA = {
    "type": "object",
    "properties": {"selected_memories": {"type": "array", "items": {"type": "string"}}},
    "required": ["selected_memories"],
}


def _model(server: LlamaServer) -> OpenAIModel:
    """The model as a new user would name it: the id the server reports (a GGUF path)."""
    return OpenAIModel(
        model=server.model_id, base_url=server.base_url, max_retries=0, max_tokens=MAIN_TOKENS
    )


def _wait_for_log(log: Path, word: str, count: int) -> None:
    """Poll the server's log until ``word`` appears ``count`` times (a hang guard)."""
    deadline = time.monotonic() + GUARD
    while log.read_text(errors="replace").count(word) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{word!r} x{count} never appeared in {log}")
        time.sleep(0.1)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    return env


async def test_a_forced_tool_round_is_accepted(server: LlamaServer) -> None:
    """A tool call (forced with ``tool_choice``), then the request carrying it and its
    result: HTTP 200 (with ``"content": null``, or the key left out, this server
    answers 500)."""
    async with _model(server) as model:
        history = [user_content("Read the file notes.md and tell me what it says.")]
        first = [
            e async for e in model.stream(history, tools=[READ_FILE], tool_choice=READ_FILE.name)
        ]
        calls = [e.call for e in first if isinstance(e, ToolCallReady)]
        # This server ignores stream_options.include_usage: the usage is an estimate.
        assert [e.estimated for e in first if isinstance(e, Usage)] == [True]
        assert [(c.name, dict(c.args)) for c in calls] == [("read_file", {"path": "notes.md"})]
        history += [
            model_content(*calls),
            user_content(*(FunctionResponse(c.id, c.name, {"content": "blue"}) for c in calls)),
        ]
        second = [e async for e in model.stream(history, tools=[READ_FILE])]
    assert isinstance(second[-1], Finished)
    tool_round = server.proxy.requests[-1]
    assert tool_round.status == 200
    assistant = tool_round.body["messages"][1]
    assert assistant["role"] == "assistant" and "tool_calls" in assistant
    assert assistant["content"] == ""


async def test_side_query_falls_back_at_once_is_capped_and_remembered(
    server: LlamaServer,
) -> None:
    """This server answers json_schema with HTTP 500: the first recall sends two requests
    (json_schema, json_object), never a retry; a later recall, even from a new model
    instance, sends one; every side query carries max_tokens."""
    for _ in range(2):
        async with open_openai_models(model=server.model_id, base_url=server.base_url) as pair:
            # A tiny model may answer JSON cut at the cap: an error, still one request.
            with contextlib.suppress(ModelProtocolError):
                await pair.side.generate_json(
                    system="Pick the memory files relevant to the query.",
                    prompt="Query: how do we deploy?\nFiles: deploy.md, cats.md",
                    schema=SCHEMA,
                    schema_name="selection",
                )
    wire = [(r.status, r.response_format_type) for r in server.proxy.requests]
    assert wire == [(500, "json_schema"), (200, "json_object"), (200, "json_object")]
    assert all(r.body["max_tokens"] == SIDE_QUERY_MAX_TOKENS for r in server.proxy.requests)


async def test_a_prompt_over_the_context_is_a_model_error(server: LlamaServer) -> None:
    """HTTP 200 with an empty event stream (this server's answer to a prompt over its
    context) is a ModelError with one line naming the short model name."""
    async with _model(server) as model:
        with pytest.raises(ModelError) as caught:
            _ = [e async for e in model.stream([user_content("word " * (2 * server.n_ctx))])]
    message = str(caught.value)
    assert "\n" not in message and "context" in message
    assert (
        "SmolLM2-135M-Instruct" in message
        and ".gguf" not in message
        and "/" not in (message.split("(model", 1)[1])
    )
    assert server.proxy.requests[-1].status == 200  # the success it looked like


def test_run_over_the_context_exits_non_zero_with_one_line(
    server: LlamaServer, tmp_path: Path
) -> None:
    """``asyncrecall run`` with a prompt over the server's context: non-zero exit, one line
    on stderr, no answer on stdout. (The model raises; the exit code is the CLI's.)"""
    project = tmp_path / "project"
    project.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "run", "word " * (2 * server.n_ctx),
         "--base-url", server.base_url, "--model", server.model_id, "--no-memory",
         "--project", str(project)],
        capture_output=True, text=True, env=_env(tmp_path), timeout=GUARD,
    )  # fmt: skip
    assert done.returncode != 0, (done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if "context" in line]
    assert len(errors) == 1, done.stderr
    assert done.stdout.strip() == ""


async def test_cancel_mid_stream_closes_the_connection(server: LlamaServer) -> None:
    """Cancelling the task consuming a stream hangs up: the proxy sees the client close
    the connection before the answer was complete."""
    disconnects_before = server.log.read_text(errors="replace").count("disconnected")
    async with _model(server) as model:
        first_text = asyncio.Event()

        async def consume() -> None:
            history = [user_content("Write a very long story about a lighthouse keeper.")]
            async for event in model.stream(history):
                if isinstance(event, TextDelta):
                    first_text.set()

        task = asyncio.create_task(consume())
        async with asyncio.timeout(GUARD):
            await first_text.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    record = await asyncio.to_thread(server.proxy.wait_for, lambda r: r.client_hung_up)
    assert record.body["stream"] is True
    assert not record.complete
    # The server saw it too: its event publisher prints "disconnected" and stops.
    await asyncio.to_thread(_wait_for_log, server.log, "disconnected", disconnects_before + 1)


def test_memory_recall_with_the_model_selector(server: LlamaServer, tmp_path: Path) -> None:
    """``asyncrecall memory recall --selector model`` against this server: exit 0, at most
    two side-query requests (json_schema refused, json_object), none retried."""
    memory = FolderStore(tmp_path / "memory")
    memory.ensure()
    memory.save_memory(
        "deploy-flow", "how deploys work", "project", "Deploys go via staging.", origin="user"
    )
    memory.save_memory("cat-names", "the office cats", "user", "Tom and Ginger.", origin="user")
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", "recall", "how do we deploy?",
         "--selector", "model", "--base-url", server.base_url, "--model", server.model_id,
         "--memory-dir", str(memory.root), "--json"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["strategy"] in ("model", "lexical")
    wire = [(r.status, r.response_format_type) for r in server.proxy.requests]
    assert wire == [(500, "json_schema"), (200, "json_object")]

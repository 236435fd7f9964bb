"""Extraction begins as the session's main turns do: the agent gives its scheduler its
client's system prompt and tools, each extraction's side query carries them, a
hand-off keeps them for the worker, and the worker's request begins with them on the
wire (the extraction's own instruction and the turns in the user message after them),
so a one-slot server still holds the agent's start when the next command comes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from asyncrecall.agent import Agent, AgentClient, ExtractionScheduler, ToolRegistry
from asyncrecall.agent._handoff import Handoff
from asyncrecall.memory import FolderStore, MemoryExtractor, TranscriptTurn
from asyncrecall.memory.extraction._extract import SYSTEM_PROMPT
from asyncrecall.models import PromptPrefix
from asyncrecall.models._traffic import traffic
from asyncrecall.testing import LocalServer, ScriptedModel

from .conftest import (
    HANG_GUARD,
    SideModel,
    is_extraction,
    memory,
    wait_until_handed_off_work_is_done,
)

SYSTEM = "You are the agent of this project."


async def test_the_sessions_extraction_and_its_hand_off_carry_the_clients_start(
    tmp_path: Path, store: FolderStore
) -> None:
    """An agent's extraction asks its side query with the client's system prompt and
    tools as the prefix, and what the session hands on at exit carries the same."""
    registry = ToolRegistry(tmp_path)
    main = ScriptedModel(name="main")
    main.add_turn("noted")
    main.add_turn("again")
    side = ScriptedModel(name="side", default_json=lambda _: {"memories": []})
    client = AgentClient(model=main, tools=registry.specs, system_prompt=SYSTEM)
    expected = PromptPrefix(SYSTEM, registry.specs)
    scheduler = ExtractionScheduler(MemoryExtractor(store, side))
    async with Agent(client, registry) as agent:
        agent.extraction = scheduler
        [_ async for _ in agent.run_query("we deploy on fridays")]
        await scheduler.wait_idle()
        [request] = side.json_requests
        assert request.prefix == expected
        assert request.system == SYSTEM_PROMPT  # the instruction is the extraction's own
        handed: list[Handoff | None] = []
        scheduler.handoff = handed.append
        scheduler.deferred = True
        [_ async for _ in agent.run_query("and release on mondays")]
    [owed] = handed
    assert owed is not None and owed.prefix == expected


def test_a_hand_off_file_keeps_the_prefix_and_an_older_one_reads_without() -> None:
    """A hand-off's prefix survives its file (the system prompt and each tool's name,
    description and parameters); a file written before hand-offs carried one reads with
    none (its extraction asks in the old form)."""
    prefix = PromptPrefix(SYSTEM, ToolRegistry(Path(".")).specs)
    handoff = Handoff("s-1", 2, (TranscriptTurn(0, "user", "hi"),), prefix=prefix)
    data = json.loads(json.dumps(handoff.to_json()))
    assert Handoff.from_json(data).prefix == prefix
    del data["prefix"]
    assert Handoff.from_json(data).prefix is None


def test_the_workers_extraction_begins_as_the_runs_main_request_did(
    local_server: LocalServer, side: SideModel, tmp_path: Path, memory_dir: Path
) -> None:
    """On the wire, on an endpoint seen to interrupt (a one-slot server), the
    handed-off extraction's request begins with ``run``'s main request's system message
    as sent and its tools (``tool_choice`` ``none``); the user message holds the
    extraction's instruction, then the existing memories and the turns. Its answer is
    written as before."""
    traffic(local_server.base_url).learn_interrupts()  # known to the processes after
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."))
    local_server.script("main", "noted")
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "run", "we deploy on fridays",
         "--base-url", local_server.base_url, "--api-key", "t", "--model", "main",
         "--side-model", "side", "--project", str(project), "--memory-dir", str(memory_dir)],
        capture_output=True, text=True, env=env, timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    wait_until_handed_off_work_is_done(memory_dir)
    [main] = [r for r in local_server.requests if r.model == "main"]
    *_, extraction = [r for r in local_server.requests if is_extraction(r)]  # slices first
    assert extraction.messages[0] == main.messages[0]
    assert extraction.body["tools"] == main.body["tools"]
    assert extraction.body["tool_choice"] == "none"
    [user] = extraction.messages[1:]
    assert user["role"] == "user" and user["content"].startswith(SYSTEM_PROMPT + "\n\n")
    assert "\n[0] user: we deploy on fridays\n[1] assistant: noted" in user["content"]
    assert (memory_dir / "deploy-day.md").read_text().count("We deploy on fridays.") == 1

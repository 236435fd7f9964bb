"""The history tells the model the truth about its tool calls, whatever ends a turn.

Tools that ran have their real responses recorded before any early exit (a limit, the
caller's cancel, a consumer that stops); "not run" is said only of calls that did not
run; the caller's cancel reaches the running tools.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from asyncrecall import CancelSignal
from asyncrecall.agent import (
    Agent,
    AgentClient,
    ClientOptions,
    MaxTurnsEvent,
    ToolRegistry,
    ToolResultEvent,
)
from asyncrecall.memory import FolderStore
from asyncrecall.models import Content, FunctionCall, FunctionResponse
from asyncrecall.testing import ScriptedModel

from .conftest import collect, types

SAVE = FunctionCall(
    "s1",
    "save_memory",
    {"name": "style", "description": "prefers tabs", "type": "user", "content": "Tabs."},
)


def responses_in(contents: tuple[Content, ...]) -> dict[str, dict[str, object]]:
    """Every tool response the model was shown, by call id."""
    return {
        part.id: dict(part.response)
        for content in contents
        for part in content.parts
        if isinstance(part, FunctionResponse)
    }


async def test_tools_that_ran_before_the_turn_limit_are_recorded_as_run(tmp_path: Path) -> None:
    """The turn limit stops the query after its tools ran: the next query's request tells
    the model what those tools did (the memory was saved), never "not run"; the
    ``max_turns`` event reports the real limit."""
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    main = ScriptedModel(name="main")
    main.add_turn("", [SAVE])
    main.add_turn("second answer")
    agent = Agent(AgentClient(model=main), ToolRegistry(tmp_path, memory_store=store), max_turns=1)

    first = await collect(agent.run_query("remember that I like tabs"))
    second = await agent.ask("what do you remember?")

    limits = [e for e in first if isinstance(e, MaxTurnsEvent)]
    assert [e.limit for e in limits] == [1]
    assert [d.name for d in store.scan()] == ["style"]  # the tool really ran
    shown = responses_in(main.requests[1].contents)
    assert shown == {"s1": {"saved": store.get("style").rel_path}}
    assert second.text == "second answer"
    await agent.client.aclose()


async def test_a_consumer_that_stops_after_the_tools_leaves_their_results_in_history(
    tmp_path: Path,
) -> None:
    """Leaving the agent loop once the tools ran (a consumer that stops early) still
    records what they returned."""
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    main = ScriptedModel(name="main")
    main.add_turn("", [SAVE])
    main.add_turn("next")
    agent = Agent(AgentClient(model=main), ToolRegistry(tmp_path, memory_store=store))

    stream = agent.run_query("remember tabs")
    async for event in stream:
        if isinstance(event, ToolResultEvent):
            break
    await stream.aclose()
    await agent.ask("and now?")

    assert responses_in(main.requests[1].contents) == {"s1": {"saved": store.get("style").rel_path}}
    await agent.client.aclose()


async def test_calls_that_never_ran_are_said_not_run(tmp_path: Path) -> None:
    """A turn ended by loop detection leaves its calls unrun: the next request says so."""
    main = ScriptedModel(name="main")
    call = FunctionCall("c1", "list_directory", {"path": "."})
    main.add_turn("", [call])
    main.add_turn("fine")
    client = AgentClient(model=main, options=ClientOptions(loop_threshold=1))
    agent = Agent(client, ToolRegistry(tmp_path))

    first = await collect(agent.run_query("list"))
    await agent.ask("again")

    assert "loop_detected" in types(first) and "tool_result" not in types(first)
    assert "not run" in str(responses_in(main.requests[1].contents)["c1"]["error"])
    await client.aclose()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
async def test_ctrl_c_while_tools_run_reaches_them_and_the_history_says_what_happened(
    tmp_path: Path,
) -> None:
    """The caller's cancel reaches running tools: a read-only tool stops part-way (and says
    nothing changed), a write not started yet is not run; the turn ends cancelled
    without a request, and the next request shows the model both results."""
    project = tmp_path / "project"
    project.mkdir()
    os.mkfifo(project / "a.fifo")  # grep blocks reading it until the test writes
    (project / "b.txt").write_text("needle\n")
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    grep = FunctionCall("g1", "grep_search", {"pattern": "needle"})
    main = ScriptedModel(name="main")
    main.add_turn("", [grep, SAVE])
    main.add_turn("after the cancel")
    agent = Agent(AgentClient(model=main), ToolRegistry(project, memory_store=store))
    cancel = CancelSignal()
    loop = asyncio.get_running_loop()

    def press_ctrl_c_while_grep_reads() -> None:
        with open(project / "a.fifo", "wb"):  # returns once grep has opened the pipe
            asyncio.run_coroutine_threadsafe(_cancel(cancel), loop).result(timeout=30)
        # closing the pipe lets grep go on: it must see the cancel at the next file

    presser = threading.Thread(target=press_ctrl_c_while_grep_reads, daemon=True)
    presser.start()
    events = await collect(agent.run_query("find the needle", cancel=cancel))
    presser.join(timeout=30)
    await agent.ask("what happened?")

    results = {e.id: e for e in events if isinstance(e, ToolResultEvent)}
    assert not results["g1"].ok and "nothing changed" in str(results["g1"].error)
    assert not results["s1"].ok and "not run" in str(results["s1"].error)
    assert store.scan() == []  # the write never started
    assert types(events)[-2:] == ["cancelled", "finished"]
    assert types(events).count("request_sent") == 1  # no request after the cancel
    shown = responses_in(main.requests[1].contents)
    assert "nothing changed" in str(shown["g1"]["error"])
    assert "not run" in str(shown["s1"]["error"])
    await agent.client.aclose()


async def _cancel(signal: CancelSignal) -> None:
    signal.cancel("user")

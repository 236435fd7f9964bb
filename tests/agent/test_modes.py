"""The recall modes beyond the plain design, and the agent loop around the client."""

from __future__ import annotations

import asyncio
from pathlib import Path

from asyncrecall import CancelSignal
from asyncrecall.agent import Agent, AgentClient, ClientOptions, MemoryInjectedEvent, ToolRegistry
from asyncrecall.memory import FolderStore, LexicalSelector, ModelSelector, Recaller
from asyncrecall.models import FunctionCall
from asyncrecall.testing import ScriptedModel

from .conftest import collect, last_user, memory_texts, selection, tool_result, types, user_query

CALL = FunctionCall("c1", "read_file", {"path": "a.py"})


async def release_when_asked(side: ScriptedModel, gate: asyncio.Event) -> None:
    """Let the side query answer as soon as it has been asked (no sleeps, no timing)."""
    await side.wait_until(lambda m: m.json_started == 1)
    gate.set()


def client_for(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, **options: object
) -> AgentClient:
    instant = LexicalSelector() if options.get("recall_mode") == "async+lexical" else None
    return AgentClient(
        model=main,
        memory=Recaller(store, ModelSelector(side, fallback=None)),
        options=ClientOptions(**options),  # type: ignore[arg-type]
        instant_selector=instant,
    )


async def test_blocking_mode_waits_for_the_recall_and_uses_it_at_the_user_query(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """The old design, kept as a baseline: the user-query request waits for the recall."""
    gate = asyncio.Event()
    side.add_json(selection(paths["deploy-flow"]), gate=gate)
    main.add_turn("ok")
    client = client_for(main, side, store, recall_mode="blocking", blocking_deadline=30)

    releaser = asyncio.create_task(release_when_asked(side, gate))
    events = await user_query(client, "deploy?")
    await releaser

    injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
    assert [(e.point, e.paths) for e in injected] == [("user_query", (paths["deploy-flow"],))]
    await client.aclose()


async def test_blocking_mode_gives_up_at_its_deadline_and_never_injects_later(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """Past the deadline the old design sends without memory and drops the recall: no
    memory at the next tool result either (that is what the async design fixes)."""
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn("", [CALL])
    main.add_turn("done")
    client = client_for(main, side, store, recall_mode="blocking", blocking_deadline=0.01)

    events = await user_query(client, "deploy?")
    events += await tool_result(client, [CALL])

    assert "memory_injected" not in types(events)
    assert [e.to_dict()["reason"] for e in events if e.type == "memory_discarded"] == ["cancelled"]
    await client.aclose()
    assert side.json_started == side.json_cancelled


async def test_bounded_wait_uses_a_recall_that_settles_within_the_budget(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """async+wait100: a recall settling during the bounded wait rides on the first request."""
    gate = asyncio.Event()
    side.add_json(selection(paths["user-role"]), gate=gate)
    main.add_turn("ok")
    client = client_for(main, side, store, recall_mode="async+wait100", initial_wait=30)

    releaser = asyncio.create_task(release_when_asked(side, gate))
    events = await user_query(client, "who am I?")
    await releaser

    injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
    assert [e.point for e in injected] == ["user_query"]
    await client.aclose()


async def test_bounded_wait_never_cancels_a_late_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """async+wait100: past the budget the recall keeps running and lands at a tool result."""
    gate = asyncio.Event()
    side.add_json(selection(paths["user-role"]), gate=gate)
    main.add_turn("", [CALL])
    main.add_turn("done")
    client = client_for(main, side, store, recall_mode="async+wait100", initial_wait=0.01)

    events = await user_query(client, "who am I?")
    handle = client.pending_prefetch
    assert handle is not None and not handle.control.cancelled
    gate.set()
    await asyncio.wait({handle.task})
    events += await tool_result(client, [CALL])

    injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
    assert [e.point for e in injected] == ["tool_result"]
    await client.aclose()


async def test_instant_lexical_pass_rides_first_and_the_model_adds_only_new_files(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """async+lexical: the best lexical files go on the first request while the model
    selector runs; its picks, minus what was already sent, arrive at the tool result."""
    gate = asyncio.Event()
    side.add_json(selection(paths["db-testing"], paths["deploy-flow"]), gate=gate)
    main.add_turn("", [CALL])
    main.add_turn("done")
    client = client_for(main, side, store, recall_mode="async+lexical", instant_limit=1)
    await client.warm_memory()  # warm: the instant pass then settles inline

    events = await user_query(client, "how do we deploy to staging?")
    handle = client.pending_prefetch
    assert handle is not None
    gate.set()
    await asyncio.wait({handle.task})
    events += await tool_result(client, [CALL])

    injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
    assert [(e.point, e.strategy) for e in injected] == [
        ("user_query", "instant-lexical"),
        ("tool_result", "model"),
    ]
    assert injected[0].paths == (paths["deploy-flow"],)
    assert injected[1].paths == (paths["db-testing"],)  # deploy-flow was already sent
    second_block = memory_texts(last_user(main.requests[1].contents))[0]
    assert paths["deploy-flow"] not in second_block
    await client.aclose()


async def test_agent_runs_tools_and_sends_their_results_back(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, tmp_path: Path
) -> None:
    """The loop: model turn, tools (really run), tool-result turn, until a plain answer."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.py").write_text("print('hello')\n")
    side.add_json(selection())
    main.add_turn("", [CALL, FunctionCall("c2", "list_directory", {"path": "."})])
    main.add_turn("It prints hello.")
    client = AgentClient(model=main, memory=Recaller(store, ModelSelector(side)))
    agent = Agent(client, ToolRegistry(project))

    result = await agent.ask("what does a.py do?")

    assert result.text == "It prints hello." and result.turns == 2
    assert result.finish_reason == "stop" and result.error is None
    responses = last_user(main.requests[1].contents).function_responses
    assert [r.id for r in responses] == ["c1", "c2"]
    assert responses[0].response["content"] == "print('hello')"
    assert types(result.events).count("tool_result") == 2
    await client.aclose()


async def test_agent_stops_at_the_bound_on_model_turns(main: ScriptedModel, tmp_path: Path) -> None:
    """--max-turns bounds the model turns of one user query."""
    for i in range(3):
        main.add_turn("", [FunctionCall(f"c{i}", "list_directory", {"path": "."})])
    agent = Agent(AgentClient(model=main), ToolRegistry(tmp_path), max_turns=2)

    events = await collect(agent.run_query("loop forever"))

    assert len(main.requests) == 2
    assert types(events)[-3:] == ["max_turns", "error", "finished"]
    assert events[-3].to_dict()["limit"] == 2
    assert events[-1].to_dict()["reason"] == "max_turns"


def test_blocking_sessions_rebuild_the_old_selector(tmp_path: Path) -> None:
    """--recall-mode blocking reproduces the old design: a 1 s selector timeout and no
    fallback, so a timed-out recall delivers nothing (the async design has neither)."""
    from asyncrecall.cli._session import open_session
    from asyncrecall.cli._settings import load_settings

    flags = {"project": str(tmp_path), "memory_dir": str(tmp_path / "m"), "selector": "model"}
    side = ScriptedModel(name="side")
    blocking = open_session(
        load_settings({**flags, "recall_mode": "blocking"}, env={}),
        model=ScriptedModel(name="main"),
        side_model=side,
    )
    selector = blocking.memory.selector if blocking.memory else None
    assert isinstance(selector, ModelSelector)
    assert selector.timeout == 1.0 and selector.fallback is None
    plain = open_session(
        load_settings(flags, env={}), model=ScriptedModel(name="main"), side_model=side
    )
    selector = plain.memory.selector if plain.memory else None
    assert isinstance(selector, ModelSelector) and selector.timeout is None
    assert isinstance(selector.fallback, LexicalSelector)


async def test_instant_lexical_pass_still_rides_when_the_model_picks_nothing(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """async+lexical: a model recall that settled early with nothing to add does not hide
    the instant lexical pass's files."""
    side.add_json(selection())
    main.add_turn("ok")
    client = client_for(main, side, store, recall_mode="async+lexical", instant_limit=1)
    await client.warm_memory()  # warm: the instant pass then settles inline

    events = await user_query(client, "how do we deploy to staging?", settle_first=True)

    injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
    assert [(e.point, e.strategy, e.paths) for e in injected] == [
        ("user_query", "instant-lexical", (paths["deploy-flow"],))
    ]
    await client.aclose()


async def test_a_failing_instant_pass_leaves_the_turn_and_the_model_recall_alone(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """async+lexical: if the instant pass fails, the turn goes on and the model's recall
    still lands."""

    class BrokenInstant(LexicalSelector):
        def rank(self, query: str, docs: object, *, limit: int) -> list[object]:  # type: ignore[override]
            raise OSError("disk on fire")

    side.add_json(selection(paths["deploy-flow"]))
    main.add_turn("ok")
    client = AgentClient(
        model=main,
        memory=Recaller(store, ModelSelector(side, fallback=None)),
        options=ClientOptions(recall_mode="async+lexical"),
        instant_selector=BrokenInstant(),
    )

    events = await user_query(client, "how do we deploy?", settle_first=True)

    injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
    assert [(e.point, e.strategy) for e in injected] == [("user_query", "model")]
    assert types(events)[-1] != "error"
    await client.aclose()


async def test_a_cancel_during_the_blocking_wait_sends_nothing_and_reports_no_request(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """The caller's cancel during the blocking baseline's wait ends the query at once:
    no ``request_sent`` (the latency benchmark's end mark) and no request on the wire."""
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn("never")
    client = client_for(main, side, store, recall_mode="blocking", blocking_deadline=30)
    cancel = CancelSignal()

    async def press_ctrl_c() -> None:
        await side.wait_until(lambda m: m.json_started == 1)
        cancel.cancel("user")

    presser = asyncio.create_task(press_ctrl_c())
    events = await user_query(client, "deploy?", cancel=cancel)
    await presser

    assert "request_sent" not in types(events)
    assert types(events)[-1] == "cancelled"
    assert main.requests == []
    await client.aclose()
    assert side.json_started == side.json_cancelled


def test_hold_recall_is_a_deprecated_name_for_until_request() -> None:
    """``ClientOptions(hold_recall=...)`` still works for one release: it warns and sets
    the one hold there is, the prefetch's ``until_request``."""
    import pytest

    with pytest.warns(DeprecationWarning, match="until_request"):
        options = ClientOptions(hold_recall=0.05)
    assert options.until_request == 0.05

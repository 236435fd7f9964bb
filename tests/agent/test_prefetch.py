"""The guarantees of the asynchronous memory prefetch, one test each.

These are the most important tests of the project: each docstring states the
guarantee the test pins.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from asyncrecall import CancelSignal, ModelServerError
from asyncrecall.agent import (
    Agent,
    AgentClient,
    ClientOptions,
    MemoryInjectedEvent,
    MessageType,
    RequestSentEvent,
    ToolRegistry,
)
from asyncrecall.memory import FolderStore, LexicalSelector, ModelSelector, Recaller
from asyncrecall.models import (
    FunctionCall,
    FunctionResponse,
    Text,
    Usage,
    model_content,
    user_content,
)
from asyncrecall.testing import ScriptedModel

from .conftest import (
    assert_recall_cancelled,
    collect,
    last_user,
    make_client,
    memory_texts,
    selection,
    tool_result,
    types,
    user_query,
)

CALL_A = FunctionCall("call_a", "read_file", {"path": "a.py"})
CALL_B = FunctionCall("call_b", "read_file", {"path": "b.py"})


async def test_injected_at_user_query_when_recall_already_settled(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """A recall that settled before the user-query request is built rides on that request,
    first among the reminders and before the user's own text."""
    side.add_json(selection(paths["db-testing"]))
    main.add_turn("ok")
    client = AgentClient(
        model=main,
        memory=Recaller(store, ModelSelector(side)),
        reminders=[lambda: "<system-reminder>other</system-reminder>"],
    )

    events = await user_query(client, "how do I test the db layer?", settle_first=True)

    injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
    assert [(e.point, e.paths) for e in injected] == [("user_query", (paths["db-testing"],))]
    parts = last_user(main.requests[0].contents).parts
    assert isinstance(parts[0], Text) and "## Relevant memory" in parts[0].text
    assert isinstance(parts[1], Text) and parts[1].text.startswith("<system-reminder>other")
    assert parts[-1] == Text("how do I test the db layer?")
    assert client.surfaced_paths == {paths["db-testing"]}
    await client.aclose()


async def test_user_query_not_blocked_by_a_recall_that_never_settles(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """Requests go out while the side query is still running: nothing awaits the recall,
    and a turn that ends with the recall unsettled counts it as a miss and cancels it."""
    never = asyncio.Event()
    side.add_json(selection(), gate=never)
    main.add_turn("", [CALL_A])
    main.add_turn("answer without memory")
    client = make_client(main, side, store)

    events = await user_query(client, "how do I deploy?")
    await side.wait_until(lambda m: m.json_started == 1)  # running, while the turn is over
    handle = client.pending_prefetch
    assert handle is not None and not handle.settled
    events += await tool_result(client, [CALL_A])

    assert types(events).count("request_sent") == 2
    assert [memory_texts(last_user(r.contents)) for r in main.requests] == [[], []]
    assert [e.to_dict()["reason"] for e in events if e.type == "memory_discarded"] == ["turn_ended"]
    await client.aclose()
    assert side.json_cancelled == 1


async def test_injected_after_every_tool_response_when_recall_settles_later(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """A recall that settles after the user-query request lands at the first tool-result
    request, appended after all the tool responses (two parallel calls here)."""
    gate = asyncio.Event()
    side.add_json(selection(paths["deploy-flow"]), gate=gate)
    main.add_turn("", [CALL_A, CALL_B])
    main.add_turn("done")
    client = make_client(main, side, store)

    first = await user_query(client, "deploy it")
    assert "memory_injected" not in types(first)
    assert client.pending_prefetch is not None  # kept: the turn ended with tool calls pending
    gate.set()
    await asyncio.wait({client.pending_prefetch.task})
    second = await tool_result(client, [CALL_A, CALL_B])

    injected = [e for e in second if isinstance(e, MemoryInjectedEvent)]
    assert [(e.point, e.paths) for e in injected] == [("tool_result", (paths["deploy-flow"],))]
    parts = last_user(main.requests[1].contents).parts
    assert [type(p) for p in parts] == [FunctionResponse, FunctionResponse, Text]
    assert [p.id for p in parts[:2] if isinstance(p, FunctionResponse)] == ["call_a", "call_b"]
    assert "## Relevant memory" in parts[2].text  # type: ignore[union-attr]
    await client.aclose()


async def test_memory_never_injected_twice(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """Once consumed, a handle is gone: later tool-result requests carry no memory."""
    side.add_json(selection(paths["deploy-flow"]))
    main.add_turn("", [CALL_A])
    main.add_turn("", [CALL_B])
    main.add_turn("done")
    client = make_client(main, side, store)

    events = await user_query(client, "deploy it", settle_first=True)
    events += await tool_result(client, [CALL_A])
    events += await tool_result(client, [CALL_B])

    assert types(events).count("memory_injected") == 1
    blocks = [memory_texts(last_user(r.contents)) for r in main.requests]
    assert [len(b) for b in blocks] == [1, 0, 0]
    assert client.pending_prefetch is None
    await client.aclose()


async def test_surfaced_paths_are_excluded_from_the_next_recall_until_reset(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """A path shown to the model is never offered to the selector again in the session;
    reset_chat() clears the surfaced set."""
    side.add_json(selection(paths["db-testing"]))
    side.add_json(selection())
    side.add_json(selection())
    main.add_turn("one")
    main.add_turn("two")
    main.add_turn("three")
    client = make_client(main, side, store)

    await user_query(client, "db tests?", settle_first=True, prompt_id="p1")
    await user_query(client, "db tests again?", settle_first=True, prompt_id="p2")
    assert paths["db-testing"] not in side.json_requests[1].prompt
    assert paths["deploy-flow"] in side.json_requests[1].prompt

    client.reset_chat()
    assert client.surfaced_paths == set()
    await user_query(client, "db tests after reset?", settle_first=True, prompt_id="p3")
    assert paths["db-testing"] in side.json_requests[2].prompt
    await client.aclose()


async def test_new_user_query_cancels_the_previous_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """A second user query cancels the first query's recall (it is for an old question)."""
    never = asyncio.Event()
    side.add_json(selection(), gate=never)
    side.add_json(selection(paths["user-role"]))
    main.add_turn("", [CALL_A])
    main.add_turn("second answer")
    client = make_client(main, side, store)

    await user_query(client, "first question", prompt_id="p1")
    await side.wait_until(lambda m: m.json_started == 1)
    first = client.pending_prefetch
    assert first is not None
    events = await user_query(client, "who am I?", prompt_id="p2", settle_first=True)

    await asyncio.wait({first.task})
    assert first.task.cancelled()  # cancelled, not left to finish for an old question
    assert first.control.cancelled
    discarded = [e.to_dict() for e in events if e.type == "memory_discarded"]
    assert discarded[0]["reason"] == "superseded"
    assert side.json_cancelled == 1
    await client.aclose()


async def test_reset_chat_cancels_the_pending_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """reset_chat() cancels and drops a running recall."""
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn("", [CALL_A])
    client = make_client(main, side, store)
    await user_query(client, "question")
    await side.wait_until(lambda m: m.json_started == 1)
    handle = client.pending_prefetch
    assert handle is not None

    event = client.reset_chat()

    assert event is not None and event.reason == "reset"
    assert client.pending_prefetch is None and handle.control.cancelled
    await asyncio.wait({handle.task})
    assert client.background_tasks == frozenset()
    assert side.json_cancelled == 1
    await client.aclose()


async def test_session_turn_limit_cancels_the_recall_and_sends_nothing(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """Over the session turn limit, nothing is sent and no recall is left running."""
    side.add_json(selection())
    main.add_turn("one")
    client = make_client(main, side, store, max_session_turns=1)
    await user_query(client, "first", prompt_id="p1", settle_first=True)

    events = await user_query(client, "second", prompt_id="p2")

    assert types(events)[-1] == "max_session_turns"
    assert len(main.requests) == 1
    assert client.pending_prefetch is None
    await client.aclose()
    assert client.background_tasks == frozenset()


async def test_bounded_turns_zero_cancels_the_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """turns=0 sends nothing and cancels the recall the user query started."""
    side.add_json(selection(), gate=asyncio.Event())
    client = make_client(main, side, store)

    events = await user_query(client, "question", turns=0)

    assert "memory_recall_started" in types(events)
    assert types(events)[-2:] == ["memory_discarded", "max_turns"]
    assert main.requests == []
    await assert_recall_cancelled(client, side)
    await client.aclose()


async def test_session_token_limit_cancels_the_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """When the last prompt's token count is over the limit, the query stops and its
    recall is cancelled."""
    side.add_json(selection())
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn("big", usage=Usage(prompt_tokens=5_000, completion_tokens=10))
    client = make_client(main, side, store, session_token_limit=1_000)
    await user_query(client, "first", prompt_id="p1", settle_first=True)

    events = await user_query(client, "second", prompt_id="p2")

    assert types(events)[-2:] == ["memory_discarded", "session_token_limit_exceeded"]
    assert len(main.requests) == 1
    await assert_recall_cancelled(client, side)
    await client.aclose()


async def test_stop_signal_cancels_the_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """A supervisor's stop signal (the note's Arena control) ends the query before sending,
    and cancels its recall."""
    side.add_json(selection(), gate=asyncio.Event())
    control = CancelSignal()
    control.cancel("supervisor says stop")
    client = make_client(main, side, store, control=control)

    events = await user_query(client, "question")

    assert types(events)[-2:] == ["memory_discarded", "stopped"]
    assert main.requests == []
    await assert_recall_cancelled(client, side)
    await client.aclose()


async def test_loop_detection_cancels_the_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """The same tool call repeated ends the query as a loop, and cancels the recall."""
    side.add_json(selection(), gate=asyncio.Event())
    for _ in range(3):
        main.add_turn("", [CALL_A])
    client = make_client(main, side, store, loop_threshold=3)

    events = await user_query(client, "question")
    await side.wait_until(lambda m: m.json_started == 1)
    events += await tool_result(client, [CALL_A])
    assert client.pending_prefetch is not None  # still pending between normal tool turns
    events += await tool_result(client, [CALL_A])

    assert types(events)[-2:] == ["memory_discarded", "loop_detected"]
    await assert_recall_cancelled(client, side)
    assert side.json_cancelled == 1
    await client.aclose()


async def test_model_error_cancels_the_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """A model error ends the query with an error event and cancels the recall."""
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn(error=ModelServerError("endpoint answered HTTP 500", status=500))
    client = make_client(main, side, store)

    events = await user_query(client, "question")

    assert types(events)[-2:] == ["memory_discarded", "error"]
    assert client.pending_prefetch is None
    assert client.history == []  # the failed request is not left in the history
    await assert_recall_cancelled(client, side)
    await client.aclose()


async def test_exception_in_the_consumer_cancels_the_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """A consumer that stops iterating early (an exception, a break) still cancels."""
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn("", [CALL_A])
    client = make_client(main, side, store)

    stream = client.send_message_stream("question", CancelSignal(), "p1")
    async for event in stream:
        if event.type == "request_sent":
            break
    await stream.aclose()

    await assert_recall_cancelled(client, side)
    await client.aclose()


async def test_recall_kept_across_a_turn_that_ends_with_tool_calls(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """A turn that ends normally with tool calls pending keeps its running recall."""
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn("", [CALL_A])
    client = make_client(main, side, store)

    events = await user_query(client, "question")

    assert "memory_discarded" not in types(events)
    handle = client.pending_prefetch
    assert handle is not None and not handle.settled and not handle.control.cancelled
    await client.aclose()


async def test_caller_cancel_reaches_the_side_query(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """The caller's cancel signal (Ctrl-C) stops the main stream and the side query."""
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn("never sent", gate=asyncio.Event())
    client = make_client(main, side, store)
    cancel = CancelSignal()

    async def press_ctrl_c() -> None:
        await main.wait_until(lambda m: m.stream_started == 1)
        await side.wait_until(lambda m: m.json_started == 1)
        cancel.cancel("user")

    presser = asyncio.create_task(press_ctrl_c())
    events = await user_query(client, "question", cancel=cancel)
    await presser

    assert types(events)[-2:] == ["memory_discarded", "cancelled"]
    await assert_recall_cancelled(client, side)
    assert side.json_cancelled == 1
    assert main.stream_cancelled == 1
    await client.aclose()


async def test_recall_failure_gives_a_normal_turn(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """A recall that fails (here the side model errors and no fallback finds anything)
    never breaks the turn: the answer arrives without memory."""
    side.add_json(error=ModelServerError("side model down", status=503))
    main.add_turn("fine")
    client = make_client(main, side, store)

    events = await user_query(client, "zzzz qqqq", settle_first=True)

    assert "error" not in types(events)
    assert "".join(e.to_dict().get("text", "") for e in events if e.type == "content") == "fine"
    await client.aclose()


async def test_memory_disabled_means_no_side_query(
    main: ScriptedModel, side: ScriptedModel, tmp_path: Path
) -> None:
    """Without memory (``--no-memory``) there is no recall and no side query at all, even
    with a side model and a model selector configured."""
    from asyncrecall.cli._session import open_session
    from asyncrecall.cli._settings import load_settings

    flags = {"project": str(tmp_path), "memory_dir": str(tmp_path / "m"), "selector": "model"}
    settings = load_settings({**flags, "memory_enabled": False}, env={})
    side.add_json(selection())
    main.add_turn("plain")
    session = open_session(settings, model=main, side_model=side)

    result = await session.agent.ask("question")

    assert result.text == "plain"
    assert "memory_recall_started" not in types(result.events)
    assert side.json_requests == []
    assert "save_memory" not in [tool.name for tool in main.requests[0].tools]
    await session.aclose()


async def test_a_tool_result_request_without_a_handle_is_sent_as_is(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore
) -> None:
    """Tool results are never delayed or reordered when there is no memory to add."""
    main.add_turn("done")
    client = make_client(main, side, store)
    client.history.extend(
        [user_content("look at x"), model_content(FunctionCall("x", "read_file", {"path": "x"}))]
    )
    events = await collect(
        client.send_message_stream(
            [FunctionResponse("x", "read_file", {"output": 1})],
            CancelSignal(),
            "p9",
            MessageType.TOOL_RESULT,
        )
    )
    assert "memory_injected" not in types(events)
    assert [type(p) for p in last_user(main.requests[0].contents).parts] == [FunctionResponse]
    await client.aclose()


async def test_lexical_recall_over_200_files_rides_on_the_first_request(
    main: ScriptedModel, tmp_path: Path
) -> None:
    """With the lexical selector (no network, warm) a recall over 200 files has settled by
    the time the user-query request is built: the memory rides on the very first request,
    and nothing waited for it (the default async mode has no wait at all)."""
    store = FolderStore(tmp_path / "many")
    store.ensure()
    for i in range(199):
        store.save_memory(
            f"note {i}", f"unrelated note number {i}", "project", f"filler {i}", origin="user"
        )
    store.save_memory(
        "kafka", "the event bus is kafka, topic orders-v2", "reference", "k", origin="user"
    )
    main.add_turn("ok")
    memory = Recaller(store, LexicalSelector())
    await memory.warm()  # cold, the scan and tokenising run in a worker thread instead
    client = AgentClient(model=main, memory=memory)

    events = await collect(client.send_message_stream("which kafka topic?", CancelSignal(), "p1"))

    injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
    assert [e.point for e in injected] == ["user_query"]
    assert injected[0].paths[0] == store.get("kafka").rel_path
    assert injected[0].strategy == "lexical"
    assert memory_texts(last_user(main.requests[0].contents))
    await client.aclose()


async def test_a_request_that_fails_does_not_count_its_memory_as_shown(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """Memory injected into a user-query request that then fails never reached the model:
    the request leaves the history and its paths leave the surfaced set."""
    side.add_json(selection(paths["deploy-flow"]))
    main.add_turn(error=ModelServerError("endpoint answered HTTP 500", status=500))
    client = make_client(main, side, store)

    events = await user_query(client, "deploy?", settle_first=True)

    assert "memory_injected" in types(events) and types(events)[-1] == "error"
    assert client.history == [] and client.surfaced_paths == set()
    await client.aclose()


async def test_leaving_the_agent_loop_between_turns_cancels_the_kept_recall(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, tmp_path: Path
) -> None:
    """The recall kept across a turn with tool calls is cancelled when the agent loop is
    left while tools run or between turns (a consumer that stops, the caller's cancel)."""
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn("", [FunctionCall("c1", "list_directory", {"path": "."})])
    client = make_client(main, side, store)
    agent = Agent(client, ToolRegistry(tmp_path))

    stream = agent.run_query("what is here?")
    async for event in stream:
        if event.type == "tool_result":
            assert client.pending_prefetch is not None  # kept across the tool call
            break
    await stream.aclose()

    await assert_recall_cancelled(client, side)
    await client.aclose()


async def test_the_user_query_point_never_hands_the_loop_to_others_first(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """async+lexical, warm: between the user's message and its first request the client
    never yields to the event loop, so work other sessions have queued on the loop
    cannot run first and delay the request, and the instant pass still rides on it."""
    side.add_json(selection(paths["deploy-flow"]), gate=asyncio.Event())  # never answers
    main.add_turn("ok")
    memory = Recaller(store, ModelSelector(side))
    instant = LexicalSelector()
    client = AgentClient(
        model=main,
        memory=memory,
        options=ClientOptions(recall_mode="async+lexical"),
        instant_selector=instant,
    )
    await client.warm_memory()
    others: list[str] = []
    asyncio.get_running_loop().call_soon(others.append, "another session ran")

    stream = client.send_message_stream("how do we deploy to staging?", CancelSignal(), "p1")
    async for event in stream:
        if isinstance(event, RequestSentEvent):
            assert others == []  # the request was built before any other callback ran
            assert event.with_memory
            break
    await stream.aclose()
    await client.aclose()

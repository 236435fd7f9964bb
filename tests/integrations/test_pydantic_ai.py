"""The Pydantic AI capability in Pydantic AI's own agent loop, against the LocalServer.

The main model is Pydantic AI's ``OpenAIChatModel`` pointed at the server; the side query
is asyncrecall's model selector on the same server. Assertions read the wire.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from asyncrecall.integrations import start_recall
from asyncrecall.integrations.pydantic_ai import AsyncRecall
from asyncrecall.memory import MemoryManager, MemoryStore, ModelSelector
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import MemoryRecallStartedEvent, PrefetchEvent, RecallPrefetcher
from asyncrecall.testing import LocalServer, RecordedRequest, Reply

from .conftest import (
    MEMORY_MARK,
    Ending,
    assert_valid_chat,
    main_requests,
    memory_after_tools,
    memory_indexes,
    side_reply,
    side_requests,
    text_of,
)

KEY = "thread-1"


@pytest.fixture
async def client(local_server: LocalServer) -> AsyncIterator[AsyncOpenAI]:
    """The main model's OpenAI client, closed after the test."""
    async with AsyncOpenAI(base_url=local_server.base_url, api_key="test-key") as client:
        yield client


def make_agent(client: AsyncOpenAI, prefetcher: RecallPrefetcher, tool_hook: Any = None) -> Agent:
    model = OpenAIChatModel("main", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, instructions="You are terse.", capabilities=[AsyncRecall(prefetcher)])

    @agent.tool_plain
    async def read_file(path: str) -> str:
        """Read a file."""
        if tool_hook is not None:
            await tool_hook()
        return f"contents of {path}"

    return agent


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[("read_file", {"path": f}) for f in files])


async def test_slow_recall_lands_after_every_tool_message_once(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(a) A side query slower than the first request: that request carries no memory;
    the request after the tool round carries it once, after every tool message, and it
    stays there (persisted in the run's history) on the later requests."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate))
    local_server.script("main", tool_round("a.py", "b.py"), tool_round("c.py"), Reply(text="done"))

    async def release_recall() -> None:  # the test decides when the recall settles
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    agent = make_agent(client, slow, release_recall)
    result = await agent.run("how do I deploy?", conversation_id=KEY)

    assert result.output == "done"
    first, second, third = (r.body["messages"] for r in main_requests(local_server))
    assert memory_indexes(first) == []
    (side,) = side_requests(local_server)
    assert (
        side.finished_at is not None
        and main_requests(local_server)[0].arrived_at < side.finished_at
    )
    memory_after_tools(second)
    assert memory_indexes(third) == memory_indexes(second)  # same place, once
    for messages in (first, second, third):
        assert_valid_chat(messages)
    assert slow.surfaced(KEY) == {paths["deploy-flow"]}


async def test_fast_recall_rides_on_the_first_request(
    local_server: LocalServer, client: AsyncOpenAI, fast: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(b) A recall with no I/O settles within the run's first tick: the first request
    carries the memory, before the user's own text."""
    local_server.script("main", Reply(text="ok"))
    agent = make_agent(client, fast)

    await agent.run("how do deploys reach the staging cluster?", conversation_id=KEY)

    (request,) = main_requests(local_server)
    messages = request.body["messages"]
    (at,) = memory_indexes(messages)
    prompt_at = next(i for i, m in enumerate(messages) if "staging cluster?" in text_of(m))
    assert messages[at]["role"] == "user" and at < prompt_at
    assert paths["deploy-flow"] in fast.surfaced(KEY)
    assert_valid_chat(messages)


@pytest.mark.parametrize("ending", ["returns", "raises", "is cancelled", "is left early"])
async def test_side_query_hangs_up_however_the_run_ends(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, ending: str
) -> None:
    """(c) When the run ends, fails, is cancelled or its iter() loop is left while the
    side query is still out, the server sees the side query's client hang up."""
    end = Ending(local_server, ending)
    agent = make_agent(client, slow)

    async def drive() -> None:
        if ending == "is left early":
            async with agent.iter("question", conversation_id=KEY) as run:
                async for node in run:
                    if Agent.is_call_tools_node(node):  # the model answered: leave
                        break
            return
        await agent.run("question", conversation_id=KEY)

    task = asyncio.create_task(drive())
    side = await end.started()
    if ending == "is cancelled":
        task.cancel()
    await end.finish(task, side, slow, KEY, error=ModelHTTPError)


async def test_second_run_does_not_reoffer_surfaced_files(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(d) The app starts the recall before the run (adopted, not restarted); a second run
    given the first one's history (which keeps the block) never offers the files the
    first one showed, and its request carries the block from that history."""
    local_server.script("side", side_reply(paths["db-testing"]), side_reply())
    local_server.script("main", Reply(text="one"), Reply(text="two"))
    agent = make_agent(client, slow)

    start_recall(slow, KEY, "how do I test the db layer?")  # the message arrived
    assert await slow.wait_settled(KEY, 5)  # (only so the test knows where it lands)
    first = await agent.run("how do I test the db layer?", conversation_id=KEY)
    assert len(side_requests(local_server)) == 1  # adopted: no second side query
    await agent.run(
        "and for the api layer?", conversation_id=KEY, message_history=first.all_messages()
    )

    one, two = side_requests(local_server)
    assert paths["db-testing"] in text_of(one.body["messages"][-1])
    assert paths["db-testing"] not in text_of(two.body["messages"][-1])
    assert paths["deploy-flow"] in text_of(two.body["messages"][-1])
    second_run = main_requests(local_server)[1].body["messages"]
    assert len(memory_indexes(second_run)) == 1  # the first run's block, from history


async def test_framework_accepts_the_injected_history(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(e) What we inject passes Pydantic AI's own validation: the history round-trips
    through ModelMessagesTypeAdapter and feeds a second run, whose wire has one system
    message, no orphan tool message and the memory once."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate), side_reply())
    local_server.script("main", tool_round("a.py"), Reply(text="one"), Reply(text="two"))

    async def release_recall() -> None:
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    agent = make_agent(client, slow, release_recall)
    first = await agent.run("how do I deploy?", conversation_id=KEY)
    history = ModelMessagesTypeAdapter.validate_json(first.all_messages_json())
    await agent.run("thanks", conversation_id=KEY, message_history=history)

    last = main_requests(local_server)[-1].body["messages"]
    assert_valid_chat(last)
    assert [m["role"] for m in last].count("system") == 1
    assert len(memory_indexes(last)) == 1
    assert sum(MEMORY_MARK in str(m) for m in history) == 1


def without_memory(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The history as an app that stores only the chat keeps it: no memory part."""
    kept: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            parts = [p for p in message.parts if MEMORY_MARK not in str(p)]
            message = dataclasses.replace(message, parts=parts)
        kept.append(message)
    return kept


@pytest.mark.parametrize("resent", ["no history", "history without the block"])
async def test_memory_the_app_did_not_resend_is_shown_again(
    resent: str,
    local_server: LocalServer,
    client: AsyncOpenAI,
    slow: RecallPrefetcher,
    paths: dict[str, str],
) -> None:
    """A block counts as shown only while it stays in the history the next call sends:
    when the next run is given a history without it, its files are offered again (a
    recall the app started for that message without them is started again) and the
    next request carries the memory again, once; never neither."""
    db = paths["db-testing"]
    local_server.set_default("side", lambda request: side_reply(db))
    local_server.script("main", Reply(text="one"), tool_round("a.py"), Reply(text="two"))

    async def settle() -> None:  # the second run's recall lands after its tool round
        assert await slow.wait_settled(KEY, 5)

    agent = make_agent(client, slow, settle)
    start_recall(slow, KEY, "how do I test the db layer?")
    assert await slow.wait_settled(KEY, 5)
    first = await agent.run("how do I test the db layer?", conversation_id=KEY)
    assert len(memory_indexes(main_requests(local_server)[0].body["messages"])) == 1
    history = None if resent == "no history" else without_memory(first.all_messages())
    start_recall(slow, KEY, "and for the api layer?")  # the app starts it on arrival
    await agent.run("and for the api layer?", conversation_id=KEY, message_history=history)

    last_side = side_requests(local_server)[-1]
    assert "api layer" in text_of(last_side.body["messages"][-1])
    assert db in text_of(last_side.body["messages"][-1])
    last = main_requests(local_server)[2].body["messages"]  # before or after its tools
    (at,) = memory_indexes(last)
    assert db in text_of(last[at])
    assert_valid_chat(last)


def answer_by_query(server: LocalServer, paths: dict[str, str]) -> None:
    """The side model picks deploy-flow for a question about deploys, else user-role."""

    def pick(request: RecordedRequest) -> Reply:
        asked = text_of(request.body["messages"][-1])
        return side_reply(paths["deploy-flow" if "deploy?" in asked else "user-role"])

    server.set_default("side", pick)


async def test_a_run_cancelled_at_its_first_tick_leaves_no_recall_for_the_next_message(
    local_server: LocalServer,
    client: AsyncOpenAI,
    store: MemoryStore,
    side_model: OpenAIModel,
    paths: dict[str, str],
) -> None:
    """A run cancelled at the loop tick right after it started the recall leaves nothing
    pending: the next message gets its own recall, never the cancelled message's memory."""
    answer_by_query(local_server, paths)
    local_server.script("main", Reply(text="who you are"))
    started = asyncio.Event()

    def on_event(event: PrefetchEvent) -> None:
        if isinstance(event, MemoryRecallStartedEvent):
            started.set()

    memory = MemoryManager(store, ModelSelector(side_model))
    async with RecallPrefetcher(memory, on_event=on_event) as prefetcher:
        agent = make_agent(client, prefetcher)
        task = asyncio.create_task(agent.run("how do I deploy?", conversation_id=KEY))
        await started.wait()  # the run started its recall and is at its one tick
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert prefetcher.pending(KEY) is None
        start_recall(prefetcher, KEY, "what do you know about me?")
        assert await prefetcher.wait_settled(KEY, 5)  # (only so the test knows where it lands)
        await agent.run("what do you know about me?", conversation_id=KEY)

    (request,) = main_requests(local_server)
    messages = request.body["messages"]
    (at,) = memory_indexes(messages)
    assert paths["user-role"] in text_of(messages[at])
    assert paths["deploy-flow"] not in str(messages)


async def test_a_recall_started_for_another_message_is_not_adopted(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """A recall the app started for an earlier message it never ran is not adopted by
    the run of a later message: that run starts its own recall for its own text.

    The run's own recall lands at its tool round (the tool waits for it): nothing orders
    its side query before the first request, which it only usually beats."""
    answer_by_query(local_server, paths)
    local_server.script("main", tool_round("a.py"), Reply(text="ok"))

    async def settle() -> None:
        assert await slow.wait_settled(KEY, 5)

    start_recall(slow, KEY, "how do I deploy?")
    assert await slow.wait_settled(KEY, 5)
    await make_agent(client, slow, settle).run("who am I?", conversation_id=KEY)

    first, last = (r.body["messages"] for r in main_requests(local_server))
    assert paths["deploy-flow"] not in str(first)
    (at,) = memory_indexes(last)
    assert paths["user-role"] in text_of(last[at])
    assert paths["deploy-flow"] not in str(last)

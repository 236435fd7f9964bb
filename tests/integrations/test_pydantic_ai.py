"""The Pydantic AI capability in Pydantic AI's own agent loop, against the LocalServer.

The main model is Pydantic AI's ``OpenAIChatModel`` pointed at the server; the side query
is asyncrecall's model selector on the same server. Assertions read the wire.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from asyncrecall.integrations.pydantic_ai import AsyncRecall
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, Reply

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
    of the same conversation never offers the files the first one showed."""
    local_server.script("side", side_reply(paths["db-testing"]), side_reply())
    local_server.script("main", Reply(text="one"), Reply(text="two"))
    agent = make_agent(client, slow)

    slow.start(KEY, "how do I test the db layer?")  # the message arrived: start at once
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

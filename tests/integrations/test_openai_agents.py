"""The OpenAI Agents SDK adapter in the SDK's own run loop, against the LocalServer.

The main model is the SDK's ``OpenAIChatCompletionsModel`` on an ``AsyncOpenAI`` client
pointed at the server; the side query is asyncrecall's model selector on the same
server. Assertions read the wire. Every run is driven twice: ``run`` and ``run_streamed``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    function_tool,
    set_tracing_disabled,
)
from agents.exceptions import AgentsException
from openai import AsyncOpenAI, BadRequestError

from asyncrecall.integrations import openai_agents as recall
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, Reply

from .conftest import (
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
CONFIG = RunConfig(tracing_disabled=True)


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    """Belt and braces: the SDK never tries to export traces (there is no network)."""
    set_tracing_disabled(True)


@pytest.fixture
async def client(local_server: LocalServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(
        base_url=local_server.base_url, api_key="test-key", max_retries=0
    ) as client:
        yield client


def make_agent(
    client: AsyncOpenAI, tool_hook: Callable[[], Awaitable[None]] | None = None
) -> Agent[Any]:
    @function_tool
    async def read_file(path: str) -> str:
        """Read a file."""
        if tool_hook is not None:
            await tool_hook()
        return f"contents of {path}"

    return Agent(
        name="assistant",
        instructions="You are terse.",
        model=OpenAIChatCompletionsModel("main", client),
        tools=[read_file],
    )


async def drive(
    mode: str, prefetcher: RecallPrefetcher, agent: Agent[Any], text: Any, **kwargs: Any
) -> Any:
    """One run, through ``run`` or through ``run_streamed`` with its events drained."""
    if mode == "run":
        return await recall.run(prefetcher, agent, text, key=KEY, run_config=CONFIG, **kwargs)
    streamed = recall.run_streamed(prefetcher, agent, text, key=KEY, run_config=CONFIG, **kwargs)
    async for _event in streamed.stream_events():
        pass
    return streamed


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[("read_file", {"path": f}) for f in files])


MODES = pytest.mark.parametrize("mode", ["run", "streamed"])


@MODES
async def test_slow_recall_lands_after_every_tool_output_and_stays(
    mode: str,
    local_server: LocalServer,
    client: AsyncOpenAI,
    slow: RecallPrefetcher,
    paths: dict[str, str],
) -> None:
    """(a) A side query slower than the first call: that call carries no memory; the call
    after the tool round carries it once, after every tool message, and every later call
    of the run carries it again at the same place (the SDK keeps no filter output)."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate))
    local_server.script("main", tool_round("a.py", "b.py"), tool_round("c.py"), Reply(text="done"))

    async def release_recall() -> None:
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    result = await drive(mode, slow, make_agent(client, release_recall), "how do I deploy?")

    assert result.final_output == "done"
    first, second, third = (r.body["messages"] for r in main_requests(local_server))
    assert memory_indexes(first) == []
    (side,) = side_requests(local_server)
    assert side.finished_at is not None
    assert main_requests(local_server)[0].arrived_at < side.finished_at
    memory_after_tools(second)
    assert memory_indexes(third) == memory_indexes(second)
    for messages in (first, second, third):
        assert_valid_chat(messages)


@MODES
async def test_fast_recall_rides_on_the_first_call(
    mode: str, local_server: LocalServer, client: AsyncOpenAI, fast: RecallPrefetcher
) -> None:
    """(b) A recall with no I/O has settled by the first model call: the memory goes
    there, before the user's own message."""
    local_server.script("main", Reply(text="ok"))

    await drive(mode, fast, make_agent(client), "how do deploys reach the staging cluster?")

    (request,) = main_requests(local_server)
    messages = request.body["messages"]
    (at,) = memory_indexes(messages)
    prompt_at = next(i for i, m in enumerate(messages) if "staging cluster?" in text_of(m))
    assert messages[at]["role"] == "user" and at < prompt_at
    assert_valid_chat(messages)


@pytest.mark.parametrize(
    ("mode", "ending"),
    [
        ("run", "returns"),
        ("run", "raises"),
        ("run", "is cancelled"),
        ("streamed", "returns"),
        ("streamed", "raises"),
        ("streamed", "is cancelled"),
    ],
)
async def test_side_query_hangs_up_however_the_run_ends(
    mode: str, ending: str, local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher
) -> None:
    """(c) When the run ends, fails or is cancelled (the task, or ``result.cancel()``)
    while the side query is still out, the server sees the side query hang up."""
    end = Ending(local_server, ending)
    agent = make_agent(client)
    streamed = None
    if mode == "streamed":
        streamed = recall.run_streamed(slow, agent, "question", key=KEY, run_config=CONFIG)

        async def consume() -> None:
            assert streamed is not None
            async for _event in streamed.stream_events():
                pass

        task = asyncio.create_task(consume())
    else:
        task = asyncio.create_task(recall.run(slow, agent, "question", key=KEY, run_config=CONFIG))
    side = await end.started()
    if ending == "is cancelled":
        if streamed is not None:
            streamed.cancel()
        else:
            task.cancel()
    await end.finish(
        task,
        side,
        slow,
        KEY,
        error=(BadRequestError, AgentsException),
        cancel_raises=streamed is None,
    )


async def test_second_run_does_not_reoffer_surfaced_files(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(d) The app starts the recall when the message arrives (the run adopts it); the
    next run of the conversation never offers the files the first one showed."""
    local_server.script("side", side_reply(paths["db-testing"]), side_reply())
    local_server.script("main", Reply(text="one"), Reply(text="two"))
    agent = make_agent(client)

    slow.start(KEY, "how do I test the db layer?")
    assert await slow.wait_settled(KEY, 5)
    first = await recall.run(slow, agent, "how do I test the db layer?", key=KEY, run_config=CONFIG)
    assert len(side_requests(local_server)) == 1  # adopted, not restarted
    history = [*first.to_input_list(), {"role": "user", "content": "and for the api layer?"}]
    await recall.run(slow, agent, history, key=KEY, run_config=CONFIG)

    one, two = side_requests(local_server)
    assert paths["db-testing"] in text_of(one.body["messages"][-1])
    assert "api layer" in text_of(two.body["messages"][-1])
    assert paths["db-testing"] not in text_of(two.body["messages"][-1])
    assert paths["deploy-flow"] in text_of(two.body["messages"][-1])


async def test_sdk_accepts_what_we_inject(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(e) The SDK's own input handling accepts the injected item: the run's input list
    round-trips into a second run (our block is not saved in it, by design), and every
    request on the wire has one system message and no orphan tool message."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate), side_reply())
    local_server.script("main", tool_round("a.py"), Reply(text="one"), Reply(text="two"))

    async def release_recall() -> None:
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    agent = make_agent(client, release_recall)
    first = await recall.run(slow, agent, "how do I deploy?", key=KEY, run_config=CONFIG)
    history = first.to_input_list()
    assert not any("## Relevant memory" in str(item) for item in history)
    await recall.run(
        slow, agent, [*history, {"role": "user", "content": "thanks"}], key=KEY, run_config=CONFIG
    )

    requests = [r.body["messages"] for r in main_requests(local_server)]
    for messages in requests:
        assert_valid_chat(messages)
        assert [m["role"] for m in messages].count("system") == 1
    assert [len(memory_indexes(m)) for m in requests] == [0, 1, 0]


async def test_a_filter_of_the_app_still_runs_first(
    local_server: LocalServer, client: AsyncOpenAI, fast: RecallPrefetcher
) -> None:
    """The app's own call_model_input_filter runs before ours, and its edits reach the wire."""
    from agents.run_config import CallModelData, ModelInputData

    def shout(data: CallModelData[Any]) -> ModelInputData:
        items = [{"role": "user", "content": "APP NOTE"}, *data.model_data.input]
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    local_server.script("main", Reply(text="ok"))
    config = RunConfig(tracing_disabled=True, call_model_input_filter=shout)
    await recall.run(fast, make_agent(client), "how do deploys work?", key=KEY, run_config=config)

    messages = main_requests(local_server)[0].body["messages"]
    assert any(text_of(m) == "APP NOTE" for m in messages)
    assert len(memory_indexes(messages)) == 1

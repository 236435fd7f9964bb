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
from asyncrecall.integrations import start_recall
from asyncrecall.memory import MemoryManager, MemoryStore, ModelSelector
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import MemoryRecallStartedEvent, PrefetchEvent, RecallPrefetcher
from asyncrecall.testing import LocalServer, RecordedRequest, Reply

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


def answer_by_query(server: LocalServer, paths: dict[str, str]) -> None:
    """The side model picks deploy-flow for a question about deploys, else user-role
    (whichever recall reaches the server first)."""

    def pick(request: RecordedRequest) -> Reply:
        asked = text_of(request.body["messages"][-1])
        return side_reply(paths["deploy-flow" if "deploy?" in asked else "user-role"])

    server.set_default("side", pick)


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


async def test_app_started_recall_is_adopted_and_its_files_offered_again(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(d) The app starts the recall when the message arrives (the run adopts it, no
    second side query); the SDK keeps the block in no history, so the next message's
    recall offers the files the first run showed again, and its request carries them."""
    local_server.script("side", side_reply(paths["db-testing"]), side_reply(paths["db-testing"]))
    local_server.script("main", Reply(text="one"), Reply(text="two"))
    agent = make_agent(client)

    start_recall(slow, KEY, "how do I test the db layer?")
    assert await slow.wait_settled(KEY, 5)
    first = await recall.run(slow, agent, "how do I test the db layer?", key=KEY, run_config=CONFIG)
    assert len(side_requests(local_server)) == 1  # adopted, not restarted
    assert slow.surfaced(KEY) == frozenset()
    history = [*first.to_input_list(), {"role": "user", "content": "and for the api layer?"}]
    await recall.run(slow, agent, history, key=KEY, run_config=CONFIG)

    one, two = side_requests(local_server)
    assert paths["db-testing"] in text_of(one.body["messages"][-1])
    assert "api layer" in text_of(two.body["messages"][-1])
    assert paths["db-testing"] in text_of(two.body["messages"][-1])
    second = main_requests(local_server)[1].body["messages"]
    assert len(memory_indexes(second)) == 1


@pytest.mark.parametrize("history", ["to_input_list", "session"])
async def test_memory_the_sdk_did_not_keep_is_shown_again(
    history: str,
    local_server: LocalServer,
    client: AsyncOpenAI,
    slow: RecallPrefetcher,
    paths: dict[str, str],
) -> None:
    """(e) The SDK's own history (``to_input_list()`` or a Session) does not keep the
    injected item, and accepts what we inject: the next message's request never lacks
    the memory the first run showed, it carries it again (re-offered, re-injected once);
    every request on the wire has one system message and no orphan tool message."""
    from agents import SQLiteSession

    gate = threading.Event()
    deploy = paths["deploy-flow"]
    local_server.script("side", side_reply(deploy, gate=gate), side_reply(deploy))
    local_server.script("main", tool_round("a.py"), Reply(text="one"), Reply(text="two"))

    async def release_recall() -> None:
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    agent = make_agent(client, release_recall)
    session = SQLiteSession("conversation") if history == "session" else None
    first = await recall.run(
        slow, agent, "how do I deploy?", key=KEY, run_config=CONFIG, session=session
    )
    if session is None:
        kept: Any = [*first.to_input_list(), {"role": "user", "content": "and to prod?"}]
    else:
        kept = "and to prod?"
        assert not any("## Relevant memory" in str(i) for i in await session.get_items())
    assert not any("## Relevant memory" in str(item) for item in first.to_input_list())
    await recall.run(slow, agent, kept, key=KEY, run_config=CONFIG, session=session)

    requests = [r.body["messages"] for r in main_requests(local_server)]
    for messages in requests:
        assert_valid_chat(messages)
        assert [m["role"] for m in messages].count("system") == 1
    assert [len(memory_indexes(m)) for m in requests] == [0, 1, 1]
    assert "and to prod?" in text_of(requests[2][-1])
    assert deploy in text_of(side_requests(local_server)[1].body["messages"][-1])
    if session is not None:
        session.close()


async def test_a_run_cancelled_before_it_starts_leaves_no_recall_for_the_next_message(
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
    agent = make_agent(client)
    started = asyncio.Event()

    def on_event(event: PrefetchEvent) -> None:
        if isinstance(event, MemoryRecallStartedEvent):
            started.set()

    memory = MemoryManager(store, ModelSelector(side_model))
    async with RecallPrefetcher(memory, on_event=on_event) as prefetcher:
        task = asyncio.create_task(
            recall.run(prefetcher, agent, "how do I deploy?", key=KEY, run_config=CONFIG)
        )
        await started.wait()  # the run started its recall and is at its one tick
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert prefetcher.pending(KEY) is None

        start_recall(prefetcher, KEY, "what do you know about me?")
        assert await prefetcher.wait_settled(KEY, 5)  # (only so the test knows where it lands)
        await recall.run(
            prefetcher, agent, "what do you know about me?", key=KEY, run_config=CONFIG
        )

    (request,) = main_requests(local_server)
    messages = request.body["messages"]
    (at,) = memory_indexes(messages)
    assert paths["user-role"] in text_of(messages[at])
    assert paths["deploy-flow"] not in str(messages)
    assert "about me" in text_of(side_requests(local_server)[-1].body["messages"][-1])


async def test_a_recall_started_for_another_message_is_not_adopted(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """A recall the app started for an earlier message it never ran is not adopted by
    the run of a later message: that run starts its own recall for its own text.

    The run's own recall lands at its tool round (the tool waits for it): nothing orders
    its side query before the first request, which it only usually beat (a side answer
    50 ms late failed this test every time when it asked for memory there)."""
    answer_by_query(local_server, paths)
    local_server.script("main", tool_round("a.py"), Reply(text="ok"))

    async def settle() -> None:
        assert await slow.wait_settled(KEY, 5)

    start_recall(slow, KEY, "how do I deploy?")
    assert await slow.wait_settled(KEY, 5)
    await recall.run(slow, make_agent(client, settle), "who am I?", key=KEY, run_config=CONFIG)

    first, last = (r.body["messages"] for r in main_requests(local_server))
    assert paths["deploy-flow"] not in str(first)
    (at,) = memory_indexes(last)
    assert paths["user-role"] in text_of(last[at])
    assert paths["deploy-flow"] not in str(last)


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

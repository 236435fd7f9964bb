"""The OpenAI Agents SDK adapter in the SDK's own run loop, against the LocalServer.

The recall contract is the conformance kit's, driven twice (:class:`OpenAIAgentsDriver`:
``recall.run``, and ``recall.run_streamed`` with its events drained, cancelled with
``result.cancel()``); the tests below them are what is the SDK's own. The main model is
the SDK's ``OpenAIChatCompletionsModel`` on an ``AsyncOpenAI`` client pointed at the
server; the side query is asyncrecall's model selector on the same server. Assertions
read the wire.
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
from openai import AsyncOpenAI

from asyncrecall.integrations import openai_agents as recall
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, Reply
from asyncrecall_conformance import ConformanceSuite, Driver, Run, Unsupported

from .conftest import (
    assert_valid_chat,
    main_requests,
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


class OpenAIAgentsDriver(Driver):
    """A run is ``recall.run`` (or ``recall.run_streamed``, its events drained; cancelled
    with ``result.cancel()``); the next message gets ``result.to_input_list()`` plus
    itself as input (no ``revalidate``: the SDK keeps no filter output, so that list
    never holds the block)."""

    def __init__(self, *, streamed: bool) -> None:
        self.streamed = streamed

    async def run(self, run: Run) -> Any:
        if run.key is None:
            raise Unsupported("recall.run takes the conversation key")
        if run.leave_early:
            raise Unsupported("a run is left early only by cancelling it")
        async with AsyncOpenAI(base_url=run.base_url, api_key="-", max_retries=0) as client:
            agent = make_agent(client, run.read_file, model=run.model)
            agent.instructions = run.instructions
            items: Any = run.text
            if run.chat is not None:
                items = [{"role": role, "content": text} for role, text in run.chat]
            elif run.previous is not None:
                items = run.previous.to_input_list()
            if not isinstance(items, str):
                items = [*items, {"role": "user", "content": run.text}]
            if not self.streamed:
                return await recall.run(
                    run.prefetcher, agent, items, key=run.key, run_config=CONFIG
                )
            streamed = recall.run_streamed(
                run.prefetcher, agent, items, key=run.key, run_config=CONFIG
            )
            try:
                async for _event in streamed.stream_events():
                    pass
            except asyncio.CancelledError:
                streamed.cancel()  # the app's way to stop a streamed run
                raise
            return streamed


class TestConformance(ConformanceSuite):
    """The recall contract, through ``recall.run``."""

    @pytest.fixture
    def driver(self) -> Driver:
        return OpenAIAgentsDriver(streamed=False)


class TestConformanceStreamed(ConformanceSuite):
    """The recall contract, through ``recall.run_streamed``."""

    @pytest.fixture
    def driver(self) -> Driver:
        return OpenAIAgentsDriver(streamed=True)


# -- what is the SDK's own ----------------------------------------------------------------


@pytest.fixture
async def client(local_server: LocalServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(
        base_url=local_server.base_url, api_key="test-key", max_retries=0
    ) as client:
        yield client


def make_agent(
    client: AsyncOpenAI,
    read: Callable[[str], Awaitable[str]] | None = None,
    *,
    tool_hook: Callable[[], Awaitable[None]] | None = None,
    model: str = "main",
) -> Agent[Any]:
    @function_tool
    async def read_file(path: str) -> str:
        """Read a file."""
        if read is not None:
            return await read(path)
        if tool_hook is not None:
            await tool_hook()
        return f"contents of {path}"

    return Agent(
        name="assistant",
        instructions="You are terse.",
        model=OpenAIChatCompletionsModel(model, client),
        tools=[read_file],
    )


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[("read_file", {"path": f}) for f in files])


async def test_a_session_does_not_keep_the_block_and_it_is_shown_again(
    local_server: LocalServer,
    client: AsyncOpenAI,
    slow: RecallPrefetcher,
    paths: dict[str, str],
) -> None:
    """A ``Session`` (the SDK's own store of the conversation) does not keep the injected
    item either: the next message, sent with the session, is offered the file again and
    its request carries it once; every request is a valid chat with one system message."""
    from agents import SQLiteSession

    gate = threading.Event()
    deploy = paths["deploy-flow"]
    local_server.script("side", side_reply(deploy, gate=gate), side_reply(deploy))
    local_server.script("main", tool_round("a.py"), "one", tool_round("b.py"), "two")

    async def release_recall() -> None:  # each recall lands by its run's tool round
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    agent = make_agent(client, tool_hook=release_recall)
    session = SQLiteSession("conversation")
    try:
        await recall.run(
            slow, agent, "how do I deploy?", key=KEY, run_config=CONFIG, session=session
        )
        assert not any("## Relevant memory" in str(i) for i in await session.get_items())
        start = len(side_requests(local_server))
        await recall.run(slow, agent, "and to prod?", key=KEY, run_config=CONFIG, session=session)
    finally:
        session.close()

    requests = [r.body["messages"] for r in main_requests(local_server)]
    for messages in requests:
        assert_valid_chat(messages)
        assert [m["role"] for m in messages].count("system") == 1
    assert [len(memory_indexes(m)) for m in requests][1::2] == [1, 1]
    assert all(len(memory_indexes(m)) <= 1 for m in requests)
    assert any("and to prod?" in text_of(m) for m in requests[3])
    (again,) = side_requests(local_server)[start:]
    assert deploy in text_of(again.body["messages"][-1])


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

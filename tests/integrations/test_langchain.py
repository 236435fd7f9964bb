"""The LangChain v1 middleware in ``create_agent``'s own loop (LangGraph), against the
LocalServer.

The recall contract is the conformance kit's (:class:`TestConformance`, driven by
:class:`LangChainDriver`: the middleware's ``ainvoke``, and its ``astream`` to leave a
run early); the tests below it are what is LangChain's own (plain ``agent.ainvoke``
with or without the callback handler, runs without a thread id, the checkpointed
thread). The main model is ``ChatOpenAI`` pointed at the server; the side query is
asyncrecall's model selector on the same server; a checkpointer keeps the thread.
Assertions read the wire.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import openai
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from asyncrecall.integrations import _common
from asyncrecall.integrations.langchain import AsyncRecallMiddleware
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from asyncrecall_conformance import ConformanceSuite, Driver, Run

from .conftest import (
    MEMORY_MARK,
    Ending,
    main_requests,
    memory_indexes,
    side_reply,
    side_requests,
    text_of,
)

KEY = "thread-1"
CONFIG = {"configurable": {"thread_id": KEY}}


class LangChainDriver(Driver):
    """A run is the middleware's ``ainvoke`` (``astream``, left at the model's first
    update, when it is left early) of a ``create_agent`` agent; a conversation with a
    key continues through the checkpointer's thread, one given as the app's chat text
    through an agent without a checkpointer. No ``revalidate``: the checkpointer already
    stores the thread through LangGraph's serialiser, and the next run loads it back."""

    endings = frozenset({"returns", "raises", "is cancelled", "is left early"})

    def __init__(self) -> None:
        self.threads = InMemorySaver()
        # One middleware per prefetcher, kept across the runs of the test (as an app does).
        self.middleware: dict[RecallPrefetcher, AsyncRecallMiddleware] = {}

    async def run(self, run: Run) -> Any:
        middleware = self.middleware.setdefault(
            run.prefetcher, AsyncRecallMiddleware(run.prefetcher)
        )
        async with openai.DefaultAsyncHttpxClient() as http:
            kept = run.key is not None and run.chat is None
            agent = make_agent(
                None,
                http,
                middleware,
                read=run.read_file,
                base_url=run.base_url,
                model=run.model,
                instructions=run.instructions,
                checkpointer=self.threads if kept else None,
            )
            chat = [{"role": role, "content": text} for role, text in run.chat or ()]
            state = {"messages": [*chat, {"role": "user", "content": run.text}]}
            config = {"configurable": {"thread_id": run.key}} if run.key is not None else {}
            if not run.leave_early:
                return await middleware.ainvoke(agent, state, config)
            stream = middleware.astream(agent, state, config, stream_mode="updates")
            async for chunk in stream:
                if "model" in chunk:  # the model answered: leave the stream
                    break
            await stream.aclose()  # type: ignore[attr-defined]
            return None


class TestConformance(ConformanceSuite):
    """The recall contract, in ``create_agent``'s loop."""

    @pytest.fixture
    def driver(self) -> Driver:
        return LangChainDriver()


# -- what is LangChain's own --------------------------------------------------------------


@pytest.fixture
async def http() -> AsyncIterator[Any]:
    """The chat model's HTTP client, closed after the test."""
    async with openai.DefaultAsyncHttpxClient() as client:
        yield client


def make_agent(
    server: LocalServer | None,
    http: Any,
    middleware: AsyncRecallMiddleware,
    tool_hook: Callable[[], Awaitable[None]] | None = None,
    *,
    checkpointer: Any = "memory",
    read: Callable[[str], Awaitable[str]] | None = None,
    base_url: str | None = None,
    model: str = "main",
    instructions: str = "You are terse.",
) -> Any:
    @tool
    async def read_file(path: str) -> str:
        """Read a file."""
        if read is not None:
            return await read(path)
        if tool_hook is not None:
            await tool_hook()
        return f"contents of {path}"

    chat_model = ChatOpenAI(
        model=model,
        base_url=base_url or (server.base_url if server is not None else None),
        api_key="test-key",  # type: ignore[arg-type]
        max_retries=0,
        http_async_client=http,
    )
    return create_agent(
        chat_model,
        tools=[read_file],
        system_prompt=instructions,
        middleware=[middleware],
        checkpointer=InMemorySaver() if checkpointer == "memory" else checkpointer,
    )


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[("read_file", {"path": f}) for f in files])


@pytest.mark.parametrize(
    ("path", "ending"),
    [
        ("plain", "returns"),
        ("callbacks", "raises"),
        ("callbacks", "is cancelled"),
    ],
)
async def test_side_query_hangs_up_without_the_wrappers(
    path: str, ending: str, local_server: LocalServer, http: Any, slow: RecallPrefetcher
) -> None:
    """When an ``agent.ainvoke`` called without the wrappers (the conformance kit drives
    ``ainvoke``/``astream``) ends, fails or is cancelled while the side query is still
    out, the server sees the side query hang up: through the callback handler, or (a
    normal end) ``aafter_agent`` alone."""
    end = Ending(local_server, ending)
    recall = AsyncRecallMiddleware(slow)
    agent = make_agent(local_server, http, recall)

    async def drive() -> None:
        if path == "plain":  # no wrapper, no callbacks: aafter_agent alone
            await agent.ainvoke(user("question"), CONFIG)
        else:
            config = {**CONFIG, "callbacks": [recall.callback_handler()]}
            await agent.ainvoke(user("question"), config)

    task = asyncio.create_task(drive())
    side = await end.started()
    if ending == "is cancelled":
        task.cancel()
    await end.finish(task, side, slow, KEY, error=openai.BadRequestError)


async def test_the_checkpointed_thread_holds_the_block_once_after_the_tool_message(
    local_server: LocalServer, http: Any, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """The block goes into the state, so the checkpointer keeps it: the thread holds only
    valid messages (every ToolMessage answers the AIMessage before it), the block once,
    as a HumanMessage right after the tool message, and the next run of the thread
    leaves it there."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate), side_reply())
    local_server.script("main", tool_round("a.py"), Reply(text="one"), Reply(text="two"))

    async def release_recall() -> None:
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    recall = AsyncRecallMiddleware(slow)
    agent = make_agent(local_server, http, recall, release_recall)
    await recall.ainvoke(agent, user("how do I deploy?"), CONFIG)
    await recall.ainvoke(agent, user("thanks"), CONFIG)

    state = await agent.aget_state(CONFIG)
    thread = state.values["messages"]
    kinds = [type(m) for m in thread]
    human, ai, tool_ = HumanMessage, AIMessage, ToolMessage
    assert kinds == [human, ai, tool_, human, ai, human, ai]
    assert [MEMORY_MARK in str(m.content) for m in thread].count(True) == 1
    assert MEMORY_MARK in str(thread[3].content)  # right after the tool message
    assert paths["deploy-flow"] in str(thread[3].content)


def answer_by_query(server: LocalServer, paths: dict[str, str]) -> None:
    """The side model picks deploy-flow for a question about deploys, else user-role."""

    def pick(request: RecordedRequest) -> Reply:
        asked = text_of(request.body["messages"][-1])
        return side_reply(paths["deploy-flow" if "deploy?" in asked else "user-role"])

    server.set_default("side", pick)


@pytest.mark.parametrize("started_by", ["the run", "the app's prefetcher.start"])
async def test_a_failed_run_without_the_wrapper_leaves_its_recall_to_no_other_message(
    started_by: str,
    local_server: LocalServer,
    http: Any,
    slow: RecallPrefetcher,
    paths: dict[str, str],
) -> None:
    """An agent invoked without the wrapper (or the callback handler) that fails leaves
    its recall pending (started by the run, or by the app with ``prefetcher.start`` and
    adopted by that run); the thread's next message is never given that recall's
    memory: its run starts its own recall, for its own text."""
    answer_by_query(local_server, paths)
    local_server.script(
        "main",
        Reply(status=400, error_message="bad request"),
        tool_round("a.py"),
        Reply(text="who you are"),
    )

    async def settle() -> None:
        assert await slow.wait_settled(KEY, 5)

    recall = AsyncRecallMiddleware(slow)
    agent = make_agent(local_server, http, recall, settle)
    if started_by != "the run":
        slow.start(KEY, "how do I deploy?")
    with pytest.raises(openai.BadRequestError):
        await agent.ainvoke(user("how do I deploy?"), CONFIG)  # no wrapper: nothing cleans up
    assert await slow.wait_settled(KEY, 5)  # the left-over recall has its answer

    await recall.ainvoke(agent, user("what do you know about me?"), CONFIG)

    sent = [r.body["messages"] for r in main_requests(local_server)[1:]]
    assert paths["deploy-flow"] not in str(sent)
    (at,) = memory_indexes(sent[-1])
    assert paths["user-role"] in text_of(sent[-1][at])
    assert "about me" in text_of(side_requests(local_server)[-1].body["messages"][-1])


@pytest.mark.parametrize("path", ["ainvoke", "ainvoke raises", "astream", "plain"])
async def test_runs_without_a_thread_id_leave_no_conversation_behind(
    path: str, local_server: LocalServer, http: Any, fast: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """A run without a ``thread_id`` gets a one-run key, forgotten when the run ends (the
    wrappers' ``finally``, or ``aafter_agent`` for a plain ``agent.ainvoke``): 20 such runs,
    each shown the memory, leave no conversation in the prefetcher and no record in the
    middleware; a thread's conversation and what it was shown stay."""
    if path == "ainvoke raises":
        local_server.script("main", *[Reply(status=400, error_message="bad")] * 20)
    local_server.set_default("main", Reply(text="ok"))
    recall = AsyncRecallMiddleware(fast)
    agent = make_agent(local_server, http, recall, checkpointer=None)
    question = user("how do deploys reach the staging cluster?")

    for _ in range(20):
        if path == "ainvoke":
            await recall.ainvoke(agent, question)
        elif path == "ainvoke raises":
            with pytest.raises(openai.BadRequestError):
                await recall.ainvoke(agent, question)
        elif path == "astream":
            async for _chunk in recall.astream(agent, question, stream_mode="updates"):
                pass
        else:
            await agent.ainvoke(question)

    sent = [r.body["messages"] for r in main_requests(local_server)]
    assert len(sent) == 20 and all(len(memory_indexes(m)) == 1 for m in sent)
    assert len(fast._conversations) == 0
    assert not _common._shown.get(fast)
    assert recall._recalls == {} and recall._generated == set()
    await recall.ainvoke(agent, question, CONFIG)
    assert list(fast._conversations) == [KEY]
    assert fast.surfaced(KEY) == {paths["deploy-flow"]}

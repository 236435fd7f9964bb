"""The LangChain v1 middleware in ``create_agent``'s own loop (LangGraph), against the
LocalServer.

The main model is ``ChatOpenAI`` pointed at the server; the side query is asyncrecall's
model selector on the same server; a checkpointer keeps the thread. Assertions read
the wire.
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

from asyncrecall.integrations import _common, start_recall
from asyncrecall.integrations.langchain import AsyncRecallMiddleware
from asyncrecall.prefetch import RecallPrefetcher
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
CONFIG = {"configurable": {"thread_id": KEY}}


@pytest.fixture
async def http() -> AsyncIterator[Any]:
    """The chat model's HTTP client, closed after the test."""
    async with openai.DefaultAsyncHttpxClient() as client:
        yield client


def make_agent(
    server: LocalServer,
    http: Any,
    middleware: AsyncRecallMiddleware,
    tool_hook: Callable[[], Awaitable[None]] | None = None,
    *,
    checkpointer: Any = "memory",
) -> Any:
    @tool
    async def read_file(path: str) -> str:
        """Read a file."""
        if tool_hook is not None:
            await tool_hook()
        return f"contents of {path}"

    model = ChatOpenAI(
        model="main",
        base_url=server.base_url,
        api_key="test-key",  # type: ignore[arg-type]
        max_retries=0,
        http_async_client=http,
    )
    return create_agent(
        model,
        tools=[read_file],
        system_prompt="You are terse.",
        middleware=[middleware],
        checkpointer=InMemorySaver() if checkpointer == "memory" else checkpointer,
    )


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[("read_file", {"path": f}) for f in files])


async def test_slow_recall_lands_after_every_tool_message_once(
    local_server: LocalServer, http: Any, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(a) A side query slower than the first call: that call carries no memory; the call
    after the tool round carries it once, after every tool message, and it stays in the
    thread's state (checkpointed) for the later calls."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate))
    local_server.script("main", tool_round("a.py", "b.py"), tool_round("c.py"), Reply(text="done"))

    async def release_recall() -> None:
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    recall = AsyncRecallMiddleware(slow)
    agent = make_agent(local_server, http, recall, release_recall)
    result = await recall.ainvoke(agent, user("how do I deploy?"), CONFIG)

    assert result["messages"][-1].content == "done"
    first, second, third = (r.body["messages"] for r in main_requests(local_server))
    assert memory_indexes(first) == []
    (side,) = side_requests(local_server)
    assert side.finished_at is not None
    assert main_requests(local_server)[0].arrived_at < side.finished_at
    memory_after_tools(second)
    assert memory_indexes(third) == memory_indexes(second)
    for messages in (first, second, third):
        assert_valid_chat(messages)


async def test_fast_recall_rides_on_the_first_call(
    local_server: LocalServer, http: Any, fast: RecallPrefetcher
) -> None:
    """(b) A recall with no I/O has settled by the first model call: the user's message
    carries the memory first, then the user's own text."""
    local_server.script("main", Reply(text="ok"))
    recall = AsyncRecallMiddleware(fast)
    agent = make_agent(local_server, http, recall)

    await recall.ainvoke(agent, user("how do deploys reach the staging cluster?"), CONFIG)

    (request,) = main_requests(local_server)
    messages = request.body["messages"]
    (at,) = memory_indexes(messages)
    assert messages[at]["role"] == "user"
    text = text_of(messages[at])
    assert text.index(MEMORY_MARK) < text.index("staging cluster?")
    assert_valid_chat(messages)


@pytest.mark.parametrize(
    ("path", "ending"),
    [
        ("ainvoke", "returns"),
        ("ainvoke", "raises"),
        ("ainvoke", "is cancelled"),
        ("astream", "is left early"),
        ("plain", "returns"),
        ("callbacks", "raises"),
        ("callbacks", "is cancelled"),
    ],
)
async def test_side_query_hangs_up_however_the_run_ends(
    path: str, ending: str, local_server: LocalServer, http: Any, slow: RecallPrefetcher
) -> None:
    """(c) When the run ends, fails, is cancelled or its stream is left while the side
    query is still out, the server sees the side query hang up: through the wrappers'
    ``finally``, the callback handler on a plain ``agent.ainvoke``, or (normal end of a
    plain ``agent.ainvoke``) ``aafter_agent``."""
    end = Ending(local_server, ending)
    recall = AsyncRecallMiddleware(slow)
    agent = make_agent(local_server, http, recall)

    async def drive() -> None:
        if path == "ainvoke":
            await recall.ainvoke(agent, user("question"), CONFIG)
        elif path == "astream":
            stream = recall.astream(agent, user("question"), CONFIG, stream_mode="updates")
            async for chunk in stream:
                if "model" in chunk:  # the model answered: leave the stream
                    break
            await stream.aclose()  # type: ignore[attr-defined]
        elif path == "plain":  # no wrapper, no callbacks: aafter_agent alone
            await agent.ainvoke(user("question"), CONFIG)
        else:
            config = {**CONFIG, "callbacks": [recall.callback_handler()]}
            await agent.ainvoke(user("question"), config)

    task = asyncio.create_task(drive())
    side = await end.started()
    if ending == "is cancelled":
        task.cancel()
    await end.finish(task, side, slow, KEY, error=openai.BadRequestError)


async def test_second_run_does_not_reoffer_surfaced_files(
    local_server: LocalServer, http: Any, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(d) The app starts the recall when the message arrives (the run adopts it); the
    checkpointed thread keeps the block, so the thread's next run never offers the files
    the first one showed, and its request carries the block from the thread."""
    local_server.script("side", side_reply(paths["db-testing"]), side_reply())
    local_server.script("main", Reply(text="one"), Reply(text="two"))
    recall = AsyncRecallMiddleware(slow)
    agent = make_agent(local_server, http, recall)

    start_recall(slow, KEY, "how do I test the db layer?")
    assert await slow.wait_settled(KEY, 5)
    await recall.ainvoke(agent, user("how do I test the db layer?"), CONFIG)
    assert len(side_requests(local_server)) == 1  # adopted, not restarted
    await recall.ainvoke(agent, user("and for the api layer?"), CONFIG)

    one, two = side_requests(local_server)
    assert paths["db-testing"] in text_of(one.body["messages"][-1])
    assert "api layer" in text_of(two.body["messages"][-1])
    assert paths["db-testing"] not in text_of(two.body["messages"][-1])
    assert paths["deploy-flow"] in text_of(two.body["messages"][-1])
    second_run = main_requests(local_server)[1].body["messages"]
    assert len(memory_indexes(second_run)) == 1  # the first run's block, from the thread


async def test_framework_accepts_what_we_inject(
    local_server: LocalServer, http: Any, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """(e) The checkpointed thread holds only valid messages (every ToolMessage answers
    a tool call of the AIMessage before it; our block is a HumanMessage after them) and
    feeds the next run: one system message on the wire, no orphan tool message."""
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
    requests = [r.body["messages"] for r in main_requests(local_server)]
    for messages in requests:
        assert_valid_chat(messages)
        assert [m["role"] for m in messages].count("system") == 1
    assert [len(memory_indexes(m)) for m in requests] == [0, 1, 1]


@pytest.mark.parametrize("shown_at", ["first call", "after tools"])
async def test_memory_the_app_did_not_resend_is_shown_again(
    shown_at: str,
    local_server: LocalServer,
    http: Any,
    slow: RecallPrefetcher,
    paths: dict[str, str],
) -> None:
    """A block counts as shown only while it stays in the history the next call sends:
    an agent without a checkpointer, whose app re-sends its own chat history (without
    the block, shown on the first call or after a tool round), gets the block's files
    offered again and the memory again, once."""
    db = paths["db-testing"]
    gate = threading.Event()
    local_server.script("side", side_reply(db, gate=gate), side_reply(db))
    first_run = [Reply(text="one")] if shown_at == "first call" else [tool_round("x.py"), "one"]
    local_server.script("main", *first_run, tool_round("a.py"), Reply(text="two"))

    async def settle() -> None:  # a recall still out lands by this tool round
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    recall = AsyncRecallMiddleware(slow)
    agent = make_agent(local_server, http, recall, settle, checkpointer=None)
    start_recall(slow, KEY, "how do I test the db layer?")
    if shown_at == "first call":
        gate.set()
        assert await slow.wait_settled(KEY, 5)
    await recall.ainvoke(agent, user("how do I test the db layer?"), CONFIG)
    first_sent = main_requests(local_server)[len(first_run) - 1].body["messages"]
    assert len(memory_indexes(first_sent)) == 1
    chat = [
        {"role": "user", "content": "how do I test the db layer?"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "and for the api layer?"},
    ]
    await recall.ainvoke(agent, {"messages": chat}, CONFIG)

    _one, two = side_requests(local_server)
    assert db in text_of(two.body["messages"][-1])
    last = main_requests(local_server)[-1].body["messages"]
    (at,) = memory_indexes(last)
    assert db in text_of(last[at])
    assert_valid_chat(last)


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

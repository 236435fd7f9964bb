"""The Claude Agent SDK adapter in the SDK's real loop: the SDK drives its bundled Claude
Code CLI, pointed at :class:`~asyncrecall.testing.AnthropicServer` (``ANTHROPIC_BASE_URL``,
a dummy key, non-essential traffic off); the side query is asyncrecall's model selector
on the suite's :class:`~asyncrecall.testing.LocalServer`. Assertions read the wire.

:func:`run_claude` is the whole framework side (one user message through the SDK with
the adapter and one tool, ``read_file``, an in-process SDK MCP tool), so a driver of the
conformance kit can wrap it.

The CLI has two wire formats for hook context, chosen by model: for the models it knows
(``claude-sonnet-4-5`` here) a ``<system-reminder>`` text block in the user message, and
after tools inside the last tool result's content; for others (``claude-test-main``) a
``system`` message after the user message or after the tool results. The placement tests
run both.

The SDK leaves one of its anyio message streams unclosed when its ``query`` raises or is
cancelled (a ``ResourceWarning`` from ``MemoryObjectReceiveStream.__del__``): that
warning alone is let through here, and each test collects garbage at its end so it is
raised here, not in a later module's test.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    Message,
    ResultMessage,
    create_sdk_mcp_server,
    tool,
)
from claude_agent_sdk import query as sdk_query

from asyncrecall.integrations import start_recall
from asyncrecall.integrations.claude_agent_sdk import AsyncRecallHooks, memory_context
from asyncrecall.memory import LexicalSelector, MemoryManager, MemoryStore, ModelSelector
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import MemoryBlock, RecallPrefetcher
from asyncrecall.testing import AnthropicServer, LocalServer, RecordedRequest, Reply

from .conftest import MEMORY_MARK, side_reply, side_requests

MAIN = "claude-test-main"
KNOWN = "claude-sonnet-4-5"
FORMATS = {MAIN: "system message", KNOWN: "user message"}
TOOL = "mcp__files__read_file"
ToolHook = Callable[[], Awaitable[None]]

pytestmark = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <function MemoryObjectReceiveStream.__del__"
    ":pytest.PytestUnraisableExceptionWarning"
)


@pytest.fixture(autouse=True)
def _collect_here() -> Iterator[None]:
    yield
    gc.collect()


# -- the framework side ----------------------------------------------------------------


def cli_env(server: AnthropicServer, config_dir: Path) -> dict[str, str]:
    """The CLI's documented settings for a local endpoint and no other traffic."""
    return {
        "ANTHROPIC_BASE_URL": server.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def claude_options(
    server: AnthropicServer,
    folder: Path,
    tool_hook: ToolHook | None = None,
    *,
    model: str = MAIN,
    **extra: Any,
) -> ClaudeAgentOptions:
    """Options for one run: the local server, no built-in tools, one ``read_file`` tool
    (an in-process MCP tool that awaits ``tool_hook`` first), no settings files."""

    @tool("read_file", "Read a file.", {"path": str})
    async def read_file(args: dict[str, Any]) -> dict[str, Any]:
        if tool_hook is not None:
            await tool_hook()
        return {"content": [{"type": "text", "text": f"contents of {args['path']}"}]}

    folder.mkdir(parents=True, exist_ok=True)
    return ClaudeAgentOptions(
        model=model,
        cwd=folder,
        env=cli_env(server, folder / ".claude-config"),
        system_prompt="You are terse.",
        tools=[],
        mcp_servers={"files": create_sdk_mcp_server("files", tools=[read_file])},
        allowed_tools=[TOOL],
        setting_sources=[],
        **extra,
    )


async def run_claude(
    recall: AsyncRecallHooks, options: ClaudeAgentOptions, text: str
) -> list[Message]:
    """One user message through ``recall.query``, every message drained."""
    async with contextlib.aclosing(recall.query(prompt=text, options=options)) as stream:
        return [message async for message in stream]


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[(TOOL, {"path": f}) for f in files], chunk_size=5)


# -- the wire --------------------------------------------------------------------------


def main_requests(server: AnthropicServer, model: str = MAIN) -> list[RecordedRequest]:
    return [r for r in server.requests if r.model == model]


def block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping):
        inner = block.get("text", block.get("content", ""))
        return inner if isinstance(inner, str) else "".join(map(block_text, inner))
    return ""


def text_of(message: Mapping[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(map(block_text, content))


def memory_at(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """(message, content block) of each memory block (inside tool results too)."""
    found = []
    for i, message in enumerate(messages):
        content = message["content"]
        items = [content] if isinstance(content, str) else content
        found += [(i, j) for j, item in enumerate(items) if MEMORY_MARK in block_text(item)]
    return found


def blocks(message: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    content = message["content"]
    return [b for b in content if b.get("type") == kind] if isinstance(content, list) else []


def assert_paired(messages: Sequence[Mapping[str, Any]]) -> None:
    """What the Messages API checks: every ``tool_use`` is answered by a ``tool_result``
    in the very next message, a user message that holds only tool results."""
    for i, message in enumerate(messages):
        calls = {b["id"] for b in blocks(message, "tool_use")}
        if not calls:
            continue
        answer = messages[i + 1]
        assert answer["role"] == "user", answer
        results = blocks(answer, "tool_result")
        assert {b["tool_use_id"] for b in results} == calls
        assert len(results) == len(answer["content"])


def assert_memory_after_tools(
    messages: Sequence[Mapping[str, Any]], at: tuple[int, int], wire_format: str
) -> None:
    """Memory at ``at`` comes after every tool result of the last round: inside the last
    tool result (user-message format) or in the system message right after them."""
    assert_paired(messages)
    results = max(i for i, m in enumerate(messages) if blocks(m, "tool_result"))
    if wire_format == "user message":
        assert at == (results, len(messages[results]["content"]) - 1)
        assert messages[results]["content"][at[1]]["type"] == "tool_result"
    else:
        assert at == (results + 1, 0) and messages[at[0]]["role"] == "system"


def assert_memory_with_the_prompt(
    messages: Sequence[Mapping[str, Any]], at: tuple[int, int], prompt: str, wire_format: str
) -> None:
    """Memory at ``at`` is with the user's message: a block before the user's text in
    it (user-message format), or the system message right after it."""
    (user,) = [i for i, m in enumerate(messages) if prompt in text_of(m)]
    if wire_format == "user message":
        text_at = next(
            j for j, b in enumerate(messages[user]["content"]) if prompt in block_text(b)
        )
        assert at[0] == user and at[1] < text_at
    else:
        assert at[0] == user + 1 and messages[at[0]]["role"] == "system"


# -- fixtures --------------------------------------------------------------------------


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as server:
        yield server


@pytest.fixture
async def slow(store: MemoryStore, local_server: LocalServer) -> AsyncIterator[RecallPrefetcher]:
    """A prefetcher whose recall is a side query to the LocalServer's ``side`` model."""
    async with (
        OpenAIModel(model="side", base_url=local_server.base_url, max_retries=0) as side,
        RecallPrefetcher(MemoryManager(store, ModelSelector(side))) as prefetcher,
    ):
        yield prefetcher


async def assert_drained(prefetcher: RecallPrefetcher) -> None:
    """No recall task is left (a cancelled one leaves the set in its done-callback)."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not prefetcher.tasks


def settle_in_tool(prefetcher: RecallPrefetcher, gate: threading.Event) -> ToolHook:
    """A tool hook: let the side query answer, then wait until the recall settled."""

    async def hook() -> None:
        gate.set()
        for _ in range(500):
            if not prefetcher.tasks:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the recall did not settle")

    return hook


# -- (b) the first request -------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(FORMATS))
async def test_settled_recall_rides_on_the_first_request(
    model: str, anthropic_server: AnthropicServer, fast: RecallPrefetcher, tmp_path: Path
) -> None:
    """(b) A recall settled when the CLI calls ``UserPromptSubmit`` goes into the first
    model request, once, with the user's message (where the CLI's format puts hook
    context), without the block's own wrapper tags (the CLI wraps hook context itself
    and would show ours escaped)."""
    anthropic_server.script(model, Reply(text="ok", chunk_size=2))
    recall = AsyncRecallHooks(fast)
    question = "how do deploys reach staging?"

    messages = await run_claude(
        recall, claude_options(anthropic_server, tmp_path, model=model), question
    )

    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "ok"
    (request,) = main_requests(anthropic_server, model)
    wire = request.body["messages"]
    (at,) = memory_at(wire)
    assert_memory_with_the_prompt(wire, at, question, FORMATS[model])
    memory = block_text(wire[at[0]]["content"][at[1]])
    assert "deploy-flow" in memory
    assert "&lt;system-reminder" not in memory
    assert request.stream


async def test_hooks_alone_in_the_sdks_own_query(
    anthropic_server: AnthropicServer, fast: RecallPrefetcher, tmp_path: Path
) -> None:
    """``recall.options(yours)`` is enough with the SDK's own ``query``: your hooks keep
    running, ours add the memory."""
    anthropic_server.script(MAIN, Reply(text="ok"))
    seen: list[str] = []

    async def mine(input: Any, tool_use_id: str | None, context: Any) -> Any:
        seen.append(input["hook_event_name"])
        return {}

    recall = AsyncRecallHooks(fast)
    options = claude_options(
        anthropic_server, tmp_path, hooks={"UserPromptSubmit": [HookMatcher(hooks=[mine])]}
    )
    async for _message in sdk_query(prompt="how do deploys work?", options=recall.options(options)):
        pass

    assert seen == ["UserPromptSubmit"]
    (request,) = main_requests(anthropic_server)
    assert len(memory_at(request.body["messages"])) == 1


# -- (a) after the tool results ----------------------------------------------------------


@pytest.mark.parametrize("model", sorted(FORMATS))
async def test_slow_recall_lands_after_the_tool_results_once(
    model: str,
    anthropic_server: AnthropicServer,
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    tmp_path: Path,
) -> None:
    """(a) A side query slower than the first request: that request carries no memory;
    the request after the round of two parallel tool calls carries it once, after all
    the round's tool results (calls and results still paired), and later requests keep
    it there (the session's history), never twice."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate))
    anthropic_server.script(
        model, tool_round("a.py", "b.py"), tool_round("c.py"), Reply(text="done")
    )
    recall = AsyncRecallHooks(slow)
    options = claude_options(anthropic_server, tmp_path, settle_in_tool(slow, gate), model=model)

    messages = await run_claude(recall, options, "how do I deploy?")

    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "done"
    first, second, third = (r.body["messages"] for r in main_requests(anthropic_server, model))
    assert memory_at(first) == []
    (side,) = side_requests(local_server)
    assert side.finished_at is not None
    assert main_requests(anthropic_server, model)[0].arrived_at < side.finished_at
    (at,) = memory_at(second)
    assert_memory_after_tools(second, at, FORMATS[model])
    assert paths["deploy-flow"] in block_text(second[at[0]]["content"][at[1]])
    assert memory_at(third) == [at]
    assert_paired(third)
    assert slow.pending(messages[-1].session_id) is None


async def test_instant_pass_rides_first_and_the_recall_follows_the_tools(
    anthropic_server: AnthropicServer,
    local_server: LocalServer,
    store: MemoryStore,
    paths: dict[str, str],
    tmp_path: Path,
) -> None:
    """``UserPromptSubmit`` returns at once with the instant pass's block when the main
    recall has not settled; the main recall then lands after the tool results with the
    files the instant pass did not show."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], paths["user-role"], gate=gate))
    anthropic_server.script(MAIN, tool_round("a.py"), Reply(text="done"))
    async with (
        OpenAIModel(model="side", base_url=local_server.base_url, max_retries=0) as side,
        RecallPrefetcher(
            MemoryManager(store, ModelSelector(side)),
            instant_selector=LexicalSelector(),
            instant_limit=1,
        ) as prefetcher,
    ):
        await prefetcher.warm()
        options = claude_options(anthropic_server, tmp_path, settle_in_tool(prefetcher, gate))
        question = "how do deploys reach staging?"
        await run_claude(AsyncRecallHooks(prefetcher), options, question)

    first, second = (r.body["messages"] for r in main_requests(anthropic_server))
    (instant,) = memory_at(first)
    assert_memory_with_the_prompt(first, instant, question, FORMATS[MAIN])
    assert paths["deploy-flow"] in text_of(first[instant[0]])
    kept, after_tools = memory_at(second)
    assert kept == instant
    assert_memory_after_tools(second, after_tools, FORMATS[MAIN])
    later = text_of(second[after_tools[0]])
    assert paths["user-role"] in later and paths["deploy-flow"] not in later


# -- (c) every end hangs the side query up -----------------------------------------------


# Cancelling the task that reads the SDK's ``query`` leaves the SDK's own message stream
# unclosed (anyio's ResourceWarning from ``claude_agent_sdk._internal.query``), about one
# run in two; that is the SDK's, not the adapter's.
SDK_LEAKS_ON_CANCEL = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.mark.parametrize(
    "ending",
    [
        "returns",
        "raises",
        "is left early",
        pytest.param("is cancelled", marks=SDK_LEAKS_ON_CANCEL),
    ],
)
async def test_side_query_hangs_up_however_the_run_ends(
    ending: str,
    anthropic_server: AnthropicServer,
    local_server: LocalServer,
    slow: RecallPrefetcher,
    tmp_path: Path,
) -> None:
    """(c) The turn ends (``Stop``), fails on an API error (``StopFailure``), is left
    early (the stream closed after the first message) or its task is cancelled while the
    side query is out: the server sees the side query hang up, and nothing is pending."""
    release = threading.Event()
    local_server.script("side", Reply(hang=True))
    if ending == "raises":
        anthropic_server.script(MAIN, Reply(status=400, error_message="bad", gate=release))
    elif ending == "returns":
        anthropic_server.script(MAIN, Reply(text="ok", gate=release))
    else:  # the turn is still waiting for the model when the stream goes
        anthropic_server.script(MAIN, Reply(hang=True))
    recall = AsyncRecallHooks(slow)
    options = claude_options(anthropic_server, tmp_path)

    async def consume() -> None:
        async with contextlib.aclosing(recall.query(prompt="question", options=options)) as s:
            async for _message in s:
                if ending == "is left early":
                    return

    task = asyncio.create_task(consume())
    side = await local_server.await_for(lambda r: r.model == "side", timeout=30)
    await anthropic_server.await_for(lambda r: r.model == MAIN, timeout=30)
    if ending == "is cancelled":
        task.cancel()
    release.set()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    await local_server.await_disconnected(side)
    await assert_drained(slow)


async def test_hooks_alone_hang_up_on_stop_and_on_api_errors(
    anthropic_server: AnthropicServer,
    local_server: LocalServer,
    slow: RecallPrefetcher,
    tmp_path: Path,
) -> None:
    """(c) Without the stream wrapper, the ``Stop`` and ``StopFailure`` hooks end the
    recall: the side query hangs up when the turn ends and when it fails."""
    recall = AsyncRecallHooks(slow)
    for reply in (Reply(text="ok"), Reply(status=400, error_message="bad")):
        local_server.reset()
        local_server.script("side", Reply(hang=True))
        anthropic_server.script(MAIN, reply)
        options = recall.options(claude_options(anthropic_server, tmp_path))
        with contextlib.suppress(Exception):
            async for _message in sdk_query(prompt="question", options=options):
                pass
        side = await local_server.await_for(lambda r: r.model == "side")
        await local_server.await_disconnected(side)
        await assert_drained(slow)


async def test_interrupt_hangs_up_the_side_query(
    anthropic_server: AnthropicServer,
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    tmp_path: Path,
) -> None:
    """(c) ``client.interrupt()`` fires no hook; the turn's ``ResultMessage`` read through
    ``recall.receive_response`` ends the recall, and the next message of the session is
    answered normally."""
    local_server.script("side", Reply(hang=True))
    anthropic_server.script(MAIN, Reply(hang=True), Reply(text="second"))
    recall = AsyncRecallHooks(slow)
    async with ClaudeSDKClient(
        options=recall.options(claude_options(anthropic_server, tmp_path))
    ) as client:
        await client.query("question")
        side = await local_server.await_for(lambda r: r.model == "side", timeout=30)
        await anthropic_server.await_for(lambda r: r.model == MAIN, timeout=30)
        await client.interrupt()
        ends = [m async for m in recall.receive_response(client) if isinstance(m, ResultMessage)]
        assert ends[-1].subtype == "error_during_execution"
        await local_server.await_disconnected(side)
        await assert_drained(slow)
        local_server.set_default("side", side_reply(paths["user-role"]))
        await client.query("and the user?")
        answers = [m async for m in recall.receive_response(client) if isinstance(m, ResultMessage)]
    assert answers[-1].result == "second"


# -- (d) and (f) across the messages of a session -----------------------------------------


async def test_memory_shown_in_a_session_is_not_offered_again_in_it(
    anthropic_server: AnthropicServer, fast: RecallPrefetcher, tmp_path: Path
) -> None:
    """(d) The CLI keeps the block in the session's history: the session's next message
    on the same topic gets no second copy; a new session (a new ``query``), whose history
    does not hold it, gets it again."""
    anthropic_server.set_default(MAIN, "ok")
    recall = AsyncRecallHooks(fast)
    options = recall.options(claude_options(anthropic_server, tmp_path))
    question = "how do deploys reach staging?"
    async with ClaudeSDKClient(options=options) as client:
        for _ in range(2):
            await client.query(question)
            _ = [m async for m in recall.receive_response(client)]
    await run_claude(recall, claude_options(anthropic_server, tmp_path), question)

    first, second, fresh = (r.body["messages"] for r in main_requests(anthropic_server))
    (shown,) = memory_at(first)
    assert memory_at(second) == [shown]
    assert [m["role"] for m in second[: len(first)]] == [m["role"] for m in first]
    assert len(memory_at(fresh)) == 1


async def test_a_new_message_never_gets_the_previous_messages_recall(
    anthropic_server: AnthropicServer,
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    tmp_path: Path,
) -> None:
    """(f) A recall still out when its turn ends is dropped, and one the app started for
    a message it never ran is not adopted, even settled: the next messages' requests
    carry only their own recall. A recall the app started for the same message is
    adopted (one side query) and rides on its first request."""
    held = threading.Event()

    def pick(request: RecordedRequest) -> Reply:
        asked = request.body["messages"][-1]["content"]
        if "deploy?" in asked:
            return side_reply(paths["deploy-flow"], gate=held)
        return side_reply(paths["user-role"])

    local_server.set_default("side", pick)
    anthropic_server.set_default(MAIN, "ok")
    recall = AsyncRecallHooks(slow, key="thread-1")
    options = recall.options(claude_options(anthropic_server, tmp_path))
    async with ClaudeSDKClient(options=options) as client:
        await client.query("how do I deploy?")
        _ = [m async for m in recall.receive_response(client)]
        held.set()
        start_recall(slow, "thread-1", "how do I deploy?")  # for a message never sent
        assert await slow.wait_settled("thread-1", 5)
        await client.query("who is the user?")
        _ = [m async for m in recall.receive_response(client)]
        start_recall(slow, "thread-1", "and their role?")  # for the message sent next
        assert await slow.wait_settled("thread-1", 5)
        await client.query("and their role?")
        _ = [m async for m in recall.receive_response(client)]

    asked = [r.body["messages"][-1]["content"] for r in side_requests(local_server)]
    assert sum("who is the user?" in a for a in asked) == 1
    assert sum("and their role?" in a for a in asked) == 1
    first, second, third = (r.body["messages"] for r in main_requests(anthropic_server))
    assert memory_at(first) == memory_at(second) == []  # neither settled in time
    (at,) = memory_at(third)
    assert paths["user-role"] in text_of(third[at[0]])
    assert paths["deploy-flow"] not in str(second) + str(third)


# -- the hooks as the SDK calls them ------------------------------------------------------


def hook_input(event: str, session: str, **fields: Any) -> Any:
    base = {"session_id": session, "transcript_path": "", "cwd": ".", "hook_event_name": event}
    return {**base, **fields}


async def test_many_sessions_leave_nothing_behind(store: MemoryStore) -> None:
    """(g) A session per run, many runs: the adapter keeps no record of ended turns, and
    the prefetcher's conversations stay within its bound."""
    async with RecallPrefetcher(
        MemoryManager(store, LexicalSelector()), max_conversations=50
    ) as prefetcher:
        recall = AsyncRecallHooks(prefetcher)
        for n in range(300):
            session = str(uuid.uuid4())
            ask = hook_input("UserPromptSubmit", session, prompt=f"deploys to staging {n}?")
            await recall.user_prompt_submit(ask, None, {"signal": None})
            await recall.stop(
                hook_input("Stop", session, stop_hook_active=False), None, {"signal": None}
            )
        assert len(recall._recalls) == 0
        assert len(prefetcher._conversations) <= 50


async def test_tool_rounds_of_sub_agents_get_no_memory(slow: RecallPrefetcher) -> None:
    """A sub-agent's ``PostToolBatch`` (it carries ``agent_id``) does not take the block:
    its context would go to the sub-agent, not to the user's conversation."""
    recall = AsyncRecallHooks(slow)
    session = "s-1"
    ctx: Any = {"signal": None}
    calls = [{"tool_name": TOOL, "tool_input": {}, "tool_use_id": "t", "tool_response": "x"}]
    ask = hook_input("UserPromptSubmit", session, prompt="how do I deploy?")
    assert await recall.user_prompt_submit(ask, None, ctx) == {}
    pending = slow.pending(session)
    assert pending is not None
    pending.cancel()  # settled (empty), so a take would consume it
    await asyncio.wait({pending.task})
    sub = hook_input("PostToolBatch", session, agent_id="a-1", tool_calls=calls)
    assert await recall.post_tool_batch(sub, None, ctx) == {}
    assert slow.pending(session) is pending
    main = hook_input("PostToolBatch", session, tool_calls=calls)
    assert await recall.post_tool_batch(main, None, ctx) == {}
    assert slow.pending(session) is None


def test_memory_context_drops_only_the_wrapper() -> None:
    """The block goes without its outer tags; a text without them is left as it is."""
    block = MemoryBlock(
        "<system-reminder>\n## Relevant memory\nx\n</system-reminder>", (), "user_query", 0.0, "s"
    )
    assert memory_context(block) == "## Relevant memory\nx"
    plain = MemoryBlock("## Relevant memory\ny", (), "tool_result", 0.0, "s")
    assert memory_context(plain) == plain.text

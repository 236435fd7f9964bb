"""The Claude Agent SDK adapter in the SDK's real loop: the SDK drives its bundled Claude
Code CLI, pointed at :class:`~asyncrecall.testing.AnthropicServer` (``ANTHROPIC_BASE_URL``,
a dummy key, non-essential traffic off); the side query is asyncrecall's model selector
on an OpenAI-compatible server. Assertions read the wire.

The recall contract is the conformance kit's (:class:`ClaudeDriver`, reading the wire
through the kit's ``AnthropicServerWire``); the tests below it are what is the SDK's
own: the hooks alone in the SDK's ``query`` (``Stop``, ``StopFailure``), an interrupt,
the instant pass, sub-agents' tool rounds, the block's wrapper, and the CLI's other
wire format.

The CLI has two wire formats for hook context, chosen by model: for the models it knows
(``claude-sonnet-4-5`` here, the kit's driver) a ``<system-reminder>`` text block in the
user message, and after tools inside the last tool result's content; for others
(``claude-test-main``) a ``system`` message after the user message or after the tool
results, which is no valid chat (the kit's checks reject it), so the placement tests
below run that format on their own.

The SDK leaves one of its anyio message streams unclosed when its ``query`` raises or is
cancelled (a ``ResourceWarning`` from ``MemoryObjectReceiveStream.__del__``): that
warning alone is let through here, and each test collects garbage at its end so it is
raised here, not in a later module's test.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    Message,
    ResultMessage,
    create_sdk_mcp_server,
    tool,
)
from claude_agent_sdk import query as sdk_query

from asyncrecall.integrations.claude_agent_sdk import AsyncRecallHooks, memory_context
from asyncrecall.memory import FolderStore, LexicalSelector, ModelSelector, Recaller
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import MemoryBlock, RecallPrefetcher
from asyncrecall.testing import AnthropicServer, LocalServer, RecordedRequest, Reply
from asyncrecall_conformance import (
    AnthropicServerWire,
    ConformanceSuite,
    Driver,
    Run,
    Unsupported,
    Wire,
)

from .conftest import MEMORY_MARK, side_reply, side_requests

MAIN = "claude-test-main"
KNOWN = "claude-sonnet-4-5"
FORMATS = {MAIN: "system message", KNOWN: "user message"}
TOOLS = "files"
TOOL = f"mcp__{TOOLS}__read_file"
ToolHook = Callable[[], Awaitable[None]]

pytestmark = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <function MemoryObjectReceiveStream.__del__"
    ":pytest.PytestUnraisableExceptionWarning"
)

# Cancelling the task that reads the SDK's ``query`` leaves the SDK's own message stream
# unclosed (anyio's ResourceWarning from ``claude_agent_sdk._internal.query``), about one
# run in two; that is the SDK's, not the adapter's.
SDK_LEAKS_ON_CANCEL = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
CLI_PER_CONVERSATION = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _collect_here() -> Iterator[None]:
    yield
    gc.collect()


# -- the framework side ----------------------------------------------------------------


def cli_env(base_url: str, config_dir: Path) -> dict[str, str]:
    """The CLI's documented settings for a local endpoint and no other traffic."""
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def claude_options(
    base_url: str,
    folder: Path,
    read: Callable[[str], Awaitable[str]] | None = None,
    *,
    tool_hook: ToolHook | None = None,
    model: str = MAIN,
    system_prompt: str = "You are terse.",
    **extra: Any,
) -> ClaudeAgentOptions:
    """Options for one run: the server at ``base_url``, no built-in tools, one
    ``read_file`` tool (an in-process MCP tool: ``read``, or one that awaits
    ``tool_hook`` first), no settings files; the CLI's sessions under ``folder``."""

    @tool("read_file", "Read a file.", {"path": str})
    async def read_file(args: dict[str, Any]) -> dict[str, Any]:
        if read is not None:
            text = await read(args["path"])
        else:
            if tool_hook is not None:
                await tool_hook()
            text = f"contents of {args['path']}"
        return {"content": [{"type": "text", "text": text}]}

    folder.mkdir(parents=True, exist_ok=True)
    return ClaudeAgentOptions(
        model=model,
        cwd=folder,
        env=cli_env(base_url, folder / ".claude-config"),
        system_prompt=system_prompt,
        tools=[],
        mcp_servers={TOOLS: create_sdk_mcp_server(TOOLS, tools=[read_file])},
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


class ClaudeDriver(Driver):
    """A run is ``recall.query`` (the adapter's wrapper of the SDK's ``query``) with a
    model the CLI knows, so its hook context takes the CLI's user-message format, with
    ``AsyncRecallHooks`` made for the run (an app's conversation key, or none).
    The tool is an in-process SDK MCP tool (``mcp__files__read_file`` on the wire). A
    run left early closes the stream at the model's first answer; a run whose turn
    ends on an error (the CLI reports it in the ``ResultMessage``) raises.

    The conversation is the CLI's session: ``previous`` is its id, and the next message
    resumes it (``resume=``), the CLI reading its transcript back from disk (that is
    its serialisation and validation of the history, so no ``revalidate``).

    Not run: the app's own store of the chat text (case ``d-shown-memory-app-chat``).
    The SDK continues a conversation only from the CLI's own transcript (``resume``,
    ``continue_conversation``, or a ``SessionStore`` that mirrors the CLI's entries
    verbatim); there is no way to hand it earlier user and assistant turns as text.
    """

    endings = frozenset({"returns", "raises", "is cancelled", "is left early"})
    server_type = AnthropicServer

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def wire(self, server: LocalServer) -> Wire:
        return AnthropicServerWire(
            server,  # type: ignore[arg-type]  # server_type makes it an AnthropicServer
            model=KNOWN,
            tool_prefix=f"mcp__{TOOLS}__",
        )

    async def run(self, run: Run) -> Any:
        if run.chat:
            raise Unsupported("the SDK takes no history but the CLI's own session transcript")
        recall = AsyncRecallHooks(run.prefetcher, key=run.key)
        options = claude_options(
            run.base_url,
            self.folder,
            run.read_file,
            model=run.model,
            system_prompt=run.instructions,
            resume=run.previous,
        )
        session: str | None = None
        async with contextlib.aclosing(recall.query(prompt=run.text, options=options)) as stream:
            async for message in stream:
                if run.leave_early and isinstance(message, AssistantMessage):
                    return None
                if isinstance(message, ResultMessage):
                    if message.is_error:
                        raise RuntimeError(f"the turn failed: {message.errors or message.result}")
                    session = message.session_id
        return session


class TestConformance(ConformanceSuite):
    """The recall contract, through ``recall.query``."""

    case_marks: ClassVar[Mapping[str, Sequence[pytest.MarkDecorator]]] = {
        "c-hang-up-when-run-is-cancelled": [SDK_LEAKS_ON_CANCEL],
        "f-cancelled-run-leaves-nothing": [SDK_LEAKS_ON_CANCEL],
        # 42 conversations, a CLI process each: they need a longer timeout.
        "g-bounded-memory-with-keys": [CLI_PER_CONVERSATION],
        "g-bounded-memory-without-keys": [CLI_PER_CONVERSATION],
    }

    @pytest.fixture
    def driver(self, tmp_path: Path) -> Driver:
        return ClaudeDriver(tmp_path / "claude")


# -- the wire --------------------------------------------------------------------------


def main_requests(server: AnthropicServer, model: str = MAIN) -> list[Any]:
    return [r for r in server.requests if r.model == model]


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[(TOOL, {"path": f}) for f in files], chunk_size=5)


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


def assert_memory_after_tools(messages: Sequence[Mapping[str, Any]], at: tuple[int, int]) -> None:
    """Memory at ``at`` (the CLI's system-message format) is the system message right
    after the last round's tool results."""
    assert_paired(messages)
    results = max(i for i, m in enumerate(messages) if blocks(m, "tool_result"))
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


# -- the first request and the CLI's two formats --------------------------------------


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
        recall, claude_options(anthropic_server.base_url, tmp_path, model=model), question
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
        anthropic_server.base_url, tmp_path, hooks={"UserPromptSubmit": [HookMatcher(hooks=[mine])]}
    )
    async for _message in sdk_query(prompt="how do deploys work?", options=recall.options(options)):
        pass

    assert seen == ["UserPromptSubmit"]
    (request,) = main_requests(anthropic_server)
    assert len(memory_at(request.body["messages"])) == 1


# -- (a) in the CLI's system-message format ---------------------------------------------


async def test_slow_recall_lands_after_the_tool_results_in_the_system_format(
    anthropic_server: AnthropicServer,
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    tmp_path: Path,
) -> None:
    """(a) In the CLI's system-message format (a model it does not know), which the kit
    does not run: a side query slower than the first request lands after all the tool
    results of the round of two parallel calls, in the system message the CLI puts
    after them (calls and results still paired), and stays there on the next request,
    never twice."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate))
    anthropic_server.script(
        MAIN, tool_round("a.py", "b.py"), tool_round("c.py"), Reply(text="done")
    )
    recall = AsyncRecallHooks(slow)
    hook = settle_in_tool(slow, gate)
    options = claude_options(anthropic_server.base_url, tmp_path, tool_hook=hook)

    messages = await run_claude(recall, options, "how do I deploy?")

    assert isinstance(messages[-1], ResultMessage) and messages[-1].result == "done"
    first, second, third = (r.body["messages"] for r in main_requests(anthropic_server))
    assert memory_at(first) == []
    (side,) = side_requests(local_server)
    assert side.finished_at is not None
    assert main_requests(anthropic_server)[0].arrived_at < side.finished_at
    (at,) = memory_at(second)
    assert_memory_after_tools(second, at)
    assert paths["deploy-flow"] in block_text(second[at[0]]["content"][at[1]])
    assert memory_at(third) == [at]
    assert_paired(third)
    assert slow.pending(messages[-1].session_id) is None


async def test_instant_pass_rides_first_and_the_recall_follows_the_tools(
    anthropic_server: AnthropicServer,
    local_server: LocalServer,
    store: FolderStore,
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
            Recaller(store, ModelSelector(side)),
            instant_selector=LexicalSelector(),
            instant_limit=1,
        ) as prefetcher,
    ):
        await prefetcher.warm()
        options = claude_options(
            anthropic_server.base_url, tmp_path, tool_hook=settle_in_tool(prefetcher, gate)
        )
        question = "how do deploys reach staging?"
        await run_claude(AsyncRecallHooks(prefetcher), options, question)

    first, second = (r.body["messages"] for r in main_requests(anthropic_server))
    (instant,) = memory_at(first)
    assert_memory_with_the_prompt(first, instant, question, FORMATS[MAIN])
    assert paths["deploy-flow"] in text_of(first[instant[0]])
    kept, after_tools = memory_at(second)
    assert kept == instant
    assert_memory_after_tools(second, after_tools)
    later = text_of(second[after_tools[0]])
    assert paths["user-role"] in later and paths["deploy-flow"] not in later


# -- (c) the ends the hooks see alone ---------------------------------------------------


async def test_hooks_alone_hang_up_on_stop_and_on_api_errors(
    anthropic_server: AnthropicServer,
    local_server: LocalServer,
    slow: RecallPrefetcher,
    tmp_path: Path,
) -> None:
    """(c) Without the stream wrapper, the ``Stop`` and ``StopFailure`` hooks end the
    recall: the side query hangs up when the turn ends and when it fails. The main
    model answers only once the side query is out (on a busy machine the turn could
    otherwise end before the held recall sent it, and there would be nothing to hang
    up)."""
    recall = AsyncRecallHooks(slow)
    for reply in (Reply(text="ok"), Reply(status=400, error_message="bad")):
        local_server.reset()
        local_server.script("side", Reply(hang=True))
        side_sent = threading.Event()
        anthropic_server.script(MAIN, dataclasses.replace(reply, gate=side_sent))

        async def side_query(sent: threading.Event) -> RecordedRequest:
            try:
                return await local_server.await_for(lambda r: r.model == "side", timeout=60)
            finally:
                sent.set()  # the turn goes on either way: never a hung test

        sent = asyncio.create_task(side_query(side_sent))
        options = recall.options(claude_options(anthropic_server.base_url, tmp_path))
        with contextlib.suppress(Exception):
            async for _message in sdk_query(prompt="question", options=options):
                pass
        await local_server.await_disconnected(await sent)
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
        options=recall.options(claude_options(anthropic_server.base_url, tmp_path))
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


# -- the hooks as the SDK calls them ------------------------------------------------------


def hook_input(event: str, session: str, **fields: Any) -> Any:
    base = {"session_id": session, "transcript_path": "", "cwd": ".", "hook_event_name": event}
    return {**base, **fields}


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

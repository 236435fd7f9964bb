"""The Google ADK plugin in ADK's own runner (``InMemoryRunner``), against the LocalServer.

The main model is ADK's ``LiteLlm`` (the ``litellm`` package, OpenAI-compatible
provider) pointed at the server over HTTP; the agent has a real tool; the side query is
asyncrecall's model selector on the same server. Assertions read the wire.

:class:`AdkDriver` is everything ADK-specific the cases need (build a runner with the
plugin and a tool, run one user message in a session, end it in the ways ADK has): the
shape of a conformance-kit driver.
"""

from __future__ import annotations

import os

# LiteLLM must not fetch its model cost map from the network when it is first imported.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import litellm
import pytest
from google.adk.agents import LlmAgent, RunConfig
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.run_config import StreamingMode
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.genai import types

from asyncrecall.integrations import start_recall
from asyncrecall.integrations.google_adk import AsyncRecallPlugin
from asyncrecall.memory import LexicalSelector, MemoryManager, MemoryStore, ModelSelector
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from asyncrecall.testing.conformance import assert_memory_after_tools as memory_after_tools

from .conftest import (
    LITELLM_WARNINGS,
    MEMORY_MARK,
    Ending,
    assert_valid_chat,
    main_requests,
    memory_indexes,
    side_reply,
    side_requests,
    text_of,
)

pytestmark = LITELLM_WARNINGS

KEY = "session-1"
USER = "user-1"
APP = "app"


class AdkDriver:
    """One ADK runner with the plugin, a ``read_file`` tool and ``LiteLlm`` on the server."""

    def __init__(
        self,
        server: LocalServer,
        prefetcher: RecallPrefetcher,
        tool_hook: Callable[[], Awaitable[None]] | None = None,
        key: Callable[[InvocationContext], str] | None = None,
    ) -> None:
        async def read_file(path: str) -> str:
            """Read a file."""
            if tool_hook is not None:
                await tool_hook()
            return f"contents of {path}"

        model = LiteLlm(
            model="openai/main", api_base=server.base_url, api_key="test-key", max_retries=0
        )
        agent = LlmAgent(
            name="assistant", model=model, instruction="You are terse.", tools=[read_file]
        )
        self.plugin = AsyncRecallPlugin(prefetcher, key=key)
        app = App(name=APP, root_agent=agent, plugins=[self.plugin])
        self.runner = InMemoryRunner(app=app)

    async def session(self, session_id: str = KEY) -> None:
        service = self.runner.session_service
        if await service.get_session(app_name=APP, user_id=USER, session_id=session_id) is None:
            await service.create_session(app_name=APP, user_id=USER, session_id=session_id)

    def events(self, text: str, session_id: str = KEY, **kwargs: Any) -> AsyncIterator[Event]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return self.runner.run_async(
            user_id=USER, session_id=session_id, new_message=message, **kwargs
        )

    async def run(self, text: str, session_id: str = KEY, **kwargs: Any) -> list[Event]:
        """One user message, run to its end; the events."""
        await self.session(session_id)
        return [event async for event in self.events(text, session_id, **kwargs)]

    async def stored(self, session_id: str = KEY) -> list[Event]:
        session = await self.runner.session_service.get_session(
            app_name=APP, user_id=USER, session_id=session_id
        )
        assert session is not None
        return list(session.events)

    async def aclose(self) -> None:
        await self.runner.close()


@pytest.fixture
async def drivers() -> AsyncIterator[list[AdkDriver]]:
    """Drivers made by a test, closed after it."""
    made: list[AdkDriver] = []
    yield made
    for driver in made:
        await driver.aclose()


@pytest.fixture
def make(local_server: LocalServer, drivers: list[AdkDriver]) -> Callable[..., AdkDriver]:
    def build(
        prefetcher: RecallPrefetcher,
        tool_hook: Callable[[], Awaitable[None]] | None = None,
        key: Callable[[InvocationContext], str] | None = None,
    ) -> AdkDriver:
        driver = AdkDriver(local_server, prefetcher, tool_hook, key)
        drivers.append(driver)
        return driver

    return build


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[("read_file", {"path": f}) for f in files])


def answer_by_query(server: LocalServer, paths: dict[str, str]) -> None:
    """The side model picks deploy-flow for a question about deploys, else user-role."""

    def pick(request: RecordedRequest) -> Reply:
        asked = text_of(request.body["messages"][-1])
        return side_reply(paths["deploy-flow" if "deploy?" in asked else "user-role"])

    server.set_default("side", pick)


def settles(prefetcher: RecallPrefetcher, gate: threading.Event) -> Callable[[], Awaitable[None]]:
    """A tool hook that lets the side query answer and waits until the recall settled:
    the recall is slower than the first request and lands by the next one."""

    async def hook() -> None:
        gate.set()
        assert await prefetcher.wait_settled(KEY, 5)

    return hook


#: litellm's stream handler reads a pydantic attribute pydantic 2.11 deprecated.
LITELLM_STREAM_WARNING = "ignore:Accessing the 'model_(computed_)?fields':DeprecationWarning"


@pytest.mark.parametrize(
    "streaming",
    [False, pytest.param(True, marks=pytest.mark.filterwarnings(LITELLM_STREAM_WARNING))],
)
async def test_slow_recall_lands_after_every_tool_response_once(
    streaming: bool,
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    make: Callable[..., AdkDriver],
) -> None:
    """(a) A side query slower than the first request: that request carries no memory;
    the request after the tool round carries it once, as a user message after every
    tool message (pairing intact), and the later requests of the run carry it at the same
    place (ADK rebuilds each request from the session: the plugin puts it back). Plain
    and streamed (SSE) model calls alike."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate))
    local_server.script("main", tool_round("a.py", "b.py"), tool_round("c.py"), Reply(text="done"))
    driver = make(slow, settles(slow, gate))

    config = RunConfig(streaming_mode=StreamingMode.SSE if streaming else StreamingMode.NONE)
    events = await driver.run("how do I deploy?", run_config=config)

    assert "done" in [p.text for e in events if e.content for p in e.content.parts or ()]
    first, second, third = (r.body["messages"] for r in main_requests(local_server))
    assert memory_indexes(first) == []
    (side,) = side_requests(local_server)
    assert side.finished_at is not None
    assert main_requests(local_server)[0].arrived_at < side.finished_at
    memory_after_tools(second)
    (at,) = memory_indexes(second)
    assert paths["deploy-flow"] in text_of(second[at])
    assert memory_indexes(third) == [at]
    assert third[at] == second[at]
    for messages in (first, second, third):
        assert_valid_chat(messages)
    assert driver.plugin._runs == {}


async def test_settled_recall_rides_first_in_the_first_request(
    local_server: LocalServer, fast: RecallPrefetcher, make: Callable[..., AdkDriver]
) -> None:
    """(b) A recall with no I/O has settled by the first model request: the user's
    message carries the memory first, then the user's own text, in one message."""
    local_server.script("main", Reply(text="ok"))
    driver = make(fast)

    await driver.run("how do deploys reach the staging cluster?")

    (request,) = main_requests(local_server)
    messages = request.body["messages"]
    (at,) = memory_indexes(messages)
    assert messages[at]["role"] == "user" and at == len(messages) - 1
    text = text_of(messages[at])
    assert text.index(MEMORY_MARK) < text.index("staging cluster?")
    content = messages[at]["content"]
    assert MEMORY_MARK in content[0]["text"] and "staging cluster?" in content[1]["text"]
    assert_valid_chat(messages)


@pytest.mark.parametrize(
    "ending", ["returns", "raises", "is cancelled", "is left early", "is aborted"]
)
async def test_side_query_hangs_up_however_the_run_ends(
    ending: str, local_server: LocalServer, slow: RecallPrefetcher, make: Callable[..., AdkDriver]
) -> None:
    """(c) When the run ends (``after_run_callback``), fails (``on_run_error_callback``),
    its task is cancelled (ADK calls no plugin then: the plugin's watch of the task),
    its event stream is closed early or its ``abort_signal`` is set, while the side query
    is still out, the server sees the side query hang up and the plugin keeps nothing;
    but for the cancel, before the task driving the run has ended."""
    end = Ending(local_server, "is cancelled" if ending == "is aborted" else ending)
    driver = make(slow)
    await driver.session()
    abort = asyncio.Event()

    async def hung_up() -> None:
        """While this task still runs: only the plugin's callbacks can have hung up."""
        await local_server.await_disconnected(side_requests(local_server)[0])

    async def drive() -> None:
        kwargs = {"abort_signal": abort} if ending == "is aborted" else {}
        stream = driver.events("question", **kwargs)
        try:
            async for _event in stream:
                if ending == "is left early":
                    break
            await stream.aclose()  # type: ignore[attr-defined]
        except litellm.BadRequestError:
            await hung_up()
            raise
        await hung_up()

    task = asyncio.create_task(drive())
    side = await end.started()
    if ending == "is cancelled":
        task.cancel()
    elif ending == "is aborted":
        abort.set()
    await end.finish(
        task, side, slow, KEY, error=litellm.BadRequestError, cancel_raises=ending != "is aborted"
    )
    assert driver.plugin._runs == {}


async def test_memory_the_session_did_not_keep_is_offered_again(
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    make: Callable[..., AdkDriver],
) -> None:
    """(d) ADK's session keeps no block (the plugin writes none into it): a block counts
    as shown only while the history sent holds it, so the session's next message is
    offered the files again and its request carries the memory again, once; the
    session's events hold no memory."""
    db = paths["db-testing"]
    local_server.script("side", side_reply(db), side_reply(db))
    local_server.script("main", Reply(text="one"), Reply(text="two"))
    driver = make(slow)

    start_recall(slow, KEY, "how do I test the db layer?")
    assert await slow.wait_settled(KEY, 5)
    await driver.run("how do I test the db layer?")
    assert len(side_requests(local_server)) == 1  # the app's recall was adopted
    assert slow.surfaced(KEY) == frozenset()  # the run is over: nothing kept it
    start_recall(slow, KEY, "and for the api layer?")
    assert await slow.wait_settled(KEY, 5)
    await driver.run("and for the api layer?")

    _one, two = side_requests(local_server)
    assert db in text_of(two.body["messages"][-1])  # offered again
    for request in main_requests(local_server):
        messages = request.body["messages"]
        (at,) = memory_indexes(messages)
        assert db in text_of(messages[at])
    assert not any(MEMORY_MARK in str(e.content) for e in await driver.stored())


async def test_memory_the_model_saw_is_not_offered_again_in_the_run(
    local_server: LocalServer,
    store: MemoryStore,
    side_model: OpenAIModel,
    paths: dict[str, str],
    make: Callable[..., AdkDriver],
) -> None:
    """(d) With an instant pass, its block rides on the first request; the slow recall,
    settled by the tool round, lands after the tool results without the files the
    first request already showed: the model is never shown one memory twice."""
    gate = threading.Event()
    deploy, db = paths["deploy-flow"], paths["db-testing"]
    local_server.script("side", side_reply(deploy, db, gate=gate))
    local_server.script("main", tool_round("a.py"), Reply(text="done"))
    memory = MemoryManager(store, ModelSelector(side_model))
    async with RecallPrefetcher(memory, instant_selector=LexicalSelector()) as prefetcher:
        await prefetcher.warm()
        driver = make(prefetcher, settles(prefetcher, gate))
        await driver.run("how do deploys reach the staging cluster?")

    first, second = (r.body["messages"] for r in main_requests(local_server))
    (at,) = memory_indexes(first)
    assert deploy in text_of(first[at])
    blocks = [text_of(second[i]) for i in memory_indexes(second)]
    assert len(blocks) == 2 and deploy in blocks[0]
    assert db in blocks[1] and deploy not in blocks[1]
    assert_valid_chat(second)


async def test_adk_accepts_what_we_inject_and_its_session_stays_clean(
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    make: Callable[..., AdkDriver],
) -> None:
    """(e) ADK sends what the plugin put in (its LiteLLM conversion, its request checks)
    and its session holds only its own events: the next run re-sends the session (tool
    call, tool result, answer) with one system message, no orphan tool message, and no
    memory but its own recall's."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate), side_reply())
    local_server.script("main", tool_round("a.py"), Reply(text="one"), Reply(text="two"))
    driver = make(slow, settles(slow, gate))

    await driver.run("how do I deploy?")
    await driver.run("thanks")

    kinds = []
    for event in await driver.stored():
        parts = event.content.parts or [] if event.content else []
        kinds += [
            "call" if p.function_call else "result" if p.function_response else event.author
            for p in parts
        ]
    assert kinds == ["user", "call", "result", "assistant", "user", "assistant"]
    requests = [r.body["messages"] for r in main_requests(local_server)]
    for messages in requests:
        assert_valid_chat(messages)
        assert [m["role"] for m in messages].count("system") == 1
    assert [len(memory_indexes(m)) for m in requests] == [0, 1, 0]
    assert "thanks" in text_of(requests[2][-1])


async def test_a_new_message_never_gets_the_previous_messages_recall(
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    make: Callable[..., AdkDriver],
) -> None:
    """(f) A recall the app started for a message it never ran is not adopted by the run
    of the next message: that run starts its own recall, for its own text."""
    answer_by_query(local_server, paths)
    local_server.script("main", tool_round("a.py"), Reply(text="ok"))

    async def settle() -> None:  # the run's own recall lands at its tool round
        assert await slow.wait_settled(KEY, 5)

    driver = make(slow, settle)
    start_recall(slow, KEY, "how do I deploy?")
    assert await slow.wait_settled(KEY, 5)
    await driver.run("who am I?")

    messages = main_requests(local_server)[-1].body["messages"]
    (at,) = memory_indexes(messages)
    assert paths["user-role"] in text_of(messages[at])
    assert paths["deploy-flow"] not in str(messages)


async def test_a_cancelled_run_leaves_nothing_for_the_next_message(
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    make: Callable[..., AdkDriver],
) -> None:
    """(f) A run whose task is cancelled while its recall is out (ADK calls no plugin
    then) leaves nothing pending: the session's next message gets its own recall, never
    the cancelled message's memory."""
    gate = threading.Event()
    pick = side_reply(paths["deploy-flow"], gate=gate)
    local_server.script("side", pick, side_reply(paths["user-role"]))
    local_server.script("main", Reply(hang=True), Reply(text="who you are"))
    driver = make(slow)

    task = asyncio.create_task(driver.run("how do I deploy?"))
    await local_server.await_for(lambda r: r.model == "main")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.pending(KEY) is None
    assert driver.plugin._runs == {}
    gate.set()  # the cancelled recall's answer comes now: nobody takes it

    start_recall(slow, KEY, "what do you know about me?")
    assert await slow.wait_settled(KEY, 5)
    await driver.run("what do you know about me?")

    messages = main_requests(local_server)[-1].body["messages"]
    (at,) = memory_indexes(messages)
    assert paths["user-role"] in text_of(messages[at])
    assert paths["deploy-flow"] not in str(messages)


async def test_many_sessions_stay_bounded(
    local_server: LocalServer, store: MemoryStore, make: Callable[..., AdkDriver]
) -> None:
    """(g) 24 sessions, each one message shown the memory, leave the plugin holding no
    run and the prefetcher at most its ``max_conversations``; the task that drove them
    keeps no callback of theirs."""
    local_server.set_default("main", Reply(text="ok"))
    memory = MemoryManager(store, LexicalSelector())
    async with RecallPrefetcher(memory, max_conversations=5) as prefetcher:
        await prefetcher.warm()
        driver = make(prefetcher)
        task = asyncio.current_task()
        assert task is not None
        callbacks = len(task._callbacks or ())  # type: ignore[attr-defined]
        for i in range(24):
            await driver.run("how do deploys reach the staging cluster?", session_id=f"s-{i}")
        assert driver.plugin._runs == {}
        assert len(prefetcher._conversations) <= 5
        assert len(task._callbacks or ()) == callbacks  # type: ignore[attr-defined]

    sent = [r.body["messages"] for r in main_requests(local_server)]
    assert len(sent) == 24 and all(len(memory_indexes(m)) == 1 for m in sent)


async def test_the_key_is_the_session_id_or_the_apps_own(
    local_server: LocalServer, fast: RecallPrefetcher, make: Callable[..., AdkDriver]
) -> None:
    """The conversation key is the session id by default; ``key=`` names another (here
    user and session together), and that key is the one the recall runs under."""
    local_server.set_default("main", Reply(text="ok"))
    question = "how do deploys reach the staging cluster?"
    await make(fast).run(question)
    assert fast.surfaced(KEY) == frozenset()  # shown, then taken back at the run's end
    assert KEY in fast._conversations

    own = make(fast, key=lambda ic: f"{ic.user_id}/{ic.session.id}")
    await own.run(question, session_id="s-2")
    assert f"{USER}/s-2" in fast._conversations and "s-2" not in fast._conversations
    sent = [r.body["messages"] for r in main_requests(local_server)]
    assert [len(memory_indexes(m)) for m in sent] == [1, 1]

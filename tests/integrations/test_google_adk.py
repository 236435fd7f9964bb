"""The Google ADK plugin in ADK's own runner, against the LocalServer.

The recall contract is the conformance kit's, driven twice (:class:`AdkDriver`: model
calls plain, and streamed as SSE); the tests below them are what is ADK's own (the
abort signal, the plugin's callbacks ending the recall before the task that drives the
run does, the instant pass's two anchors, the session keeping no block, the key). The
main model is ADK's ``LiteLlm`` (the ``litellm`` package, OpenAI-compatible provider)
pointed at the server over HTTP; the side query is asyncrecall's model selector on the
same server. Assertions read the wire.
"""

from __future__ import annotations

import os

# LiteLLM must not fetch its model cost map from the network when it is first imported.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import asyncio
import contextlib
import gc
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import litellm
import pytest
from google.adk.agents import LlmAgent, RunConfig
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.run_config import StreamingMode
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner, Runner
from google.adk.sessions import InMemorySessionService, Session
from google.genai import types

from asyncrecall.integrations.google_adk import AsyncRecallPlugin
from asyncrecall.memory import FolderStore, LexicalSelector, ModelSelector, Recaller
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, Reply
from asyncrecall_conformance import (
    ConformanceSuite,
    Driver,
    Run,
    assert_memory_after_tools,
)

from .conftest import (
    LITELLM_WARNINGS,
    MEMORY_MARK,
    assert_valid_chat,
    main_requests,
    memory_indexes,
    side_reply,
    side_requests,
    text_of,
)

KEY = "session-1"
USER = "user-1"
APP = "app"
#: litellm's stream handler reads a pydantic attribute pydantic 2.11 deprecated.
LITELLM_STREAM_WARNING = "ignore:Accessing the 'model_(computed_)?fields':DeprecationWarning"
#: LiteLLM makes its request coroutine (``acompletion``, streamed ``async_streaming``)
#: before it awaits it: a run cancelled between the two (the cancellation cases, plain
#: and streamed) leaves that coroutine of LiteLLM's unawaited, reported when the
#: collector frees it. Only LiteLLM's coroutines, by name: any other unawaited coroutine
#: still fails the test.
LITELLM_UNAWAITED = (
    pytest.mark.filterwarnings(
        r"ignore:coroutine 'OpenAIChatCompletion\.\w+' was never awaited:RuntimeWarning"
    ),
    pytest.mark.filterwarnings(
        r"ignore:Exception ignored in. <coroutine object OpenAIChatCompletion\."
        ":pytest.PytestUnraisableExceptionWarning"
    ),
)
pytestmark = [LITELLM_WARNINGS, *LITELLM_UNAWAITED]


@pytest.fixture(autouse=True)
def _free_here() -> Iterator[None]:
    """Free what a case left unawaited before it ends (where the filters above apply):
    left to the collector, it was reported in whichever test ran next on the worker."""
    yield
    gc.collect()


class AdkDriver(Driver):
    """A run is ``runner.run_async`` of an ``LlmAgent`` (``LiteLlm`` on the kit's server,
    model calls plain or streamed as SSE) in an app with the plugin, one plugin per
    prefetcher kept across the runs (as an app keeps its runner's plugins), its events
    drained; left early by closing the event stream at its first event.

    The conversation is an ADK session of the driver's one ``InMemorySessionService``:
    its id is the conversation key (the plugin's default key), a new one per run when
    the app names none. ``previous`` is that session id: the next message continues
    the session; a first message starts the session afresh, and the app's chat text
    becomes a new session holding those messages as events.
    """

    endings = frozenset({"returns", "raises", "is cancelled", "is left early"})

    def __init__(self, *, streaming: bool = False) -> None:
        self.streaming = streaming
        self.sessions = InMemorySessionService()
        self.plugins: dict[RecallPrefetcher, AsyncRecallPlugin] = {}

    async def run(self, run: Run) -> Any:
        plugin = self.plugins.setdefault(run.prefetcher, AsyncRecallPlugin(run.prefetcher))

        async def read_file(path: str) -> str:
            """Read a file."""
            return await run.read_file(path)

        model = LiteLlm(
            model=f"openai/{run.model}", api_base=run.base_url, api_key="-", max_retries=0
        )
        agent = LlmAgent(
            name="assistant", model=model, instruction=run.instructions, tools=[read_file]
        )
        app = App(name=APP, root_agent=agent, plugins=[plugin])
        runner = Runner(app=app, session_service=self.sessions)
        session_id = run.key if run.key is not None else str(uuid.uuid4())
        if run.previous is None:
            await self._fresh(session_id, run.chat or ())
        mode = StreamingMode.SSE if self.streaming else StreamingMode.NONE
        message = types.Content(role="user", parts=[types.Part(text=run.text)])
        try:
            events = runner.run_async(
                user_id=USER,
                session_id=session_id,
                new_message=message,
                run_config=RunConfig(streaming_mode=mode),
            )
            async with contextlib.aclosing(events):
                async for _event in events:
                    if run.leave_early:
                        break
        finally:
            await runner.close()
        return session_id

    async def revalidate(self, previous: Any) -> Any:
        """The session dumped to JSON, validated back by ADK's ``Session`` model and
        stored again under its id."""
        session = await self._session(previous)
        assert session is not None
        copy = Session.model_validate_json(session.model_dump_json())
        await self._fresh(previous, ())
        stored = await self._session(previous)
        assert stored is not None
        for event in copy.events:
            await self.sessions.append_event(stored, event)
        return previous

    async def _session(self, session_id: str) -> Session | None:
        return await self.sessions.get_session(app_name=APP, user_id=USER, session_id=session_id)

    async def _fresh(self, session_id: str, chat: tuple[tuple[str, str], ...]) -> None:
        """A new session under ``session_id`` holding ``chat`` (the app's chat text)."""
        if await self._session(session_id) is not None:
            await self.sessions.delete_session(app_name=APP, user_id=USER, session_id=session_id)
        session = await self.sessions.create_session(
            app_name=APP, user_id=USER, session_id=session_id
        )
        for role, text in chat:
            author, content_role = ("user", "user") if role == "user" else ("assistant", "model")
            content = types.Content(role=content_role, parts=[types.Part(text=text)])
            await self.sessions.append_event(session, Event(author=author, content=content))


class TestConformance(ConformanceSuite):
    """The recall contract, model calls plain."""

    @pytest.fixture
    def driver(self) -> Driver:
        return AdkDriver()


@pytest.mark.filterwarnings(LITELLM_STREAM_WARNING)
class TestConformanceStreamed(ConformanceSuite):
    """The recall contract, model calls streamed (SSE)."""

    @pytest.fixture
    def driver(self) -> Driver:
        return AdkDriver(streaming=True)


# -- what is ADK's own --------------------------------------------------------------------


class AdkRunner:
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
async def runners() -> AsyncIterator[list[AdkRunner]]:
    """Runners made by a test, closed after it."""
    made: list[AdkRunner] = []
    yield made
    for runner in made:
        await runner.aclose()


@pytest.fixture
def make(local_server: LocalServer, runners: list[AdkRunner]) -> Callable[..., AdkRunner]:
    def build(
        prefetcher: RecallPrefetcher,
        tool_hook: Callable[[], Awaitable[None]] | None = None,
        key: Callable[[InvocationContext], str] | None = None,
    ) -> AdkRunner:
        runner = AdkRunner(local_server, prefetcher, tool_hook, key)
        runners.append(runner)
        return runner

    return build


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[("read_file", {"path": f}) for f in files])


def settles(prefetcher: RecallPrefetcher, gate: threading.Event) -> Callable[[], Awaitable[None]]:
    """A tool hook that lets the side query answer and waits until the recall settled:
    the recall is slower than the first request and lands by the next one."""

    async def hook() -> None:
        gate.set()
        assert await prefetcher.wait_settled(KEY, 5)

    return hook


@pytest.mark.parametrize("ending", ["returns", "raises", "is left early", "is aborted"])
async def test_the_plugins_callbacks_hang_up_before_the_run_task_ends(
    ending: str, local_server: LocalServer, slow: RecallPrefetcher, make: Callable[..., AdkRunner]
) -> None:
    """(c) When the run ends (``after_run_callback``), fails (``on_run_error_callback``),
    its event stream is closed early or its ``abort_signal`` is set while the side query
    is out, the plugin's callbacks hang the side query up while the task that drives the
    run is still running (not the plugin's watch of that task, which is for a cancel,
    when ADK calls no plugin), and the plugin keeps nothing."""
    release = threading.Event()
    local_server.script("side", Reply(hang=True))
    if ending == "raises":
        local_server.script("main", Reply(status=400, error_message="bad", gate=release))
    elif ending == "is aborted":
        local_server.script("main", Reply(hang=True))
    else:
        local_server.script("main", Reply(text="ok", gate=release))
    runner = make(slow)
    await runner.session()
    abort = asyncio.Event()

    async def hung_up() -> None:
        """While this task still runs: only the plugin's callbacks can have hung up."""
        await local_server.await_disconnected(side_requests(local_server)[0])

    async def drive() -> None:
        kwargs = {"abort_signal": abort} if ending == "is aborted" else {}
        async with contextlib.aclosing(runner.events("question", **kwargs)) as stream:
            try:
                async for _event in stream:
                    if ending == "is left early":
                        break
            except litellm.BadRequestError:
                await hung_up()
                raise
        await hung_up()

    task = asyncio.create_task(drive())
    await local_server.await_for(lambda r: r.model == "side")
    await local_server.await_for(lambda r: r.model == "main")
    if ending == "is aborted":
        abort.set()
    release.set()
    if ending == "raises":
        with pytest.raises(litellm.BadRequestError):
            await task
    else:
        await task
    assert slow.pending(KEY) is None
    assert runner.plugin._runs == {}


async def test_instant_pass_rides_first_and_the_recall_follows_the_tools(
    local_server: LocalServer,
    store: FolderStore,
    side_model: OpenAIModel,
    paths: dict[str, str],
    make: Callable[..., AdkRunner],
) -> None:
    """(d) With an instant pass, its block rides on the first request; the slow recall,
    settled by the tool round, lands after the tool results without the files the
    first request already showed, and the first block stays at its place: the model is
    never shown one memory twice."""
    gate = threading.Event()
    deploy, db = paths["deploy-flow"], paths["db-testing"]
    local_server.script("side", side_reply(deploy, db, gate=gate))
    local_server.script("main", tool_round("a.py"), Reply(text="done"))
    memory = Recaller(store, ModelSelector(side_model))
    async with RecallPrefetcher(memory, instant_selector=LexicalSelector()) as prefetcher:
        await prefetcher.warm()
        runner = make(prefetcher, settles(prefetcher, gate))
        await runner.run("how do deploys reach the staging cluster?")

    first, second = (r.body["messages"] for r in main_requests(local_server))
    (at,) = memory_indexes(first)
    assert deploy in text_of(first[at])
    blocks = [text_of(second[i]) for i in memory_indexes(second)]
    assert len(blocks) == 2 and deploy in blocks[0]
    assert db in blocks[1] and deploy not in blocks[1]
    assert memory_indexes(second)[0] == at
    assert_memory_after_tools([m for i, m in enumerate(second) if i != at])
    assert_valid_chat(second)


async def test_the_session_keeps_only_adks_own_events(
    local_server: LocalServer,
    slow: RecallPrefetcher,
    paths: dict[str, str],
    make: Callable[..., AdkRunner],
) -> None:
    """The plugin writes no block into ADK's session (it edits each request's copy of
    the contents): after a run that was shown memory, the session holds the user's
    message, the tool call, its result and the answer, none of them with memory."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate))
    local_server.script("main", tool_round("a.py"), Reply(text="one"))
    runner = make(slow, settles(slow, gate))

    await runner.run("how do I deploy?")

    assert len(memory_indexes(main_requests(local_server)[1].body["messages"])) == 1
    kinds = []
    for event in await runner.stored():
        assert MEMORY_MARK not in str(event.content)
        parts = event.content.parts or [] if event.content else []
        kinds += [
            "call" if p.function_call else "result" if p.function_response else event.author
            for p in parts
        ]
    assert kinds == ["user", "call", "result", "assistant"]


async def test_the_runs_task_keeps_no_callback_of_the_plugin(
    local_server: LocalServer, fast: RecallPrefetcher, make: Callable[..., AdkRunner]
) -> None:
    """The plugin watches the task that drives each run (ADK calls no plugin when it is
    cancelled) and stops watching at the run's end: a task that drives many runs keeps
    no done-callback of theirs, and the plugin no run."""
    local_server.set_default("main", Reply(text="ok"))
    runner = make(fast)
    task = asyncio.current_task()
    assert task is not None
    callbacks = len(task._callbacks or ())  # type: ignore[attr-defined]
    for i in range(12):
        await runner.run("how do deploys reach the staging cluster?", session_id=f"s-{i}")
    assert len(task._callbacks or ()) == callbacks  # type: ignore[attr-defined]
    assert runner.plugin._runs == {}


async def test_the_key_is_the_session_id_or_the_apps_own(
    local_server: LocalServer, fast: RecallPrefetcher, make: Callable[..., AdkRunner]
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

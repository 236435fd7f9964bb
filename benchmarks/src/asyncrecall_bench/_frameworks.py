"""``asyncrecall bench frameworks``: the frameworks' usual memory pattern vs our adapters.

For each framework (Pydantic AI, the OpenAI Agents SDK, LangChain v1, Google ADK, the
Claude Agent SDK), the same seeded plans as ``bench latency``
(:func:`asyncrecall_bench._workload.draw_plans`: side query lognormal mean 0.9 s, 0-3
tool rounds) are played over HTTP by a :class:`LocalServer`
in a child process (so its work and its share of the GIL stay out of the timings)
in the framework's real agent loop, four ways. Each way keeps one side model for all
its queries, as an application does (its kept-alive connections included); each user
message ends with its ``[qid]``, by which the server finds the plan of a side query.

* ``none`` — no memory: the baseline;
* ``hooks`` — the adapter installed, but no recall ever starts: what the framework's hook
  plumbing costs by itself (any memory integration pays it, the awaited one included);
* ``awaited`` — the framework's usual memory pattern, as the mem0 and LangMem guides
  write it: the recall is awaited in the hook before the first model request (a Pydantic
  AI ``before_model_request``, an Agents SDK input filter, a LangChain ``abefore_model``,
  an ADK tool's ``process_llm_request`` as ADK's ``PreloadMemoryTool`` does, a Claude
  Code ``UserPromptSubmit`` hook);
* ``adapter`` — :mod:`asyncrecall.integrations`: the recall starts in the run-start
  hook and is never awaited.

Per query: ``first_request_ms`` — from calling the framework's run to the framework
handing its first main request to the HTTP connection (the client's request hook), as
``bench latency`` times the agent's ``request_sent`` (the Claude Agent SDK's requests
leave from the CLI, a child process: there, to the request's arrival at the server);
``added_ms`` — that minus the same query's ``none`` run (paired, so the framework's own
overhead cancels); ``hook_ms`` — time spent inside memory code in the hooks (the awaited recall; the
adapter's ``start`` and ``take`` calls); ``recall_steps_ms`` — the adapter's background
recall's own steps on the event loop before the first main request was sent (it runs
while the framework works towards that request, so each step delays it: timed by a task
factory that wraps the recall's tasks, nested ones included; for the Claude Agent SDK,
before its run-start hook answered the CLI, which builds and sends the request in its
own process); ``on_path_ms``, their sum:
the memory code's own time on the way to the first request. Where memory
first reached the model on the wire (``user_query`` / ``tool_result`` / ``missed``);
and how many side queries the server saw hung up. The framework packages are imported
only when this benchmark runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from asyncrecall.cli._settings import Settings
from asyncrecall.memory import FolderStore, ModelSelector, Recaller
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall_bench._corpus import build_memory_folder
from asyncrecall_bench._frameworks_driver import SYSTEM, Driver, read_file
from asyncrecall_bench._measure import percentile
from asyncrecall_bench._scale import ChildServer, child_server
from asyncrecall_bench._workload import (
    LatencyProfile,
    QueryPlan,
    draw_plans,
    main_model_name,
    shared_side_model_name,
    tagged_text,
)

__all__ = ["FRAMEWORKS", "PATTERNS", "FrameworksConfig", "Trace", "add_arguments", "measure", "run"]

FRAMEWORKS: Final = ("pydantic-ai", "openai-agents", "langchain", "google-adk", "claude-agent-sdk")
PATTERNS: Final = ("none", "hooks", "awaited", "adapter")
_MARK: Final = "## Relevant memory"
_DEFAULT_QUERIES: Final = 8
_DEFAULT_CONCURRENCY: Final = 4
_DEFAULT_SEED: Final = 5
_WARM_UP: Final = LatencyProfile(
    side_mean=0.01, first_token_min=0.0, first_token_max=0.01, rounds_max=1, tool_max=0.01
)


@dataclass(frozen=True, kw_only=True)
class FrameworksConfig:
    """What one benchmark run does."""

    queries: int = _DEFAULT_QUERIES
    seed: int = _DEFAULT_SEED
    concurrency: int = _DEFAULT_CONCURRENCY
    frameworks: tuple[str, ...] = FRAMEWORKS
    profile: LatencyProfile = field(default_factory=LatencyProfile)


@dataclass(frozen=True, slots=True)
class Trace:
    """One query run one way."""

    qid: str
    first_request_ms: float
    #: Time spent inside memory code in the run's hooks (awaited recall, or the adapter's
    #: start and take calls), summed over the run.
    hook_ms: float
    landed: str
    side_queries: int
    side_hung_up: int
    #: The background recall's steps on the event loop before the first main request.
    recall_steps_ms: float = 0.0


# -- the benchmark ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plans:
    """How a set of plans is drawn: the child server draws the same ones from it."""

    count: int
    seed: int
    profile: LatencyProfile
    prefix: str

    def draw(self) -> list[QueryPlan]:
        return draw_plans(self.count, self.seed, self.profile, prefix=self.prefix)

    async def install(self, server: ChildServer, tag: str, paths: Mapping[str, str]) -> None:
        """Make the child server answer these plans under ``tag``."""
        await server.command(
            {
                "op": "install",
                "tag": tag,
                "count": self.count,
                "seed": self.seed,
                "prefix": self.prefix,
                "profile": asdict(self.profile),
                "paths": dict(paths),
                "shared_side": True,
            }
        )


async def measure(config: FrameworksConfig) -> dict[str, dict[str, list[Trace]]]:
    """Every framework's traces, by pattern, the same plans for all."""
    plans = _Plans(config.queries, config.seed, config.profile, "q")
    warm = _Plans(1, config.seed, _WARM_UP, "w")
    results: dict[str, dict[str, list[Trace]]] = {}
    async with child_server(control=True) as server:
        with tempfile.TemporaryDirectory() as tmp:
            paths = build_memory_folder(Path(tmp) / "memory")
            store = FolderStore(Path(tmp) / "memory")
            store.scan()  # warm, as in a session past its first query
            for framework in config.frameworks:
                driver = _DRIVERS[framework](server.base_url)
                try:
                    for pattern in PATTERNS:  # first runs import and connect: not measured
                        await _pattern(
                            server, driver, store, paths, warm, f"warm-{framework}", pattern, config
                        )
                    results[framework] = {
                        pattern: await _pattern(
                            server, driver, store, paths, plans, framework, pattern, config
                        )
                        for pattern in PATTERNS
                    }
                finally:
                    await driver.aclose()
    return results


async def _pattern(
    server: ChildServer,
    driver: Driver,
    store: FolderStore,
    paths: Mapping[str, str],
    plans: _Plans,
    framework: str,
    pattern: str,
    config: FrameworksConfig,
) -> list[Trace]:
    """Every plan run one way in one framework, ``config.concurrency`` at a time, with
    one side model (and its connections) for them all, as an application has."""
    tag = f"{framework}/{pattern}"
    await plans.install(server, tag, paths)
    gate = asyncio.Semaphore(config.concurrency)
    side = OpenAIModel(model=shared_side_model_name(tag), base_url=server.base_url, max_retries=0)

    async def one(plan: QueryPlan) -> Trace:
        async with gate:
            return await _one(server, driver, store, tag, pattern, plan, side)

    async with side:
        return list(await asyncio.gather(*map(one, plans.draw())))


async def _one(
    server: ChildServer,
    driver: Driver,
    store: FolderStore,
    tag: str,
    pattern: str,
    plan: QueryPlan,
    side: OpenAIModel,
) -> Trace:
    held = _Held()
    main_model = main_model_name(tag, plan)
    memory = _TimedMemory(store, ModelSelector(side), held=held)
    memory.awaited = pattern == "awaited"
    async with _TimedPrefetcher(memory, held=held, recall=pattern != "hooks") as prefetcher:
        framework_pattern = "adapter" if pattern == "hooks" else pattern
        start = await driver.aprepare(framework_pattern, main_model, plan, memory, prefetcher)
        started = time.monotonic()  # the agent is built: from here on it is the run
        with _timing_recall_steps():
            await start()
    answer = await server.command(
        {"op": "records", "models": [main_model, side.name], "marks": [_MARK, f"[{plan.qid}]"]}
    )
    main = [r for r in answer["records"] if r["model"] == main_model]
    sides = [r for r in answer["records"] if r["model"] == side.name and r["marked"][1]]
    with_memory = [n for n, r in enumerate(main) if r["marked"][0]]
    landed = "missed" if not with_memory else "user_query" if with_memory[0] == 0 else "tool_result"
    sent = driver.sent.get(main_model)
    if sent is None:  # sent from another process (the Claude Code CLI): its arrival here
        if not main:
            raise RuntimeError(f"{tag}: no main request of {plan.qid} reached the server")
        sent = float(main[0]["arrived_at"])
    cutoff = min(sent, driver.handed.get(main_model, sent))
    return Trace(
        qid=plan.qid,
        first_request_ms=(sent - started) * 1000.0,
        hook_ms=held.seconds * 1000.0,
        landed=landed,
        side_queries=len(sides),
        side_hung_up=sum(r["disconnected"] for r in sides),
        recall_steps_ms=sum(d for at, d in held.steps if at < cutoff) * 1000.0,
    )


def summarize(results: Mapping[str, Mapping[str, Sequence[Trace]]]) -> dict[str, Any]:
    """``{framework: {pattern: {...}}}`` with the documented keys."""
    out: dict[str, Any] = {}
    for framework, patterns in results.items():
        baseline = {t.qid: t.first_request_ms for t in patterns.get("none", ())}
        out[framework] = {}
        for pattern, traces in patterns.items():
            added = [t.first_request_ms - baseline[t.qid] for t in traces if t.qid in baseline]
            landed = {"user_query": 0, "tool_result": 0, "missed": 0}
            for trace in traces:
                landed[trace.landed] += 1
            out[framework][pattern] = {
                "first_request_ms_p50": round(
                    percentile([t.first_request_ms for t in traces], 50), 3
                ),
                "added_ms": {f"p{q}": round(percentile(added, q), 3) for q in (50, 95, 99)},
                "hook_ms": _p50_p99([t.hook_ms for t in traces]),
                "recall_steps_ms": _p50_p99([t.recall_steps_ms for t in traces]),
                "on_path_ms": _p50_p99([t.hook_ms + t.recall_steps_ms for t in traces]),
                "landed": landed,
                "side_queries": sum(t.side_queries for t in traces),
                "side_queries_hung_up": sum(t.side_hung_up for t in traces),
            }
    return out


def _p50_p99(values: Sequence[float]) -> dict[str, float]:
    return {f"p{q}": round(percentile(values, q), 3) for q in (50, 99)}


# -- the command ------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench frameworks``. It always runs against its own local server."""
    parser.add_argument(
        "--queries",
        type=int,
        default=_DEFAULT_QUERIES,
        metavar="N",
        help=f"user queries per framework and pattern (default {_DEFAULT_QUERIES})",
    )
    parser.add_argument("--seed", type=int, default=_DEFAULT_SEED, help="seed of the plans")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=_DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"queries run at once (default {_DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--framework",
        action="append",
        choices=FRAMEWORKS,
        dest="frameworks",
        help="only this framework (repeatable; default: all of them)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the benchmark and print its table (or ``--json``)."""
    del settings  # always its own local server
    if args.queries < 1 or args.concurrency < 1:
        Console(stderr=True).print("error: --queries and --concurrency must be at least 1")
        return 2
    config = FrameworksConfig(
        queries=args.queries,
        seed=args.seed,
        concurrency=args.concurrency,
        frameworks=tuple(args.frameworks or FRAMEWORKS),
    )
    try:
        results = asyncio.run(measure(config))
    except ModuleNotFoundError as exc:
        Console(stderr=True).print(
            f"error: {exc.name} is not installed: pip install 'asyncrecall[{_extra(exc.name)}]'"
        )
        return 2
    summary = summarize(results)
    if args.json:
        Console(soft_wrap=True).print_json(json.dumps(summary))
    else:
        Console(width=160).print(_table(summary, config))
    return 0


def _ms(value: float) -> str:
    return f"{value * 1000:,.0f} µs" if value < 1 else f"{value:,.1f} ms"


def _extra(module: str | None) -> str:
    top = (module or "").split(".")[0]
    extras = {
        "pydantic_ai": "pydantic-ai",
        "agents": "openai-agents",
        "google": "google-adk",
        "litellm": "google-adk",
        "claude_agent_sdk": "claude-agent-sdk",
    }
    return extras.get(top, "langchain")


def _table(summary: Mapping[str, Any], config: FrameworksConfig) -> Table:
    table = Table(
        title=(
            f"{config.queries} user queries per framework and pattern (seed {config.seed}); "
            f"{config.profile.describe()}"
        ),
        title_justify="left",
    )
    for column in (
        "framework",
        "pattern",
        "first request p50",
        "added p50",
        "p95",
        "p99",
        "memory on path p50",
        "p99 ",
        "at user query",
        "at tool result",
        "missed",
        "side queries hung up",
    ):
        table.add_column(column, justify="left" if column in ("framework", "pattern") else "right")
    for framework, patterns in summary.items():
        for pattern, row in patterns.items():
            added = row["added_ms"]
            table.add_row(
                framework,
                pattern,
                f"{row['first_request_ms_p50']:,.1f} ms",
                *(
                    ("—", "—", "—")
                    if pattern == "none"
                    else (f"{added[p]:,.1f} ms" for p in ("p50", "p95", "p99"))
                ),
                *(_ms(row["on_path_ms"][p]) for p in ("p50", "p99")),
                str(row["landed"]["user_query"]),
                str(row["landed"]["tool_result"]),
                str(row["landed"]["missed"]),
                f"{row['side_queries_hung_up']}/{row['side_queries']}",
            )
    return table


# -- timing the memory code on the request path -----------------------------------------


@dataclass
class _Held:
    seconds: float = 0.0
    #: (start, duration) of each step of the background recall's tasks (monotonic s).
    steps: list[tuple[float, float]] = field(default_factory=list)


#: Set while the adapter's start() runs: the tasks created then (and, since a task copies
#: its creator's context, every task they create) belong to the background recall.
_RECALL_STEPS: ContextVar[_Held | None] = ContextVar("bench_recall_steps", default=None)


class _TimedSteps(Coroutine[Any, Any, Any]):
    """A coroutine wrapper that records the time of each step of the one it wraps."""

    def __init__(self, coro: Coroutine[Any, Any, Any], held: _Held) -> None:
        self._coro = coro
        self._held = held

    def _timed(self, step: Callable[[], Any]) -> Any:
        at = time.monotonic()
        try:
            return step()
        finally:
            self._held.steps.append((at, time.monotonic() - at))

    def send(self, value: Any) -> Any:
        return self._timed(lambda: self._coro.send(value))

    def throw(self, *args: Any) -> Any:
        return self._timed(lambda: self._coro.throw(*args))

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, Any]:
        return self._coro.__await__()


@contextlib.contextmanager
def _timing_recall_steps() -> Iterator[None]:
    """Wrap, while it lasts, each new task of a background recall in :class:`_TimedSteps`."""
    loop = asyncio.get_running_loop()
    previous = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        held = _RECALL_STEPS.get()
        if held is not None:
            coro = _TimedSteps(coro, held)
        if previous is not None:
            return previous(loop, coro, **kwargs)  # type: ignore[return-value]
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)
    try:
        yield
    finally:
        loop.set_task_factory(previous)


class _TimedMemory(Recaller):
    """Counts the time a hook spends awaiting recall (the awaited pattern)."""

    def __init__(self, *args: Any, held: _Held, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held = held
        self.awaited = False

    async def recall(self, *args: Any, **kwargs: Any) -> Any:
        if not self.awaited:  # the prefetcher's background recall is not on the path
            return await super().recall(*args, **kwargs)
        started = time.perf_counter()
        try:
            return await super().recall(*args, **kwargs)
        finally:
            self._held.seconds += time.perf_counter() - started


class _TimedPrefetcher(RecallPrefetcher):
    """Counts the time the adapter spends in start() and take() (on the request path);
    its recall's tasks are timed step by step. ``recall=False``: start() starts nothing."""

    def __init__(self, *args: Any, held: _Held, recall: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held = held
        self._recall = recall

    def start(self, *args: Any, **kwargs: Any) -> bool:
        if not self._recall:
            return False
        started = time.perf_counter()
        token = _RECALL_STEPS.set(self._held)
        try:
            return super().start(*args, **kwargs)
        finally:
            _RECALL_STEPS.reset(token)
            self._held.seconds += time.perf_counter() - started

    def take(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return super().take(*args, **kwargs)
        finally:
            self._held.seconds += time.perf_counter() - started


# -- one driver per framework -------------------------------------------------------------


class _OpenAIClientDriver(Driver):
    """A driver whose framework takes an ``AsyncOpenAI`` client (stamped, no retries)."""

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key="bench",
            max_retries=0,
            http_client=self.http_client(),
        )

    async def aclose(self) -> None:
        await self._client.close()


class _PydanticAI(_OpenAIClientDriver):
    def prepare(
        self,
        pattern: str,
        model: str,
        plan: QueryPlan,
        memory: Recaller,
        prefetcher: RecallPrefetcher,
    ) -> Callable[[], Awaitable[Any]]:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        from asyncrecall.integrations.pydantic_ai import AsyncRecall
        from asyncrecall_bench._frameworks_awaited import awaited_pydantic_ai

        capabilities: list[Any] = []
        if pattern == "awaited":
            capabilities.append(awaited_pydantic_ai(memory))
        elif pattern == "adapter":
            capabilities.append(AsyncRecall(prefetcher))
        agent: Any = Agent(
            OpenAIChatModel(model, provider=OpenAIProvider(openai_client=self._client)),
            instructions=SYSTEM,
            capabilities=capabilities,
        )
        agent.tool_plain(read_file, name="read_file")
        return lambda: agent.run(tagged_text(plan), conversation_id=plan.qid)


class _OpenAIAgents(_OpenAIClientDriver):
    def prepare(
        self,
        pattern: str,
        model: str,
        plan: QueryPlan,
        memory: Recaller,
        prefetcher: RecallPrefetcher,
    ) -> Callable[[], Awaitable[Any]]:
        from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool

        from asyncrecall.integrations import openai_agents as recall
        from asyncrecall_bench._frameworks_awaited import awaited_openai_agents

        agent: Any = Agent(
            name="bench",
            instructions=SYSTEM,
            model=OpenAIChatCompletionsModel(model, self._client),
            tools=[function_tool(read_file, name_override="read_file")],
        )
        if pattern == "adapter":
            plain = RunConfig(tracing_disabled=True)
            text = tagged_text(plan)
            return lambda: recall.run(prefetcher, agent, text, key=plan.qid, run_config=plain)
        config = RunConfig(
            tracing_disabled=True,
            call_model_input_filter=awaited_openai_agents(memory, tagged_text(plan))
            if pattern == "awaited"
            else None,
        )
        return lambda: Runner.run(agent, tagged_text(plan), run_config=config)


async def _adk_read_file(path: str, duration_ms: float = 0.0) -> str:
    """Read a file."""
    return await read_file(path, duration_ms)


_adk_read_file.__name__ = "read_file"  # ADK names a function tool after its function


class _GoogleADK(_OpenAIClientDriver):
    """ADK's runner with ``LiteLlm`` (OpenAI-compatible provider) on the stamped client."""

    def __init__(self, base_url: str) -> None:
        # LiteLLM fetches its model cost map from the network on import unless told not
        # to; this benchmark runs offline against its own server.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        super().__init__(base_url)

    def prepare(
        self,
        pattern: str,
        model: str,
        plan: QueryPlan,
        memory: Recaller,
        prefetcher: RecallPrefetcher,
    ) -> Callable[[], Awaitable[Any]]:
        from google.adk.agents import LlmAgent
        from google.adk.apps import App
        from google.adk.models.lite_llm import LiteLlm
        from google.adk.plugins.base_plugin import BasePlugin
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService
        from google.genai import types

        from asyncrecall.integrations.google_adk import AsyncRecallPlugin
        from asyncrecall_bench._frameworks_awaited import awaited_google_adk

        chat = LiteLlm(
            model=f"openai/{model}", api_base=self.base_url, api_key="bench", client=self._client
        )
        tools: list[Any] = [_adk_read_file]
        if pattern == "awaited":
            tools.append(awaited_google_adk(memory))
        agent = LlmAgent(name="bench", model=chat, instruction=SYSTEM, tools=tools)
        plugins: list[BasePlugin] = [AsyncRecallPlugin(prefetcher)] if pattern == "adapter" else []
        runner = Runner(
            app=App(name="bench", root_agent=agent, plugins=plugins),
            session_service=InMemorySessionService(),
            auto_create_session=True,
        )
        message = types.Content(role="user", parts=[types.Part(text=tagged_text(plan))])

        async def start() -> None:
            async with runner:
                async for _event in runner.run_async(
                    user_id="bench", session_id=plan.qid, new_message=message
                ):
                    pass

        return start


class _LangChain(Driver):
    def __init__(self, base_url: str) -> None:
        super().__init__(base_url)
        self._http = self.http_client()

    def prepare(
        self,
        pattern: str,
        model: str,
        plan: QueryPlan,
        memory: Recaller,
        prefetcher: RecallPrefetcher,
    ) -> Callable[[], Awaitable[Any]]:
        from langchain.agents import create_agent
        from langchain_core.tools import StructuredTool
        from langchain_openai import ChatOpenAI

        from asyncrecall.integrations.langchain import AsyncRecallMiddleware
        from asyncrecall_bench._frameworks_awaited import awaited_langchain

        chat = ChatOpenAI(
            model=model,
            base_url=self.base_url,
            api_key="bench",  # type: ignore[arg-type]
            max_retries=0,
            http_async_client=self._http,
        )
        tool = StructuredTool.from_function(coroutine=read_file, name="read_file")
        message = {"messages": [{"role": "user", "content": tagged_text(plan)}]}
        config: Any = {"configurable": {"thread_id": plan.qid}}
        if pattern == "adapter":
            middleware = AsyncRecallMiddleware(prefetcher)
            agent: Any = create_agent(chat, [tool], system_prompt=SYSTEM, middleware=[middleware])
            return lambda: middleware.ainvoke(agent, message, config)
        extra = [awaited_langchain(memory)] if pattern == "awaited" else []
        agent = create_agent(chat, [tool], system_prompt=SYSTEM, middleware=extra)
        return lambda: agent.ainvoke(message, config)

    async def aclose(self) -> None:
        await self._http.aclose()


def _claude_agent_sdk(base_url: str) -> Driver:
    from asyncrecall_bench._frameworks_claude import ClaudeAgentSDK

    return ClaudeAgentSDK(base_url)


_DRIVERS: Final[dict[str, Callable[[str], Driver]]] = {
    "pydantic-ai": _PydanticAI,
    "openai-agents": _OpenAIAgents,
    "langchain": _LangChain,
    "google-adk": _GoogleADK,
    "claude-agent-sdk": _claude_agent_sdk,
}

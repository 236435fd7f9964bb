"""``asyncrecall bench latency``: what recall adds before the first main request, per mode.

One workload (:mod:`asyncrecall_bench._workload`: seeded latencies, 0-3 tool rounds per
query, a real memory folder of three dozen memories) is played over real HTTP by a
:class:`LocalServer` under each recall mode, one mode after the other in this process:

* ``blocking`` — the old design (await recall before the user-query request, 2.5 s
  deadline, 1 s timeout inside the selector), as ``--recall-mode blocking`` builds it;
* ``async`` — the design: never wait, inject at the user query or a tool result;
* ``async+wait100`` — a bounded initial wait of 100 ms;
* ``async+lexical`` — an instant lexical pass rides on the first request.

Every user query runs in its own fresh session (its memory folder scan warmed first,
as in a session past its first query); ``--concurrency`` sessions run at once to bound
the wall time. Every mode replays the same plans, so the same query meets the same
side-query latency, first-token delays and tool durations in every mode.

Per mode: ``added_ms`` — time from handing the query to the agent to its first main
request being sent (the agent's ``request_sent`` event), p50/p95/p99; where memory
first reached the model (``user_query`` / ``tool_result`` / ``missed``) and the
``delivered_share``; ``side_queries_cancelled`` — side queries the server saw hung up
(``disconnected`` in its records); ``wall_ms_per_query`` — mean time to the answer.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeAlias

from openai import AsyncOpenAI
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from asyncrecall._exceptions import ConfigError
from asyncrecall.agent import Agent, RecallMode
from asyncrecall.cli._session import Session, open_session
from asyncrecall.cli._settings import Settings
from asyncrecall.cli.demo._quiet import quiet_known_noise
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, RecordedRequest
from asyncrecall_bench._corpus import QUERIES, build_memory_folder
from asyncrecall_bench._latency_data import (
    DEFAULT_CONCURRENCY,
    DEFAULT_QUERIES,
    DEFAULT_SEED,
    MODES,
    LatencyConfig,
    LatencyReport,
    ModeResult,
)
from asyncrecall_bench._latency_report import render_report
from asyncrecall_bench._measure import QueryTrace, ticking, trace_query
from asyncrecall_bench._plot import add_plot_flag, latency_figure, plot_target, write_figure
from asyncrecall_bench._workload import (
    QueryPlan,
    ScriptedTools,
    draw_plans,
    install_plans,
    main_model_name,
    side_model_name,
)

__all__ = ["measure", "run"]

_QUICK_QUERIES: Final = 8
_SETTLE_GUARD_S: Final = 10.0
_TICK_S: Final = 0.005
_STAGGER_S: Final = 0.02


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench latency``. It always runs against its own local server."""
    parser.add_argument(
        "--queries",
        type=int,
        metavar="N",
        help=f"user queries per mode (default {DEFAULT_QUERIES})",
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help="seed of the drawn latencies"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help=f"sessions run at once within a mode (default {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{_QUICK_QUERIES} queries per mode, all at once, the modes side by side: "
        "a smoke run (CI)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_plot_flag(parser)


def config_from_args(args: argparse.Namespace) -> LatencyConfig:
    """The run's configuration; bad numbers are a :class:`ConfigError` (exit 2)."""
    queries: int = args.queries
    if queries is None:
        queries = _QUICK_QUERIES if args.quick else DEFAULT_QUERIES
    concurrency: int = args.concurrency
    if concurrency is None:
        concurrency = queries if args.quick else DEFAULT_CONCURRENCY
    if queries < 1:
        raise ConfigError(f"--queries must be 1 or more, got {queries}")
    if concurrency < 1:
        raise ConfigError(f"--concurrency must be 1 or more, got {concurrency}")
    return LatencyConfig(
        queries=queries, seed=args.seed, concurrency=concurrency, parallel_modes=args.quick
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the benchmark, print the table (or ``--json``); progress goes to stderr."""
    del settings  # the benchmark brings its own server, models and memory folder
    config = config_from_args(args)
    plot = plot_target(args.plot)
    err = Console(stderr=True)
    with quiet_known_noise():
        if err.is_terminal:
            with Progress(
                TextColumn("{task.description:<14}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
            ) as bars:
                report = asyncio.run(measure(config, progress=_bars(bars)))
        else:  # a log: one line per quarter of each mode
            report = asyncio.run(measure(config, progress=_lines(err)))
    if plot is not None:
        write_figure(plot, latency_figure(report))
        err.print(f"figure written to {plot}", highlight=False)
    if args.json:
        Console(soft_wrap=True).print_json(json.dumps(report.as_json()))
    else:
        out = Console()
        render_report(report, out if out.is_terminal else Console(width=140))
    return 0


ProgressFactory: TypeAlias = Callable[[str, int], Callable[[], None]]
"""``(mode, total) -> advance``: what :func:`measure` reports its progress to."""


def _bars(progress: Progress) -> ProgressFactory:
    def add(mode: str, total: int) -> Callable[[], None]:
        task = progress.add_task(mode, total=total)
        return lambda: progress.advance(task)

    return add


def _lines(console: Console) -> ProgressFactory:
    def add(mode: str, total: int) -> Callable[[], None]:
        done = 0
        marks = {max(1, round(total * q / 4)) for q in (1, 2, 3, 4)}

        def advance() -> None:
            nonlocal done
            done += 1
            if done in marks:
                console.print(f"{mode}: {done}/{total} user queries", highlight=False)

        return advance

    return add


async def measure(
    config: LatencyConfig, *, progress: ProgressFactory | None = None
) -> LatencyReport:
    """Play the workload under every mode of ``config``; returns the report."""
    started = time.monotonic()
    plans = draw_plans(config.queries, config.seed, config.profile)
    with tempfile.TemporaryDirectory(prefix="asyncrecall-bench-") as tmp, LocalServer() as server:
        root = Path(tmp)
        paths = build_memory_folder(root / "memory")
        (root / "project").mkdir()
        # Pay first-use costs (imports, first connections) outside the measured runs.
        for mode in MODES:
            tag = f"warmup-{mode}"
            install_plans(server, tag, [_WARMUP], paths)
            await (await _Batch.open(server, root, mode, [_WARMUP], tag=tag)).run(
                config.concurrency
            )
        # Every session of every mode is opened (and its folder scan warmed) before any
        # query runs: no session's set-up then runs inside another's measurement.
        batches = {}
        for mode in config.modes:
            install_plans(server, mode, plans, paths)
            batches[mode] = await _Batch.open(server, root, mode, plans)
        advance = {
            mode: progress(mode, len(plans)) if progress else (lambda: None) for mode in batches
        }
        results: dict[str, ModeResult] = {}
        # The pre-opened sessions are the harness's, not a real agent's heap: keep the
        # garbage collector's full passes over them out of the measurements.
        gc.collect()
        gc.freeze()
        try:
            if config.parallel_modes:
                async with asyncio.TaskGroup() as group:
                    tasks = {
                        mode: group.create_task(
                            batch.run(config.concurrency, advance[mode], offset=n / len(batches))
                        )
                        for n, (mode, batch) in enumerate(batches.items())
                    }
                results = {mode: task.result() for mode, task in tasks.items()}
            else:
                for mode, batch in batches.items():
                    results[mode] = await batch.run(config.concurrency, advance[mode])
        finally:
            gc.unfreeze()
    return LatencyReport(config, plans, results, len(paths), time.monotonic() - started)


#: A short query with one tool round that exercises every code path before measuring.
_WARMUP = QueryPlan(
    qid="w0", query=QUERIES[0], side_delay=0.01, first_token=(0.01, 0.01), tool_delay=(0.001,)
)


@dataclass
class _Batch:
    """The sessions of one mode, one per plan, opened and ready to run."""

    server: LocalServer
    mode: RecallMode
    tag: str
    plans: Sequence[QueryPlan]
    sessions: Sequence[Session]
    http: AsyncOpenAI
    project: Path

    @classmethod
    async def open(
        cls,
        server: LocalServer,
        root: Path,
        mode: RecallMode,
        plans: Sequence[QueryPlan],
        *,
        tag: str | None = None,
    ) -> _Batch:
        """Open one session per plan, as ``--recall-mode MODE`` would (:func:`open_session`)."""
        tag = tag or mode
        settings = Settings(
            memory_dir=root / "memory",
            selector="model",
            recall_mode=mode,
            project=root / "project",
            home=root / "home",
        )
        # One HTTP client (one connection pool) per mode, shared by its sessions.
        http = AsyncOpenAI(api_key="bench", base_url=server.base_url, max_retries=0)
        sessions = []
        for plan in plans:
            # No retries: one side query per user query, as the server's records count.
            main = OpenAIModel(
                model=main_model_name(tag, plan), base_url=server.base_url, client=http,
                max_retries=0,
            )  # fmt: skip
            side = OpenAIModel(
                model=side_model_name(tag, plan), base_url=server.base_url, client=http,
                max_retries=0,
            )  # fmt: skip
            session = open_session(settings, model=main, side_model=side)
            await session.client.warm_memory()  # as in a session past its first query
            sessions.append(session)
        return cls(server, mode, tag, plans, sessions, http, settings.project)

    async def run(
        self, concurrency: int, advance: Callable[[], None] = lambda: None, *, offset: float = 0
    ) -> ModeResult:
        """Run every plan in its session, ``concurrency`` at a time; close everything.

        The first ``concurrency`` queries start :data:`_STAGGER_S` apart (shifted by
        ``offset`` of that gap), as users do not all press Enter in the same
        millisecond; later ones start as soon as a slot frees.
        """
        slots = asyncio.Semaphore(concurrency)
        traces: list[QueryTrace | None] = [None] * len(self.plans)

        async def one(index: int) -> None:
            async with slots:  # tasks start in order: the first ones take the slots
                if index < concurrency:
                    await asyncio.sleep((index + offset) * _STAGGER_S)
                session = self.sessions[index]
                try:
                    agent = Agent(session.client, ScriptedTools(self.project), max_turns=10)
                    traces[index] = await trace_query(agent, self.plans[index].text)
                finally:
                    await session.aclose()
                advance()

        try:
            async with ticking(_TICK_S) as ticker, asyncio.TaskGroup() as group:
                for index in range(len(self.plans)):
                    group.create_task(one(index))
        finally:
            for session in self.sessions:
                await session.aclose()
            await self.http.close()
        side = await self._settled_side_queries()
        done = [trace for trace in traces if trace is not None]
        cancelled = sum(r.disconnected for r in side)
        return ModeResult(self.mode, done, len(side), cancelled, ticker.lags)

    async def _settled_side_queries(self) -> list[RecordedRequest]:
        """This batch's side queries, once each is complete or hung up (seen late)."""
        prefix = side_model_name(self.tag, _WARMUP).rsplit("/", 1)[0] + "/"
        deadline = time.monotonic() + _SETTLE_GUARD_S
        while True:
            records = [r for r in self.server.requests if r.model.startswith(prefix)]
            if all(r.settled for r in records) or time.monotonic() > deadline:
                return records
            await asyncio.sleep(0.01)

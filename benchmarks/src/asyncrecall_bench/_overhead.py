"""``asyncrecall bench overhead``: the prefetch machinery's own cost, and many sessions.

1. **Per user query**, in process: a :class:`ScriptedModel` main model answering at once
   (one tool call, then the answer), instant tools, and three clients: memory off; a
   recall that returns at once (it settles on the trigger's loop tick and is injected
   at the user query; point B then finds nothing); a recall that never settles (both
   checks miss, the turn's end cancels it). The difference of the medians of a whole
   user query (two model turns) against memory off is what the machinery costs:
   trigger, both checks, injection or cancellation, and their events.
2. **The recall's CPU over HTTP**, one call at a time against a local server in a child
   process (instant replies): the CPU time of a whole :meth:`Recaller.recall` with
   the model selector (scan in a worker thread, manifest, side query through the SDK,
   validation, memory block) against the side query's bare HTTP exchange (the same body
   POSTed with the SDK's HTTP client, the answer decoded), interleaved, medians. The
   difference is what recall costs on top of its HTTP request.
3. **Many sessions** (:mod:`asyncrecall_bench._scale`): N concurrent sessions in one
   process (a fresh child per configuration) against a local server in another child,
   with memory off and with async recall: the event loop's lag (a ticker's oversleep)
   p50/p99/max, resident memory and CPU time per session. ``--scale-repeats K`` runs
   each configuration K times, alternating memory off and async, and reports each
   figure's median over the K runs (the machine is shared: take ratios, side by side).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import statistics
import tempfile
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import openai
from rich.console import Console
from rich.table import Table

from asyncrecall._cancel import CancelSignal
from asyncrecall._exceptions import ConfigError
from asyncrecall.agent import Agent, AgentClient
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import (
    FolderStore,
    LexicalSelector,
    ModelSelector,
    Recaller,
    RecallResult,
    Selector,
    format_memory_block,
)
from asyncrecall.memory.selectors._model import (
    SCHEMA_NAME,
    SYSTEM_PROMPT,
    selection_schema,
    selector_prompt,
)
from asyncrecall.models import FunctionCall, OpenAIModel
from asyncrecall.models._side_http import SideHTTP
from asyncrecall.testing import ScriptedModel, ScriptedRequest, ScriptedTurn
from asyncrecall_bench._corpus import MEMORIES, build_memory_folder
from asyncrecall_bench._scale import ScaleResult, child_server, measure_idle, measure_scale
from asyncrecall_bench._serve import SIDE_MODEL, WARMUP_PREFIX
from asyncrecall_bench._workload import ScriptedTools

__all__ = ["OverheadReport", "add_arguments", "measure_per_query", "run"]

_VARIANTS: Final = ("memory_off", "settled_at_once", "never_settled")
_DEFAULT_REPEATS: Final = 3000
_DEFAULT_SESSIONS: Final = (100, 1000)
_TICK_S: Final = 0.005
_RAMP_S: Final = 1.0
_IDLE_S: Final = 1.0
_RECALL_QUERY: Final = "Deploy the hotfix for the refund bug to production"


@dataclass(frozen=True)
class OverheadReport:
    """Per-variant medians (microseconds per user query) and the many-sessions runs."""

    repeats: int
    per_query_us: dict[str, float]
    scale: Sequence[ScaleResult]
    ramp_s: float = _RAMP_S
    #: ``side_query_http``, ``side_query_sdk``, ``side_query_streams`` and ``recall``:
    #: median CPU µs per call (part 2).
    recall_cpu_us: dict[str, float] = dataclasses.field(default_factory=dict)
    scale_repeats: int = 1
    #: Per session count: each repeat's loop-lag p99 with async recall over memory off's
    #: (the two runs of a repeat are back to back).
    lag_ratios: dict[int, list[float]] = dataclasses.field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """``per_query_us``, ``overhead_us`` (against memory off), ``recall_cpu_us`` (with
        ``recall_over_exchange``), ``recall_cpu_ratio`` (the recall's CPU over the
        SDK's bare exchange's, timed in the same process: the absolute figures move with
        the machine, up to half again between two processes on one), the idle loop's lag,
        and ``sessions``: per count, ``memory_off`` and ``async`` runs (started over
        ``ramp_s``; medians of ``scale_repeats`` runs each); ``lag_p99_ratio``: per
        count, each repeat's async loop-lag p99 over memory off's, their median and
        spread."""
        off = self.per_query_us["memory_off"]
        cpu = {k: round(v, 1) for k, v in self.recall_cpu_us.items()}
        ratio: dict[str, float] = {}
        if self.recall_cpu_us:
            recall, measured = self.recall_cpu_us["recall"], self.recall_cpu_us
            cpu["recall_over_exchange"] = round(recall - measured["side_query_streams"], 1)
            ratio["sdk_exchange"] = round(recall / measured["side_query_sdk"], 3)
        return {
            "repeats": self.repeats,
            "ramp_s": self.ramp_s,
            "scale_repeats": self.scale_repeats,
            "per_query_us": {k: round(v, 1) for k, v in self.per_query_us.items()},
            "overhead_us": {
                k: round(v - off, 1) for k, v in self.per_query_us.items() if k != "memory_off"
            },
            "recall_cpu_us": cpu,
            "recall_cpu_ratio": ratio,
            "lag_p99_ratio": {
                str(n): {
                    "median": round(statistics.median(ratios), 3),
                    "min": round(min(ratios), 3),
                    "max": round(max(ratios), 3),
                    "runs": [round(r, 3) for r in ratios],
                }
                for n, ratios in self.lag_ratios.items()
                if ratios
            },
            "idle_loop_lag_ms": next(
                (r.as_json()["loop_lag_ms"] for r in self.scale if not r.sessions), None
            ),
            "sessions": {
                str(n): {
                    ("async" if r.memory else "memory_off"): r.as_json()
                    for r in self.scale
                    if r.sessions == n
                }
                for n in dict.fromkeys(r.sessions for r in self.scale if r.sessions)
            },
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench overhead``."""
    parser.add_argument(
        "--repeats",
        type=int,
        default=_DEFAULT_REPEATS,
        help=f"user queries timed per variant (default {_DEFAULT_REPEATS})",
    )
    parser.add_argument(
        "--sessions",
        default=",".join(map(str, _DEFAULT_SESSIONS)),
        metavar="N,N",
        help="concurrent session counts to run (default 100,1000; empty: skip)",
    )
    parser.add_argument(
        "--ramp",
        type=float,
        default=_RAMP_S,
        metavar="SECONDS",
        help=f"the sessions start spread over this long (default {_RAMP_S:g})",
    )
    parser.add_argument(
        "--scale-repeats",
        type=int,
        default=1,
        metavar="K",
        help="run each sessions configuration K times, alternating; report medians (default 1)",
    )
    parser.add_argument("--seed", type=int, default=5, help="seed of the server's latencies")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _session_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise ConfigError(f"--sessions takes numbers separated by commas, got {text!r}") from exc
    if any(count < 1 for count in counts):
        raise ConfigError(f"--sessions counts must be 1 or more, got {text!r}")
    return counts


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run both parts and print the tables (or ``--json``); progress goes to stderr."""
    del settings  # the benchmark brings its own models, server and memory folder
    if args.repeats < 1:
        raise ConfigError(f"--repeats must be 1 or more, got {args.repeats}")
    counts = _session_counts(args.sessions)
    err = Console(stderr=True)
    if args.ramp < 0:
        raise ConfigError(f"--ramp must be 0 or more, got {args.ramp}")
    if args.scale_repeats < 1:
        raise ConfigError(f"--scale-repeats must be 1 or more, got {args.scale_repeats}")
    report = asyncio.run(
        _measure(args.repeats, counts, args.seed, args.ramp, err, scale_repeats=args.scale_repeats)
    )
    if args.json:
        Console(soft_wrap=True).print_json(json.dumps(report.as_json()))
    else:
        out = Console()
        _render(report, out if out.is_terminal else Console(width=120))
    return 0


async def _measure(
    repeats: int,
    counts: Sequence[int],
    seed: int,
    ramp: float,
    err: Console,
    *,
    scale_repeats: int = 1,
) -> OverheadReport:
    with tempfile.TemporaryDirectory(prefix="asyncrecall-overhead-") as tmp:
        root = Path(tmp)
        build_memory_folder(root / "memory")
        (root / "project").mkdir()
        err.print(f"per-query cost: {repeats} user queries per variant ...")
        per_query = await measure_per_query(repeats, project=root / "project")
        scale: list[ScaleResult] = []
        ratios: dict[int, list[float]] = {}
        async with child_server(seed) as child:
            base_url = child.base_url
            err.print(f"recall CPU over HTTP: {repeats} calls per variant ...")
            recall_cpu = await measure_recall_cpu(
                repeats, base_url=base_url, memory_dir=root / "memory"
            )
            if counts:
                err.print(f"idle event loop: {_IDLE_S:g} s ...")
                scale.append(await measure_idle(_IDLE_S, tick=_TICK_S))
            for count in counts:
                runs: dict[bool, list[ScaleResult]] = {False: [], True: []}
                for n in range(scale_repeats):
                    for memory in (False, True):  # alternating: drift hits both alike
                        label = "async recall" if memory else "memory off"
                        err.print(
                            f"{count} concurrent sessions, {label} ({n + 1}/{scale_repeats}) ..."
                        )
                        runs[memory].append(
                            await measure_scale(
                                count,
                                memory=memory,
                                base_url=base_url,
                                memory_dir=root / "memory",
                                project=root / "project",
                                ramp=ramp,
                                tick=_TICK_S,
                            )
                        )
                scale.extend(median_result(runs[memory]) for memory in (False, True))
                ratios[count] = [
                    on.lag_p99_ms / off.lag_p99_ms
                    for off, on in zip(runs[False], runs[True], strict=True)
                    if off.lag_p99_ms > 0
                ]
    return OverheadReport(repeats, per_query, scale, ramp, recall_cpu, scale_repeats, ratios)


def median_result(results: Sequence[ScaleResult]) -> ScaleResult:
    """One result whose every figure is the median of ``results``' (same configuration)."""
    first = results[0]
    if len(results) == 1:
        return first
    figures: dict[str, Any] = {}
    for name, value in dataclasses.asdict(first).items():
        if isinstance(value, bool) or name == "sessions":
            continue
        median = statistics.median(getattr(r, name) for r in results)
        figures[name] = type(value)(median) if isinstance(value, int) else median
    return dataclasses.replace(first, **figures)


# -- the recall's CPU over HTTP ----------------------------------------------------------


async def measure_recall_cpu(
    repeats: int, *, base_url: str, memory_dir: Path, limit: int = 5
) -> dict[str, float]:
    """Median CPU µs per call of a whole recall and of its side query's HTTP exchange
    sent three ways: the SDK's HTTP library alone (``side_query_http``), the OpenAI SDK
    (``side_query_sdk``), and asyncio streams as the recall sends it
    (``side_query_streams``, :class:`~asyncrecall.models._side_http.SideHTTP`; what the
    recall costs over it is its own code: scan, manifest, validation, block).

    Against the child server's instant side model; one call at a time, interleaved, so
    each figure is this process's own CPU for one call (worker threads included).
    """
    store = FolderStore(memory_dir)
    docs = store.scan()
    model_name = WARMUP_PREFIX + SIDE_MODEL
    request = {
        "model": model_name,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": selector_prompt(_RECALL_QUERY, docs, limit=limit)},
        ],
        "stream": False,
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": SCHEMA_NAME,
                "schema": selection_schema(limit),
                "strict": True,
            },
        },
    }
    body = json.dumps(request).encode()
    headers = {"content-type": "application/json", "authorization": "Bearer bench"}
    url = base_url.rstrip("/") + "/chat/completions"
    http = openai.DefaultAsyncHttpxClient()
    sdk = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    streams = SideHTTP.for_client(sdk, base_url, timeout=None)
    if streams is None:
        raise RuntimeError(f"{base_url}: side queries would not go on streams here")
    side = OpenAIModel(model=model_name, base_url=base_url, api_key="bench", max_retries=0)
    manager = Recaller(store, ModelSelector(side, fallback=None))

    async def bare_http() -> None:
        response = await http.post(url, content=body, headers=headers)
        response.raise_for_status()
        json.loads(response.text)

    async def sdk_post() -> None:
        text: str = await sdk.post("/chat/completions", body=request, cast_to=str)
        json.loads(text)

    async def streams_post() -> None:
        assert streams is not None
        await streams.post_json(request)

    async def recall() -> None:
        result = await manager.recall(_RECALL_QUERY, limit=limit)
        if not result.selected:
            raise RuntimeError(f"the benchmark's recall selected nothing: {result!r}")

    variants = {
        "side_query_http": bare_http,
        "side_query_sdk": sdk_post,
        "side_query_streams": streams_post,
        "recall": recall,
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    try:
        warmup = max(1, repeats // 10)
        for n in range(warmup + repeats):
            for name, call in variants.items():
                started = time.process_time_ns()
                await call()
                if n >= warmup:
                    samples[name].append((time.process_time_ns() - started) / 1000.0)
    finally:
        await side.aclose()
        await streams.aclose()
        await sdk.close()
        await http.aclose()
    return {name: statistics.median(values) for name, values in samples.items()}


# -- per user query ---------------------------------------------------------------------


class _PreparedRecall(Recaller):
    """A recall that returns a prepared result at once, or (``result=None``) never."""

    def __init__(self, store: FolderStore, result: RecallResult | None) -> None:
        super().__init__(store, LexicalSelector())
        self._prepared = result

    async def recall(
        self,
        query: str,
        *,
        excluded_paths: Collection[str] = (),
        limit: int = 5,
        cancel: CancelSignal | None = None,
        selector: Selector | None = None,
    ) -> RecallResult:
        if self._prepared is None:
            await asyncio.Event().wait()  # until the client cancels it
        assert self._prepared is not None
        return self._prepared


def _turn(request: ScriptedRequest) -> ScriptedTurn:
    """One tool call for a user query; the answer once the tool has answered."""
    if request.contents[-1].function_responses:
        return ScriptedTurn(text="Done.")
    return ScriptedTurn(tool_calls=(FunctionCall("c1", "read_file", {"path": "x.py"}),))


def _agent(project: Path, memory: Recaller | None) -> Agent:
    model = ScriptedModel("main", default_turn=_turn, validate_history=False)
    tools = ScriptedTools(project)
    return Agent(AgentClient(model=model, memory=memory, tools=tools.specs), tools)


async def measure_per_query(repeats: int, *, project: Path) -> dict[str, float]:
    """Median wall time (microseconds) of one user query per variant (see the module doc)."""
    store = FolderStore(project.parent / "memory")
    docs = tuple(d for d in store.scan() if d.name in {m.name for m in MEMORIES[:2]})
    result = RecallResult(format_memory_block(docs, now=time.time()), docs, "model")
    agents = {
        "memory_off": _agent(project, None),
        "settled_at_once": _agent(project, _PreparedRecall(store, result)),
        "never_settled": _agent(project, _PreparedRecall(store, None)),
    }
    samples: dict[str, list[float]] = {name: [] for name in agents}
    warmup = max(1, repeats // 10)
    gc.collect()
    for n in range(warmup + repeats):
        for name, agent in agents.items():  # interleaved: drift hits every variant alike
            elapsed = await _one_query(agent)
            if n >= warmup:
                samples[name].append(elapsed)
    return {name: statistics.median(values) for name, values in samples.items()}


async def _one_query(agent: Agent) -> float:
    client = agent.client
    client.reset_chat()
    start = time.perf_counter_ns()
    async for _event in agent.run_query("Deploy the hotfix to production"):
        pass
    elapsed = (time.perf_counter_ns() - start) / 1000.0
    if client.background_tasks:  # a cancelled recall finishing: not part of the query
        await asyncio.gather(*client.background_tasks, return_exceptions=True)
    return elapsed


# -- output -----------------------------------------------------------------------------


def _render(report: OverheadReport, console: Console) -> None:
    data = report.as_json()
    table = Table(title="Prefetch machinery, per user query (in process)", header_style="bold")
    table.add_column("variant", no_wrap=True)
    table.add_column("median µs\n/ query", justify="right", no_wrap=True)
    table.add_column("overhead µs\nvs memory off", justify="right", no_wrap=True)
    labels = {
        "memory_off": "memory off",
        "settled_at_once": "recall settled at once (injected at the user query)",
        "never_settled": "recall never settles (both checks miss, cancelled)",
    }
    for name in _VARIANTS:
        overhead = data["overhead_us"].get(name)
        table.add_row(
            labels[name],
            f"{data['per_query_us'][name]:,.1f}",
            "–" if overhead is None else f"{overhead:+,.1f}",
        )
    console.print(table)
    console.print(
        f"A user query here is two model turns (one tool call, then the answer) with a "
        f"scripted model and instant tools; medians of {report.repeats} queries per "
        "variant, interleaved."
    )
    cpu = data["recall_cpu_us"]
    if cpu:
        console.print(
            f"Recall CPU (one call at a time, medians): whole recall {cpu['recall']:,.0f} µs; "
            f"its side query's exchange on asyncio streams {cpu['side_query_streams']:,.0f} µs "
            f"(through the OpenAI SDK {cpu['side_query_sdk']:,.0f} µs, its HTTP library alone "
            f"{cpu['side_query_http']:,.0f} µs): [bold]{cpu['recall_over_exchange']:+,.0f} "
            "µs[/bold] of the recall's own code (scan, manifest, validation, block). The "
            f"whole recall is {data['recall_cpu_ratio']['sdk_exchange']:.2f} of the SDK's "
            "exchange in this process (the absolute figures move with the machine)."
        )
    if not report.scale:
        return
    title = "Concurrent sessions in one process"
    if report.scale_repeats > 1:
        title += f" (medians of {report.scale_repeats} runs each)"
    table = Table(title=title, header_style="bold")
    for label in (
        "sessions",
        "memory",
        "memory\ndelivered",
        "loop lag\np50 ms",
        "loop lag\np99 ms",
        "loop lag\nmax ms",
        "RSS KiB\n/ session",
        "CPU ms\n/ query",
        "wall s",
    ):
        table.add_column(label, justify="left" if label == "memory" else "right", no_wrap=True)
    for result in report.scale:
        idle = not result.sessions
        per_session = result.rss_delta_bytes / result.sessions / 1024 if result.sessions else 0
        table.add_row(
            "0" if idle else f"{result.sessions:,}",
            "(idle loop)" if idle else ("async recall" if result.memory else "off"),
            f"{result.delivered / result.queries:.0%}" if result.memory else "–",
            f"{result.lag_p50_ms:,.2f}",
            f"{result.lag_p99_ms:,.2f}",
            f"{result.lag_max_ms:,.1f}",
            "–" if idle else f"{per_session:,.1f}",
            "–" if idle else f"{result.cpu_s * 1000 / result.queries:,.1f}",
            f"{result.wall_s:,.1f}",
        )
    console.print(table)
    console.print(
        "Each session runs one user query with one tool round; the N sessions start over "
        f"{report.ramp_s:g} s and share one memory folder, one main and one side model. "
        "Each row is a fresh "
        "process; the server (side query ~0.9 s lognormal, first token 0.3-1.5 s, tools "
        "20-500 ms) runs in another. Lag: how late a "
        f"{_TICK_S * 1000:g} ms sleep wakes up. RSS: peak resident memory during the run "
        "minus just before the sessions were made, per session. CPU: this process's CPU "
        "time per user query (HTTP client, agent, recall)."
    )

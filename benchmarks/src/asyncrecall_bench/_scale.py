"""Many concurrent sessions in one process: event-loop lag, memory and CPU per session.

Each configuration (N sessions, memory off or async recall) runs in a fresh child
process (``python -m asyncrecall_bench._scale``), so its resident-memory baseline is
clean and no earlier run's heap or garbage collection leaks into it; the server runs
in another child (:mod:`asyncrecall_bench._serve`). In the measuring process, N
sessions (one :class:`AgentClient` each, sharing one memory folder, one main model
and one side model, each with its HTTP client, as a multi-session service would)
start spread over ``ramp`` seconds and each run one user query with one tool round.
Meanwhile:

* a ticker task sleeps ``tick`` seconds in a loop and records how late it wakes up
  (the event loop's lag);
* the resident set size is sampled; its peak minus the size just before the sessions
  were created, divided by N, is the memory per session;
* the process's CPU time is taken before and after.

A warm-up of 10 sessions against latency-free models runs first, unmeasured, so
first-use costs (imports, first connections) are not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import openai
from openai import AsyncOpenAI

from asyncrecall.agent import Agent, AgentClient
from asyncrecall.memory import FolderStore, ModelSelector, Recaller
from asyncrecall.models import OpenAIModel
from asyncrecall_bench._corpus import QUERIES
from asyncrecall_bench._measure import QueryTrace, percentile, ticking, trace_query
from asyncrecall_bench._serve import MAIN_MODEL, SIDE_MODEL, WARMUP_PREFIX
from asyncrecall_bench._workload import ScriptedTools

__all__ = ["ChildServer", "ScaleResult", "child_server", "measure_idle", "measure_scale"]

_START_GUARD_S = 30.0
_WARMUP_SESSIONS = 10
_RSS_SAMPLE_S = 0.02


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """``sessions`` concurrent sessions with memory on or off (0 sessions: the idle loop)."""

    sessions: int
    memory: bool
    queries: int
    delivered: int
    errors: int
    main_requests: int
    side_queries: int
    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    rss_delta_bytes: int
    cpu_s: float
    wall_s: float

    def as_json(self) -> dict[str, object]:
        """The run's figures for ``--json``."""
        n, q = self.sessions, self.queries
        return {
            "queries": q,
            "memory_delivered_share": round(self.delivered / q, 4) if q and self.memory else None,
            "errors": self.errors,
            "requests": {"main": self.main_requests, "side": self.side_queries},
            "loop_lag_ms": {
                "p50": round(self.lag_p50_ms, 3),
                "p99": round(self.lag_p99_ms, 3),
                "max": round(self.lag_max_ms, 3),
            },
            "rss_kib_per_session": round(self.rss_delta_bytes / n / 1024, 1) if n else None,
            "cpu_ms_per_query": round(self.cpu_s * 1000 / q, 2) if q else None,
            "wall_s": round(self.wall_s, 2),
        }


def _lag_summary(lags: Sequence[float]) -> tuple[float, float, float]:
    return percentile(lags, 50), percentile(lags, 99), max(lags, default=0.0)


class ChildServer:
    """A :class:`LocalServer` in a child process (:mod:`asyncrecall_bench._serve`)."""

    def __init__(self, process: asyncio.subprocess.Process, port: str) -> None:
        self._process = process
        self._lock = asyncio.Lock()
        self.base_url = f"http://127.0.0.1:{port}/v1"

    async def command(self, command: Mapping[str, Any]) -> Any:
        """Send one ``--control`` command; its answer."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        async with self._lock:
            stdin.write(json.dumps(command).encode() + b"\n")
            await stdin.drain()
            line = await stdout.readline()
        if not line:
            raise RuntimeError("the benchmark server stopped")
        return json.loads(line)


@contextlib.asynccontextmanager
async def child_server(seed: int = 0, *, control: bool = False) -> AsyncIterator[ChildServer]:
    """Start :mod:`asyncrecall_bench._serve` in a child process (``control``: with
    ``--control``, so :meth:`ChildServer.command` works).

    The child's standard error goes to a temporary file, shown only if it fails to
    start (at shutdown, the server may log the connections it cancels).
    """
    flags = ["--control"] if control else []
    with tempfile.TemporaryFile() as errors:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "asyncrecall_bench._serve", "--seed", str(seed), *flags,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
        )  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        try:
            async with asyncio.timeout(_START_GUARD_S):
                line = (await process.stdout.readline()).decode().split()
            if len(line) != 2 or line[0] != "port":
                errors.seek(0)
                said = errors.read().decode(errors="replace").strip()
                raise RuntimeError(f"the benchmark server did not start: {said[-2000:]}")
            yield ChildServer(process, line[1])
        finally:
            process.stdin.close()  # the child serves until its standard input closes
            try:
                async with asyncio.timeout(10):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


async def measure_idle(seconds: float, *, tick: float) -> ScaleResult:
    """The loop's lag with nothing else running: the floor the other runs compare to."""
    async with ticking(tick) as ticker:
        await asyncio.sleep(seconds)
    p50, p99, peak = _lag_summary(ticker.lags)
    return ScaleResult(0, False, 0, 0, 0, 0, 0, p50, p99, peak, 0, 0.0, seconds)


async def measure_scale(
    count: int,
    *,
    memory: bool,
    base_url: str,
    memory_dir: Path,
    project: Path,
    ramp: float,
    tick: float,
) -> ScaleResult:
    """Run one configuration in a fresh child process and return its figures."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "asyncrecall_bench._scale", "--count", str(count),
        "--memory" if memory else "--no-memory", "--base-url", base_url,
        "--memory-dir", str(memory_dir), "--project", str(project),
        "--ramp", str(ramp), "--tick", str(tick),
        stdout=subprocess.PIPE,
    )  # fmt: skip
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the sessions run failed (exit {process.returncode})")
    data = json.loads(out.decode().strip().splitlines()[-1])
    return ScaleResult(**data)


async def _run_sessions(
    count: int,
    *,
    memory: bool,
    base_url: str,
    memory_dir: Path,
    project: Path,
    ramp: float,
    prefix: str = "",
) -> list[QueryTrace]:
    # No connection cap on the main model's client: every session has a stream in flight
    # at once. (The limits' class is the SDK's own HTTP library, whichever it is.) The
    # side model builds its own client, as open_openai_models has it: its side queries
    # go on asyncio streams (models/_side_http.py), not through the turns' pool.
    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
        max_connections=None, max_keepalive_connections=None
    )
    main_http = AsyncOpenAI(
        api_key="bench",
        base_url=base_url,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(limits=limits),
    )
    main = OpenAIModel(
        model=prefix + MAIN_MODEL, base_url=base_url, client=main_http, max_retries=0
    )
    side = OpenAIModel(model=prefix + SIDE_MODEL, base_url=base_url, api_key="bench", max_retries=0)
    manager = Recaller(FolderStore(memory_dir), ModelSelector(side)) if memory else None
    tools = ScriptedTools(project)
    clients = [AgentClient(model=main, memory=manager, tools=tools.specs) for _ in range(count)]
    traces: list[QueryTrace] = []

    async def session(index: int, client: AgentClient) -> None:
        await asyncio.sleep(ramp * index / count)
        try:
            agent = Agent(client, tools, max_turns=10)
            traces.append(await trace_query(agent, QUERIES[index % len(QUERIES)].text))
        finally:
            await client.aclose()

    try:
        async with asyncio.TaskGroup() as group:
            for index, client in enumerate(clients):
                group.create_task(session(index, client))
    finally:
        await main_http.close()
        await side.aclose()
    return traces


def _rss_bytes() -> int:
    """Resident set size now (Linux ``/proc``), else the process's peak so far."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def _child(args: argparse.Namespace) -> ScaleResult:
    options = {
        "memory": args.memory,
        "base_url": args.base_url,
        "memory_dir": args.memory_dir,
        "project": args.project,
    }
    await _run_sessions(_WARMUP_SESSIONS, ramp=0.0, prefix=WARMUP_PREFIX, **options)
    gc.collect()
    rss_before = peak = _rss_bytes()
    cpu_before, started = time.process_time(), time.monotonic()

    async def sample() -> None:
        nonlocal peak
        while True:
            await asyncio.sleep(_RSS_SAMPLE_S)
            peak = max(peak, _rss_bytes())

    sampler = asyncio.create_task(sample())
    try:
        async with ticking(args.tick) as ticker:
            traces = await _run_sessions(args.count, ramp=args.ramp, **options)
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
    peak = max(peak, _rss_bytes())
    p50, p99, worst = _lag_summary(ticker.lags)
    return ScaleResult(
        sessions=args.count,
        memory=args.memory,
        queries=len(traces),
        delivered=sum(trace.delivered for trace in traces),
        errors=sum(trace.finish_reason != "stop" for trace in traces),
        main_requests=sum(trace.requests for trace in traces),
        side_queries=sum(trace.recall_started_ms is not None for trace in traces),
        lag_p50_ms=p50,
        lag_p99_ms=p99,
        lag_max_ms=worst,
        rss_delta_bytes=max(0, peak - rss_before),
        cpu_s=time.process_time() - cpu_before,
        wall_s=time.monotonic() - started,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The child: run one configuration, print its :class:`ScaleResult` as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m asyncrecall_bench._scale")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--memory", action=argparse.BooleanOptionalAction, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--memory-dir", type=Path, required=True)
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--ramp", type=float, required=True)
    parser.add_argument("--tick", type=float, required=True)
    result = asyncio.run(_child(parser.parse_args(argv)))
    sys.stdout.write(json.dumps(asdict(result)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

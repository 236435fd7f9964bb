"""The benchmarks' measuring tools: percentiles, paired samples' summary, a loop-lag
ticker, a thread that keeps running Python beside a measurement; the per-query probe
(:func:`trace_query`) is the demo's, so the demo and the benchmarks time a query the
same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import statistics
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from asyncrecall.cli.demo._trace import Landed, QueryTrace, trace_query

__all__ = [
    "BusyThread",
    "Landed",
    "QueryTrace",
    "Ticker",
    "busy_thread",
    "paired",
    "percentile",
    "ticking",
    "trace_query",
]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def paired(
    new: Sequence[float],
    old: Sequence[float],
    *,
    names: tuple[str, str],
    unit: Literal["ms", "us"],
) -> dict[str, object]:
    """Two samples of seconds timed in pairs (``new[i]`` beside ``old[i]``): each one's
    p50, p90 and p99 in ``unit`` (``ms`` or ``us``) under ``names`` (new's, old's), the
    median of the pairs' ratios (new over old) and their count."""
    scale, digits = {"ms": (1e3, 2), "us": (1e6, 1)}[unit]

    def summary(values: Sequence[float]) -> dict[str, float]:
        return {f"p{q}": round(percentile(values, q) * scale, digits) for q in (50, 90, 99)}

    ratios = [a / b for a, b in zip(new, old, strict=True)]
    return {
        f"{names[0]}_{unit}": summary(new),
        f"{names[1]}_{unit}": summary(old),
        "ratio_median": round(statistics.median(ratios), 3),
        "pairs": len(new),
    }


@dataclass
class Ticker:
    """Sleeps ``tick`` seconds in a loop and records each oversleep (the loop's lag), in ms."""

    tick: float
    lags: list[float] = field(default_factory=list)

    async def run(self) -> None:
        """Tick until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.tick)
            self.lags.append(max(0.0, (loop.time() - start - self.tick) * 1000.0))


@contextlib.asynccontextmanager
async def ticking(tick: float) -> AsyncIterator[Ticker]:
    """Run a :class:`Ticker` for the duration of the ``async with`` block."""
    ticker = Ticker(tick)
    task = asyncio.create_task(ticker.run(), name="bench-ticker")
    try:
        yield ticker
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@dataclass
class BusyThread:
    """What :func:`busy_thread`'s thread did: how many times it went round its loop."""

    rounds: int = 0


@contextlib.contextmanager
def busy_thread() -> Iterator[BusyThread]:
    """A thread that runs Python without ever waiting (a host application's worker at
    its worst), for the duration of the ``with`` block: it competes for the interpreter
    lock with everything the block measures."""
    stop = threading.Event()
    done = BusyThread()

    def spin() -> None:
        rounds = 0
        while not stop.is_set():
            rounds += 1
        done.rounds = rounds

    thread = threading.Thread(target=spin, name="bench-busy", daemon=True)
    thread.start()
    try:
        yield done
    finally:
        stop.set()
        thread.join()

"""The benchmarks' measuring tools: percentiles and a loop-lag ticker; the per-query
probe (:func:`trace_query`) is the demo's, so the demo and the benchmarks time a query
the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from asyncrecall.cli.demo._trace import Landed, QueryTrace, trace_query

__all__ = ["Landed", "QueryTrace", "Ticker", "percentile", "ticking", "trace_query"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


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

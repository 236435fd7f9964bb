"""What ``bench latency`` measures, as data: the run fills it, the report renders it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from asyncrecall.agent import RecallMode
from asyncrecall_bench._measure import QueryTrace, percentile
from asyncrecall_bench._workload import LatencyProfile, QueryPlan

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_QUERIES",
    "DEFAULT_SEED",
    "MODES",
    "LatencyConfig",
    "LatencyReport",
    "ModeResult",
]

MODES: Final[tuple[RecallMode, ...]] = ("blocking", "async", "async+wait100", "async+lexical")
DEFAULT_QUERIES: Final = 200
DEFAULT_SEED: Final = 5
DEFAULT_CONCURRENCY: Final = 16


@dataclass(frozen=True, kw_only=True)
class LatencyConfig:
    """What one benchmark run does."""

    queries: int = DEFAULT_QUERIES
    seed: int = DEFAULT_SEED
    concurrency: int = DEFAULT_CONCURRENCY
    profile: LatencyProfile = field(default_factory=LatencyProfile)
    modes: tuple[RecallMode, ...] = MODES
    #: Run the modes at the same time (``--quick``): faster, and more contention.
    parallel_modes: bool = False


@dataclass(frozen=True)
class ModeResult:
    """One mode's traces and what the server saw of its side queries."""

    mode: str
    traces: Sequence[QueryTrace]
    side_queries: int
    side_cancelled: int
    #: The event loop's lag while the mode ran (a 5 ms ticker's oversleeps, ms).
    loop_lag_ms: Sequence[float] = ()

    def added_ms(self) -> list[float]:
        return [trace.first_request_ms for trace in self.traces]

    def landed(self) -> dict[str, int]:
        counts = {"user_query": 0, "tool_result": 0, "missed": 0}
        for trace in self.traces:
            counts[trace.landed] += 1
        return counts

    def as_json(self) -> dict[str, Any]:
        """The mode's object in ``--json``: exactly the documented keys."""
        added = self.added_ms()
        n = len(self.traces)
        return {
            "added_ms": {f"p{q}": round(percentile(added, q), 3) for q in (50, 95, 99)},
            "delivered_share": round(sum(t.delivered for t in self.traces) / n, 4) if n else 0.0,
            "landed": self.landed(),
            "side_queries_cancelled": self.side_cancelled,
            "wall_ms_per_query": round(sum(t.finished_ms for t in self.traces) / n, 1)
            if n
            else 0.0,
        }


@dataclass(frozen=True)
class LatencyReport:
    """Every mode's result, with the plans they all replayed."""

    config: LatencyConfig
    plans: Sequence[QueryPlan]
    modes: Mapping[str, ModeResult]
    memories: int
    wall_s: float

    def as_json(self) -> dict[str, Any]:
        """``{"modes": {MODE: {...}}}``, nothing else."""
        return {"modes": {mode: result.as_json() for mode, result in self.modes.items()}}

"""The table ``bench latency`` prints: every mode side by side, with how to read it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from asyncrecall.bench._measure import percentile

if TYPE_CHECKING:
    from asyncrecall.bench._latency import LatencyReport, ModeResult

__all__ = ["render_report"]

#: The old design's selector timeout, which caps the blocking mode's wait in practice.
_SELECTOR_TIMEOUT_S = 1.0
_STRATEGY_LABELS = {
    "model": "model",
    "lexical": "lexical fallback",
    "instant-lexical": "instant lexical",
}


def _ms(value: float) -> str:
    return f"{value:,.1f}"


def _pcts(values: Sequence[float]) -> list[str]:
    return [_ms(percentile(values, q)) for q in (50, 95, 99)]


def render_report(report: LatencyReport, console: Console) -> None:
    """Print the header, the table and the notes that say how to read it."""
    config = report.config
    n = config.queries
    console.print(
        f"[bold]Recall latency[/bold]: {n} user queries per mode (seed {config.seed}), the "
        f"same plans for every mode; {report.memories} memories in a real folder."
    )
    console.print(f"Workload: {config.profile.describe()}.")
    console.print(
        f"Each query runs in a fresh session, {config.concurrency} sessions at a time, over "
        "HTTP to a local OpenAI-compatible server (127.0.0.1). "
        f"Total wall time {report.wall_s:.0f} s."
    )
    if config.parallel_modes:
        console.print("--quick: the four modes ran at the same time (a smoke run).")
    table = Table(header_style="bold")
    table.add_column("mode", no_wrap=True)
    for label in ("added p50", "p95", "p99 ms", "delivered", "@ user query", "@ tool result"):
        table.add_column(label, justify="right")
    for label in ("missed", "side q. cancelled", "wall/query ms"):
        table.add_column(label, justify="right")
    for mode, result in report.modes.items():
        data = result.as_json()
        landed = data["landed"]
        table.add_row(
            mode,
            *_pcts(result.added_ms()),
            f"{data['delivered_share']:.0%}",
            str(landed["user_query"]),
            str(landed["tool_result"]),
            str(landed["missed"]),
            f"{result.side_cancelled} of {result.side_queries}",
            f"{data['wall_ms_per_query']:,.0f}",
        )
    side = [plan.side_delay * 1000 for plan in report.plans]
    capped = [min(value, _SELECTOR_TIMEOUT_S * 1000) for value in side]
    table.add_row("[dim]side query as drawn[/dim]", *(f"[dim]{v}[/dim]" for v in _pcts(side)))
    table.add_row("[dim]min(side query, 1 s)[/dim]", *(f"[dim]{v}[/dim]" for v in _pcts(capped)))
    console.print(table)
    for line in _notes(report):
        console.print(line)


def _notes(report: LatencyReport) -> list[str]:
    lines = [
        "added: from handing the user query to the agent to the request_sent event of its "
        "first main request (includes the client's own path, well under 1 ms).",
        "delivered: memory reached the model in this query, at the user-query request or "
        "at a tool-result request; missed: it never did.",
    ]
    for mode, result in report.modes.items():
        lines.append(f"{mode}: {_delivery_note(result)}")
    blocking = report.modes.get("blocking")
    if blocking is not None:
        extra = [
            trace.first_request_ms - min(plan.side_delay, _SELECTOR_TIMEOUT_S) * 1000
            for plan, trace in zip(report.plans, blocking.traces, strict=True)
        ]
        lines.append(
            "blocking waited for its side query: added minus min(that query's drawn side "
            f"latency, 1 s) is p50 {percentile(extra, 50):+.1f} ms, p95 "
            f"{percentile(extra, 95):+.1f} ms (HTTP, scan and selection around the wait)."
        )
    return lines


def _delivery_note(result: ModeResult) -> str:
    by = Counter(trace.strategy for trace in result.traces if trace.delivered)
    parts = [
        f"{count} by {_STRATEGY_LABELS.get(str(name), str(name))}" for name, count in by.items()
    ]
    missed = [trace for trace in result.traces if not trace.delivered]
    no_rounds = sum(1 for trace in missed if trace.tool_rounds == 0)
    late = len(missed) - no_rounds
    note = "delivered " + (", ".join(parts) if parts else "nothing")
    if missed:
        note += (
            f"; missed {no_rounds} with no tool round and {late} whose recall settled after "
            "the last tool result (or returned nothing new)"
        )
    fallbacks = sum(1 for trace in result.traces if trace.fallback_reason)
    if fallbacks:
        note += f"; {fallbacks} recalls fell back to lexical (the selector's 1 s timeout)"
    return note + "."

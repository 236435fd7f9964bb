"""The table ``bench latency`` prints: every mode side by side, with how to read it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from asyncrecall_bench._measure import percentile

if TYPE_CHECKING:
    from asyncrecall_bench._latency_data import LatencyReport, ModeResult

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
        f"Each query runs in a fresh session, {config.concurrency} sessions at a time (the "
        "first ones starting 20 ms apart), over HTTP to a local OpenAI-compatible server "
        "(127.0.0.1). "
        f"Total wall time {report.wall_s:.0f} s."
    )
    if config.parallel_modes:
        console.print("--quick: the four modes ran at the same time (a smoke run).")
    table = Table(header_style="bold")
    table.add_column("mode", no_wrap=True)
    for label in (
        "added\np50 ms",
        "added\np95 ms",
        "added\np99 ms",
        "memory\ndelivered",
        "at user\nquery",
        "at tool\nresult",
        "missed",
        "side queries\nhung up",
        "wall ms\n/ query",
        "loop lag\np99 ms",
    ):
        table.add_column(label, justify="right", no_wrap=True)
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
            f"{result.side_cancelled}/{result.side_queries}",
            f"{data['wall_ms_per_query']:,.0f}",
            _ms(percentile(result.loop_lag_ms, 99)),
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
        "side queries hung up: those the server saw the client hang up on / those sent. "
        "loop lag p99: how late a 5 ms sleep woke up while the mode ran (the other "
        "sessions' work on the same event loop; it is also in the added tail).",
    ]
    for mode, result in report.modes.items():
        lines.append(f"{mode}: {_delivery_note(result)}")
    blocking = report.modes.get("blocking")
    if blocking is not None:
        lines.append(_blocking_note(report, blocking))
    return lines


def _blocking_note(report: LatencyReport, blocking: ModeResult) -> str:
    """How closely blocking's wait tracks its side query, below and above the timeout."""
    pairs = list(zip(report.plans, blocking.traces, strict=True))
    timeout_ms = _SELECTOR_TIMEOUT_S * 1000
    under = [t.first_request_ms - p.side_delay * 1000 for p, t in pairs if p.side_delay < 0.9]
    over = [t.first_request_ms - timeout_ms for p, t in pairs if p.side_delay > 1.0]
    parts = []
    if under:
        parts.append(
            f"for the {len(under)} side queries under 0.9 s, added minus the side query's own "
            f"latency is p50 {percentile(under, 50):+.1f} ms, p95 {percentile(under, 95):+.1f} ms"
        )
    if over:
        parts.append(
            f"for the {len(over)} over 1 s, added minus 1 s is p50 "
            f"{percentile(over, 50):+.1f} ms, p95 {percentile(over, 95):+.1f} ms (the "
            "selector's timeout)"
        )
    return "blocking waited for its side query: " + "; ".join(parts or ["no queries"]) + "."


def _delivery_note(result: ModeResult) -> str:
    by = Counter(trace.strategy for trace in result.traces if trace.delivered)
    parts = [
        f"{count} by {_STRATEGY_LABELS.get(str(name), str(name))}" for name, count in by.items()
    ]
    note = "delivered " + (", ".join(parts) if parts else "nothing")
    missed = [trace for trace in result.traces if not trace.delivered]
    if missed:
        timed_out = [trace for trace in missed if trace.fallback_reason]
        rest = [trace for trace in missed if not trace.fallback_reason]
        no_round = sum(1 for trace in rest if trace.tool_rounds == 0)
        empty = sum(1 for trace in rest if trace.tool_rounds and trace.recall_outcome == "empty")
        late = len(rest) - no_round - empty
        causes = []
        if timed_out:
            causes.append(f"{len(timed_out)} timed out in the selector (1 s): no memory")
        if no_round:
            causes.append(f"{no_round} had no tool round")
        if late:
            causes.append(f"{late} settled after the last tool result")
        if empty:
            causes.append(f"{empty} recalled nothing")
        note += f"; of the {len(missed)} missed, " + ", ".join(causes)
    follow_ups = sum(
        1
        for trace in result.traces
        if trace.strategy == "instant-lexical"
        and any(point == "tool_result" for point, _, _ in trace.injections)
    )
    if follow_ups:
        note += f"; the model's pick followed at a tool result in {follow_ups}"
    return note + "."

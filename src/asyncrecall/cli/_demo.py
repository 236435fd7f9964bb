"""``asyncrecall demo``: blocking, async and the default async+lexical recall on one
scripted session, offline.

Everything shown is measured in this run: the timelines come from the agent's own
events and the recall handle's timestamps; the verdict is computed from them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from asyncrecall.cli.demo import DEFAULT_MODE, DemoResult, ModeRun, run_demo
from asyncrecall.cli.demo._quiet import quiet_known_noise
from asyncrecall.cli.demo._trace import QueryTrace

__all__ = ["register", "verdict"]

_BAR_MS_PER_CELL = 60
_BAR_CELLS = 17
#: Columns from which the table has room for long headers and the wait's bar (and the
#: width of output to a pipe).
_WIDE = 120


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``demo``: it takes no endpoint or memory flags (it brings its own)."""
    del common  # offline by design: no endpoint, key or memory folder applies
    parser = subparsers.add_parser(
        "demo",
        help="offline demo: blocking vs async vs the default async+lexical recall",
        description=(
            "Run one scripted coding session against a local server, in blocking, async "
            "and the default async+lexical recall mode, and show what each mode measured. "
            "Offline, no key; "
            "everything lives in a temporary folder that is removed at the end."
        ),
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    del args
    out = Console(highlight=False)
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        out = Console(highlight=False, width=_WIDE)
    err = Console(stderr=True, highlight=False)
    out.print(
        "[bold]asyncrecall demo[/bold]: one coding session, blocking recall vs async recall "
        f"vs the default ({DEFAULT_MODE}: async plus an instant lexical pass)"
    )
    out.print(
        "A throw-away project and memory folder, and a local OpenAI-compatible server on "
        "127.0.0.1 playing the models: the memory side query answers in about 0.9 s like a "
        "cold fast model (once in 0.12 s, warm); the main model's first token comes after "
        "0.4-0.6 s; the tools really run over the project.\n"
    )
    with quiet_known_noise():
        result = asyncio.run(
            run_demo(on_query=lambda mode, n: err.print(f"[dim]{mode} mode: user query {n}[/dim]"))
        )
    _show(result, out)
    return 0


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} ms"


def _wait_bar(ms: float) -> Text:
    cells = min(_BAR_CELLS, round(ms / _BAR_MS_PER_CELL))
    bar = Text("█" * cells if cells else "▏", style="red" if cells else "green")
    bar.append(f" {ms:,.0f} ms" if ms >= 10 else f" {ms:.1f} ms")
    return bar


def _recall(trace: QueryTrace) -> str:
    start = _ms(trace.recall_started_ms).removesuffix(" ms")
    if trace.recall_outcome == "cancelled":
        return f"{start} → cancelled at {_ms(trace.recall_settled_ms)}"
    how = trace.recall_outcome or "?"
    if trace.fallback_reason:
        how = f"{how} after 1 s timeout"
    return f"{start} → {_ms(trace.recall_settled_ms)} ({how})"


def _memory(trace: QueryTrace, ended: str) -> str:
    if trace.landed == "user_query":
        return f"with the user query, at {_ms(trace.landed_ms)}"
    if trace.landed == "tool_result":
        return f"after a tool result, at {_ms(trace.landed_ms)}"
    return f"[yellow]missed[/yellow] ({ended})"


def _miss_reason(trace: QueryTrace) -> str:
    if trace.tool_rounds == 0:
        return "no tool result to carry it"
    return "settled after the last tool result"


def _show(result: DemoResult, out: Console) -> None:
    runs = {run.mode: run for run in result.runs}
    for n, query in enumerate(result.queries):
        rounds = len(query.steps)
        out.print(
            f"[bold]Q{n + 1}. {query.text}[/bold]  [dim]{rounds} tool round"
            f"{'' if rounds == 1 else 's'}; side query scripted at "
            f"{query.side_delay * 1000:.0f} ms[/dim]"
        )
        wide = out.width >= _WIDE
        table = Table(header_style="dim", box=None, padding=(0, 1, 0, 2))
        table.add_column("mode", no_wrap=True, min_width=13)
        if wide:  # the wait drawn as a bar
            table.add_column("waited before 1st request", no_wrap=True, min_width=26)
            table.add_column("recall started → settled", min_width=24, ratio=1)
            table.add_column("memory reached the model", min_width=24, ratio=1)
        else:  # a terminal of 80 columns: short headers, the long cells wrap
            table.add_column("waited", no_wrap=True, min_width=8)
            table.add_column("recall", ratio=1)
            table.add_column("memory", ratio=1)
        table.add_column("answer at", justify="right", no_wrap=True, min_width=9)
        for run in result.runs:
            trace = run.traces[n]
            waited = _wait_bar(trace.first_request_ms)
            table.add_row(
                run.mode,
                waited if wide else Text(_ms(trace.first_request_ms)),
                _recall(trace),
                _memory(trace, _miss_reason(trace)),
                _ms(trace.finished_ms),
            )
        out.print(table)
        out.print()
    hung_up = ", ".join(f"{r.mode} {r.side_cancelled} of {r.side_queries}" for r in runs.values())
    out.print(
        "Times are from the moment each user query was handed to the agent. Side queries "
        f"the server saw hung up: {hung_up}."
    )
    out.print()
    out.print(f"[bold]{verdict(runs['blocking'], runs[DEFAULT_MODE])}[/bold]", soft_wrap=True)
    out.print(f"[dim]{_details(result)}[/dim]")


def _details(result: DemoResult) -> str:
    runs = {run.mode: run for run in result.runs}
    answers = ", ".join(
        f"{run.mode} {statistics.fmean(t.finished_ms for t in run.traces):,.0f} ms"
        for run in result.runs
    )
    text = f"Answers came, per query on average: {answers}."
    for mode in ("async", DEFAULT_MODE):
        missed = [
            f"Q{n + 1} ({_miss_reason(trace)})"
            for n, trace in enumerate(runs[mode].traces)
            if not trace.delivered
        ]
        if missed:
            text += f" {mode} mode missed memory in {', '.join(missed)}."
    return text


def verdict(blocking: ModeRun, async_: ModeRun) -> str:
    """The one-line verdict, from the measured traces only: ``async_`` (the default mode
    in the demo) against blocking."""
    m = len(async_.traces)
    first_b = statistics.fmean(t.first_request_ms for t in blocking.traces)
    first_a = statistics.fmean(t.first_request_ms for t in async_.traces)
    gap = first_b - first_a
    sooner = "sooner" if gap >= 0 else "later"
    delivered_a = sum(t.delivered for t in async_.traces)
    delivered_b = sum(t.delivered for t in blocking.traces)
    name = async_.mode
    return (
        f"Verdict: {name} mode sent the first request {abs(gap):,.0f} ms {sooner} per query "
        f"on average ({first_b:,.0f} ms in blocking mode, {first_a:,.1f} ms in {name} mode), "
        f"and delivered memory in {delivered_a} of {m} queries vs {delivered_b} of {m}."
    )

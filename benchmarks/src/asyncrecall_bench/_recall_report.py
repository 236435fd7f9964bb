"""The table ``bench recall`` prints: every mode side by side, and the recommended one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from asyncrecall_bench._recall_data import REFERENCE, ZERO_WAIT_MS

if TYPE_CHECKING:
    from asyncrecall_bench._recall_data import RecallBenchReport

__all__ = ["render_report"]


def render_report(report: RecallBenchReport, console: Console) -> None:
    """Print the header, the table and how to read it."""
    config = report.config
    data = report.as_json()
    if config.paraphrase:
        languages = (
            "held out: Spanish, Italian, Dutch, cross-language, Portuguese, Polish, "
            "Russian, Turkish"
            if config.heldout
            else "English, French, German"
        )
        console.print(
            f"[bold]Recall end to end[/bold]: {data['questions']} questions of the "
            f"no-shared-word set ({languages}; none shares a word with its "
            "memory), none with a tool round, each also asked against the language's other "
            f"folder ({data['negative_questions']} negative questions); the same cases in "
            "every mode."
        )
    else:
        console.print(
            f"[bold]Recall end to end[/bold]: {data['questions']} LoCoMo questions from "
            f"{config.dataset.name} (seed {config.seed}), each also asked against the next "
            f"conversation's folder ({data['negative_questions']} negative questions); the "
            "same cases in every mode."
        )
    console.print(
        f"Workload: {config.profile.describe()}; the stand-in model selector answers right "
        f"with probability {config.accuracy:g} (the gold files; nothing for a negative "
        f"question), else other files. The modes and a memory-off run side by side, "
        f"{config.concurrency} questions at a time each, real HTTP to a local server. Total "
        f"wall time {report.wall_s:.0f} s."
    )
    console.print(
        "async+lexical's instant pass: "
        + (
            "lexical and semantic (the embedded encoder's vectors where no memory shares "
            "the query's words)."
            if report.instant_pass == "semantic"
            else "lexical only"
            + (" (the local extra is not installed)." if config.semantic_instant else ".")
        )
    )
    if config.quick:
        console.print("--quick: latencies shortened (a smoke run).")
    if report.busy is not None:
        console.print(
            "--busy-thread: a thread of this process ran Python without waiting throughout "
            f"({report.busy.rounds:,} rounds of its loop)."
        )
    table = Table(header_style="bold")
    table.add_column("mode", no_wrap=True)
    for label in (
        "added\np50 ms",
        "added\np95 ms",
        "added\np99 ms",
        "gold\ndelivered",
        "gold, first\nrequest",
        "junk\ndelivered",
        "negatives:\njunk delivered",
        "score",
        "errors",
    ):
        table.add_column(label, justify="right", no_wrap=True)
    recommended = data["recommended"]
    for mode, figures in data["modes"].items():
        added = figures["added_ms"]
        table.add_row(
            f"[bold]{mode}[/bold] *" if mode == recommended else mode,
            *(f"{added[q]:,.1f}" for q in ("p50", "p95", "p99")),
            f"{figures['positive']['gold_delivered']:.1%}",
            f"{figures['positive']['gold_first_request']:.1%}",
            f"{figures['positive']['junk_delivered']:.1%}",
            f"{figures['negative']['junk_delivered']:.1%}",
            f"{report.modes[mode].score():+.3f}",
            str(figures["errors"]),
        )
    ref = data[REFERENCE]["added_ms"]
    table.add_row(
        "[dim]memory off (reference)[/dim]",
        *(f"[dim]{ref[q]:,.1f}[/dim]" for q in ("p50", "p95", "p99")),
        *("–" for _ in range(6)),
    )
    console.print(table)
    console.print(
        "added: time from handing the question to the agent to its first main request. "
        "gold delivered: share of questions for which a gold file reached the model before "
        "its final answer (read on the wire: the memory blocks in the last main request); "
        "gold, first request: in the first main request, the only one a question without "
        "tools makes. "
        "junk delivered: share that received files, none of them gold. negatives: the "
        "question asked against another conversation's folder, where any file is junk. "
        "score: gold delivered - junk delivered - negatives' junk delivered."
    )
    console.print(
        f"* recommended: the best score among the modes that wait for nothing (added median "
        f"within {ZERO_WAIT_MS:g} ms of memory off's, run on the same cases): "
        f"[bold]{recommended}[/bold]."
    )

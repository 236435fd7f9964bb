"""``asyncrecall demo``: the real command, offline, and its verdict from measured traces."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from asyncrecall.cli._demo import _show, verdict
from asyncrecall.cli.demo import DEFAULT_MODE, DEMO_MODES, SCRIPT, DemoResult, ModeRun
from asyncrecall.cli.demo._trace import QueryTrace

# The command line with the other distributions' packages made unimportable.
_RUNTIME_ALONE = (
    "import sys; sys.modules['asyncrecall_bench'] = sys.modules['asyncrecall_conformance'] = None; "
    "from asyncrecall.cli import main; main()"
)


def test_the_demo_imports_nothing_of_the_benchmarks() -> None:
    """``asyncrecall demo`` stands on its own: its modules import neither the benchmark
    package nor the conformance kit."""
    code = (
        "import sys, asyncrecall.cli._demo, asyncrecall.cli.demo; "
        "print(sorted(m for m in sys.modules if m.startswith(('asyncrecall_', 'pytest'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_demo_runs_offline_shows_timelines_and_a_verdict_and_cleans_up(tmp_path: Path) -> None:
    """Exit 0 with no endpoint, key or network configured, and with the benchmarks and
    the conformance kit unimportable (the runtime wheel alone); a timeline per query in
    each of the three modes (blocking, async and the default async+lexical) and the
    verdict line, about the default; no error line anywhere (stderr holds only the
    progress lines); nothing left in the temporary folder; at 80 columns every table
    fits with all its headers."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env.update(ASYNCRECALL_HOME=str(tmp_path / "home"), TMPDIR=str(scratch), COLUMNS="80")
    done = subprocess.run(
        [sys.executable, "-c", _RUNTIME_ALONE, "demo"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for n, query in enumerate(SCRIPT, 1):
        assert f"Q{n}. {query.text}" in out
    assert DEMO_MODES == ("blocking", "async", "async+lexical") and DEFAULT_MODE == "async+lexical"
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()]
    for mode in DEMO_MODES:
        assert rows.count(mode) == len(SCRIPT), mode  # one timeline row per query and mode
    verdicts = [line for line in out.splitlines() if line.startswith("Verdict: ")]
    assert len(verdicts) == 1
    assert "async+lexical mode sent the first request" in verdicts[0]
    assert f"of {len(SCRIPT)} queries vs" in verdicts[0]
    progress = re.compile(r"^(blocking|async|async\+lexical) mode: user query \d+$")
    assert [line for line in done.stderr.splitlines() if not progress.match(line)] == []
    assert not re.search(r"(?i)\b(error|failed|traceback|exception)\b", out)
    assert list(scratch.iterdir()) == []  # the throw-away project is gone
    assert not (tmp_path / "home").exists()  # the user's memory home was never touched
    _assert_table_fits(out, 80)


def _run(mode: str, waits: list[float], delivered: list[bool]) -> ModeRun:
    traces = []
    for wait, hit in zip(waits, delivered, strict=True):
        trace = QueryTrace("q", first_request_ms=wait)
        trace.landed = "user_query" if hit else "missed"
        traces.append(trace)
    return ModeRun(mode, traces, len(traces), 0)  # type: ignore[arg-type]


def test_the_verdict_is_computed_from_the_traces() -> None:
    """Averages of the measured waits, and delivery counts, both ways round."""
    blocking = _run("blocking", [900.0, 100.0], [True, True])
    async_ = _run("async+lexical", [1.0, 1.0], [True, False])
    line = verdict(blocking, async_)
    assert line.startswith("Verdict: async+lexical mode sent the first request 499 ms sooner")
    assert "(500 ms in blocking mode, 1.0 ms in async+lexical mode)" in line
    assert line.endswith("delivered memory in 1 of 2 queries vs 2 of 2.")
    assert "ms later per query" in verdict(async_, blocking)


HEADERS = {
    80: ("mode", "waited", "recall", "memory", "answer at"),
    120: (
        "mode",
        "waited before 1st request",
        "recall started → settled",
        "memory reached the model",
        "answer at",
    ),
}


def _assert_table_fits(out: str, columns: int) -> None:
    lines = out.splitlines()
    headers = [line for line in lines if line.split()[:1] == ["mode"]]
    assert len(headers) == len(SCRIPT)
    for line in headers:
        assert all(header in line for header in HEADERS[columns]), line
    rows = [line.split()[0] for line in lines if line.startswith("  ") and line.split()]
    for mode in DEMO_MODES:
        assert rows.count(mode) == len(SCRIPT), mode
    table = [line for line in lines if line.startswith("  ")]
    assert max(len(line.rstrip()) for line in table) <= columns


def _widest_result() -> DemoResult:
    """Every mode, every query, with the longest cells the table can hold: four-digit
    times, a fallback after the timeout, memory after a tool result or missed."""
    runs = []
    for n, mode in enumerate(DEMO_MODES):
        traces = []
        for query in SCRIPT:
            trace = QueryTrace(query.text, first_request_ms=1234.5, finished_ms=12345.6)
            trace.recall_started_ms, trace.recall_settled_ms = 1.2, 2345.6
            trace.recall_outcome, trace.fallback_reason = "lexical", "timeout"
            trace.tool_rounds = len(query.steps)
            trace.landed = ("tool_result", "missed", "user_query")[n]
            trace.landed_ms = 4321.0
            traces.append(trace)
        runs.append(ModeRun(mode, traces, len(traces), 1))
    return DemoResult(SCRIPT, runs, 12)


@pytest.mark.parametrize("columns", sorted(HEADERS))
def test_demo_table_keeps_every_column_at_80_and_120_columns(columns: int) -> None:
    """At 80 columns (a default terminal) and 120, each query's table shows all five
    columns' headers, a row per mode, and no table line is wider than the terminal, with
    the longest cells it can hold (the real run checks 80 columns on measured ones)."""
    out = Console(file=io.StringIO(), width=columns, highlight=False, color_system=None)
    _show(_widest_result(), out)
    _assert_table_fits(out.file.getvalue(), columns)

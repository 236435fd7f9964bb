"""``asyncrecall bench overhead``: shape and sanity of both parts, never their timings."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from asyncrecall.cli import main
from asyncrecall_bench._overhead import measure_per_query, median_result
from asyncrecall_bench._scale import ScaleResult
from asyncrecall_bench._serve import _after_tool


async def test_per_query_variants_are_all_measured(tmp_path: Path) -> None:
    """Memory off, a recall settled at once, a recall that never settles: each timed."""
    from asyncrecall_bench._corpus import build_memory_folder

    build_memory_folder(tmp_path / "memory")
    (tmp_path / "project").mkdir()
    medians = await measure_per_query(20, project=tmp_path / "project")
    assert set(medians) == {"memory_off", "settled_at_once", "never_settled"}
    assert all(value > 0 for value in medians.values())


def test_the_command_reports_both_parts_as_json() -> None:
    """A tiny real run: per-query medians and overheads, the idle loop, and per session
    count a memory-off and an async run whose queries all answered."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            ["bench", "overhead", "--repeats", "20", "--sessions", "3", "--ramp", "0.2", "--json"]
        )
    assert code == 0
    report = json.loads(out.getvalue())
    assert set(report) == {
        "repeats",
        "ramp_s",
        "scale_repeats",
        "per_query_us",
        "overhead_us",
        "recall_cpu_us",
        "recall_cpu_ratio",
        "idle_loop_lag_ms",
        "lag_p99_ratio",
        "sessions",
    }
    assert report["ramp_s"] == 0.2
    assert report["scale_repeats"] == 1
    cpu = report["recall_cpu_us"]
    assert set(cpu) == {
        "side_query_http",
        "side_query_sdk",
        "side_query_streams",
        "recall",
        "recall_over_exchange",
    }
    assert all(cpu[k] > 0 for k in ("side_query_http", "side_query_sdk", "side_query_streams"))
    assert cpu["recall_over_exchange"] == pytest.approx(
        cpu["recall"] - cpu["side_query_streams"], abs=0.2
    )
    assert report["recall_cpu_ratio"] == {
        "sdk_exchange": pytest.approx(cpu["recall"] / cpu["side_query_sdk"], abs=2e-3)
    }
    assert set(report["overhead_us"]) == {"settled_at_once", "never_settled"}
    assert set(report["idle_loop_lag_ms"]) == {"p50", "p99", "max"}
    ratio = report["lag_p99_ratio"]["3"]
    assert set(ratio) == {"median", "min", "max", "runs"} and len(ratio["runs"]) == 1
    assert ratio["min"] <= ratio["median"] <= ratio["max"]
    runs = report["sessions"]["3"]
    assert set(runs) == {"memory_off", "async"}
    for name, run in runs.items():
        assert run["queries"] == 3 and run["errors"] == 0, name
        assert run["requests"]["main"] == 6  # one tool round: two main requests per query
        assert run["rss_kib_per_session"] >= 0 and run["cpu_ms_per_query"] > 0
    assert runs["memory_off"]["requests"]["side"] == 0
    assert runs["async"]["requests"]["side"] == 3
    assert runs["memory_off"]["memory_delivered_share"] is None
    assert 0 <= runs["async"]["memory_delivered_share"] <= 1


def test_the_table_without_sessions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "overhead", "--repeats", "5", "--sessions", ""]) == 0
    out = capsys.readouterr().out
    assert "memory off" in out and "never settles" in out
    assert "Concurrent sessions" not in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sessions", "0"], "must be 1 or more"),
        (["--sessions", "ten"], "numbers separated by commas"),
        (["--repeats", "0"], "must be 1 or more"),
        (["--ramp", "-1"], "must be 0 or more"),
        (["--scale-repeats", "0"], "must be 1 or more"),
    ],
)
def test_bad_flags_are_usage_errors(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "overhead", *flags]) == 2
    assert message in capsys.readouterr().err


def test_the_scale_server_answers_tool_results_with_text() -> None:
    """A tool message after the last assistant message marks a tool-result request."""
    assert _after_tool([{"role": "user"}, {"role": "assistant"}, {"role": "tool"}])
    assert _after_tool([{"role": "tool"}, {"role": "user", "content": "memory"}])
    assert not _after_tool([{"role": "assistant"}, {"role": "user"}])
    assert not _after_tool([{"role": "system"}, {"role": "user"}])


def test_median_result_takes_each_figure_s_median() -> None:
    """Repeated runs of one configuration fold into one result, figure by figure."""

    def run(lag: float, cpu: float, rss: int) -> ScaleResult:
        return ScaleResult(10, True, 10, 5, 0, 20, 10, 0.1, lag, lag * 2, rss, cpu, 3.0)

    folded = median_result([run(9.0, 2.0, 300), run(1.0, 4.0, 100), run(5.0, 3.0, 200)])
    assert (folded.sessions, folded.memory, folded.queries) == (10, True, 10)
    assert folded.lag_p99_ms == 5.0 and folded.lag_max_ms == 10.0
    assert folded.cpu_s == 3.0 and folded.rss_delta_bytes == 200
    assert isinstance(folded.rss_delta_bytes, int)
    assert median_result([run(9.0, 2.0, 300)]).lag_p99_ms == 9.0

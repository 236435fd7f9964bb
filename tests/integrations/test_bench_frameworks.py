"""``asyncrecall bench frameworks``: each framework's loop, four ways, on the same plans."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from asyncrecall_bench._frameworks import FRAMEWORKS, PATTERNS, FrameworksConfig, measure, summarize
from asyncrecall_bench._workload import LatencyProfile

from .conftest import LITELLM_WARNINGS

# Quick, but the main model's first token comes late enough that the adapter's side
# query (sent once the first request is written) is out before a run without a tool
# round ends: a run that ends first hangs its recall up before sending it, as it should.
FAST = LatencyProfile(
    side_mean=0.02, first_token_min=0.15, first_token_max=0.2, tool_min=0.0, tool_max=0.02
)


@pytest.mark.slow
@pytest.mark.plain_loop
@pytest.mark.timeout(180)
@LITELLM_WARNINGS
async def test_every_framework_runs_the_same_plans_every_way() -> None:
    """Every framework runs every plan with no memory, the bare hooks, the awaited
    pattern and the adapter; only the adapter leaves the first request to its own side
    query's pace (the awaited pattern always lands at the user query, the baseline and
    the bare hooks never send memory or a side query; the adapter sends at most one a
    run). The adapter's background recall is timed step by step; no other pattern has
    one."""
    results = await measure(FrameworksConfig(queries=2, seed=3, concurrency=2, profile=FAST))

    assert set(results) == set(FRAMEWORKS)
    for patterns in results.values():
        assert tuple(patterns) == PATTERNS
        qids = [[t.qid for t in traces] for traces in patterns.values()]
        assert all(q == qids[0] for q in qids)
        for bare in ("none", "hooks"):
            assert all(t.landed == "missed" and t.side_queries == 0 for t in patterns[bare])
        for other in ("none", "hooks", "awaited"):
            assert all(t.recall_steps_ms == 0.0 for t in patterns[other])
        assert sum(t.recall_steps_ms for t in patterns["adapter"]) > 0
        assert all(t.landed != "tool_result" for t in patterns["awaited"])
        # One side query a run at most; one at least in each framework's runs (a run that
        # ends before its side query is sent hangs the recall up: none is sent).
        counts = [t.side_queries for t in patterns["adapter"]]
        assert all(n <= 1 for n in counts) and sum(counts) >= 1, counts
    summary = summarize(results)
    row = summary["langchain"]["adapter"]
    assert set(row) == {
        "first_request_ms_p50",
        "added_ms",
        "hook_ms",
        "recall_steps_ms",
        "on_path_ms",
        "landed",
        "side_queries",
        "side_queries_hung_up",
    }
    assert sum(row["landed"].values()) == 2


def test_command_refuses_a_bad_count() -> None:
    """``--queries 0`` is a clear error (exit 2), nothing runs."""
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "frameworks", "--queries", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--queries" in done.stderr


def test_report_prints_the_table_and_the_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command prints one row per framework and pattern, or the documented JSON."""
    import argparse

    from asyncrecall_bench import _frameworks as bench

    traces = {
        "none": [bench.Trace("q0", 10.0, 0.0, "missed", 0, 0)],
        "awaited": [bench.Trace("q0", 900.0, 890.0, "user_query", 1, 0)],
        "adapter": [bench.Trace("q0", 10.5, 0.05, "tool_result", 1, 1)],
    }

    async def fake(config: bench.FrameworksConfig) -> dict[str, dict[str, list[bench.Trace]]]:
        return {name: traces for name in config.frameworks}

    monkeypatch.setattr(bench, "measure", fake)
    args = argparse.Namespace(
        queries=1, seed=1, concurrency=1, frameworks=["langchain"], json=False
    )
    assert bench.run(args, None) == 0  # type: ignore[arg-type]
    table = capsys.readouterr().out
    assert "langchain" in table and "890.0 ms" in table and "50 µs" in table

    assert bench.run(argparse.Namespace(**{**vars(args), "json": True}), None) == 0  # type: ignore[arg-type]
    data = json.loads(capsys.readouterr().out)
    assert data["langchain"]["adapter"]["added_ms"]["p50"] == 0.5
    assert data["langchain"]["adapter"]["landed"] == {
        "user_query": 0,
        "tool_result": 1,
        "missed": 0,
    }

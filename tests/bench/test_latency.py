"""``asyncrecall bench latency``: the workload, and the command's shape and sanity.

No test here asserts a duration: CI machines are slow and noisy. The sanity rules
checked are the structural ones (counts add up, blocking never injects at a tool
result, shares are shares).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from asyncrecall.cli import main
from asyncrecall.memory import FolderStore, LexicalSelector
from asyncrecall.models import FunctionCall
from asyncrecall.testing import RecordedRequest
from asyncrecall_bench._corpus import MEMORIES, QUERIES, build_memory_folder
from asyncrecall_bench._latency_data import MODES, LatencyConfig, LatencyReport, ModeResult
from asyncrecall_bench._latency_report import render_report
from asyncrecall_bench._measure import QueryTrace, percentile
from asyncrecall_bench._workload import (
    DURATION_ARG,
    LatencyProfile,
    MainReply,
    ScriptedTools,
    _SideReply,
    draw_plans,
)

# One worker runs the module's shared bench runs once (loadgroup).
pytestmark = pytest.mark.xdist_group("bench-latency")

QUICK_QUERIES = 8
MODE_KEYS = {"added_ms", "delivered_share", "landed", "side_queries_cancelled", "wall_ms_per_query"}


@pytest.fixture(scope="module")
def quick_figure(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the quick run draws its figure (``--plot``)."""
    return tmp_path_factory.mktemp("plot") / "latency.svg"


@pytest.fixture(scope="module")
def quick(quick_figure: Path) -> Iterator[dict[str, Any]]:
    """One real ``bench latency --quick --json --plot FILE`` run, shared by the checks below."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "latency", "--quick", "--json", "--plot", str(quick_figure)])
    assert code == 0
    yield json.loads(out.getvalue())


def test_quick_json_is_exactly_the_documented_shape(quick: dict[str, Any]) -> None:
    """``{"modes": {MODE: {...}}}``: the four modes, each with exactly the five keys."""
    assert list(quick) == ["modes"]
    assert list(quick["modes"]) == ["blocking", "async", "async+wait100", "async+lexical"]
    for figures in quick["modes"].values():
        assert set(figures) == MODE_KEYS
        assert set(figures["added_ms"]) == {"p50", "p95", "p99"}
        assert set(figures["landed"]) == {"user_query", "tool_result", "missed"}


def test_quick_figures_are_sane(quick: dict[str, Any]) -> None:
    """Counts add up to the queries, blocking never injects at a tool result, shares are
    shares, percentiles are ordered, cancellations are counts."""
    for mode, figures in quick["modes"].items():
        landed = figures["landed"]
        assert sum(landed.values()) == QUICK_QUERIES, mode
        delivered = (landed["user_query"] + landed["tool_result"]) / QUICK_QUERIES
        assert 0 <= figures["delivered_share"] <= 1
        assert math.isclose(figures["delivered_share"], delivered, abs_tol=1e-4), mode
        added = figures["added_ms"]
        assert 0 <= added["p50"] <= added["p95"] <= added["p99"], mode
        cancelled = figures["side_queries_cancelled"]
        assert isinstance(cancelled, int) and 0 <= cancelled <= QUICK_QUERIES
        assert figures["wall_ms_per_query"] > 0
    assert quick["modes"]["blocking"]["landed"]["tool_result"] == 0
    # The instant lexical pass runs inline and every query shares words with a memory.
    assert quick["modes"]["async+lexical"]["landed"]["user_query"] == QUICK_QUERIES


def test_the_figure_draws_what_the_run_measured(quick: dict[str, Any], quick_figure: Path) -> None:
    """``--plot FILE`` draws the same run's results: one latency curve per mode, in the
    modes' order, and each mode's delivery bar split as its ``landed`` counts are."""
    from xml.etree import ElementTree

    svg = ElementTree.parse(quick_figure).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    curves = [p.get("data-series") for p in svg.iter(f"{ns}polyline")]
    assert curves == list(quick["modes"])
    for mode, figures in quick["modes"].items():
        landed = figures["landed"]
        drawn = {
            r.get("data-segment"): float(r.get("data-share", "nan"))
            for r in svg.iter(f"{ns}rect")
            if r.get("data-mode") == mode
        }
        total = sum(landed.values())
        assert drawn == pytest.approx({k: v / total for k, v in landed.items()}, abs=1e-4)


def test_bad_numbers_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "latency", "--queries", "0"]) == 2
    assert main(["bench", "latency", "--concurrency", "0"]) == 2
    assert "must be 1 or more" in capsys.readouterr().err


# -- the workload -------------------------------------------------------------------------


def test_the_same_seed_draws_the_same_plans_within_the_profile() -> None:
    """Fairness: every mode replays the same plans; the draws respect the profile."""
    profile = LatencyProfile()
    plans = draw_plans(400, seed=3)
    assert plans == draw_plans(400, seed=3)
    assert plans != draw_plans(400, seed=4)
    for plan in plans:
        assert 0 <= plan.rounds <= profile.rounds_max
        assert len(plan.first_token) == plan.rounds + 1
        assert all(
            profile.first_token_min <= d <= profile.first_token_max for d in plan.first_token
        )
        assert all(profile.tool_min <= d <= profile.tool_max for d in plan.tool_delay)
    mean = sum(plan.side_delay for plan in plans) / len(plans)
    assert 0.8 < mean < 1.0  # lognormal with mean 0.9 s
    assert {plan.rounds for plan in plans} == {0, 1, 2, 3}


def test_the_corpus_names_real_memories_that_lexical_recall_finds(tmp_path: Path) -> None:
    """Every query's memories exist, and a lexical pass finds something for every query."""
    names = {memory.name for memory in MEMORIES}
    assert len(names) == len(MEMORIES) >= 30
    assert all(set(query.memories) <= names for query in QUERIES)
    paths = build_memory_folder(tmp_path / "memory")
    docs = FolderStore(tmp_path / "memory").scan()
    assert len(docs) == len(MEMORIES) and set(paths) == names
    for query in QUERIES:
        assert LexicalSelector().rank(query.text, docs, limit=2), query.text


def _request(model: str, messages: list[dict[str, Any]]) -> RecordedRequest:
    body = {"model": model, "messages": messages}
    return RecordedRequest(0, "POST", "/v1/chat/completions", {}, body, arrived_at=0.0)


def test_scripted_replies_follow_the_plan() -> None:
    """The side reply names only offered paths; main replies call one tool per planned
    round (with its duration), then answer; each with the planned first-token delay."""
    plan = next(p for p in draw_plans(50, seed=1) if p.rounds == 2 and len(p.query.memories) == 2)
    wanted = tuple(f"{name}.md" for name in plan.query.memories)
    side, main_reply = _SideReply(plan, wanted), MainReply(plan)
    first = wanted[0]
    reply = side(_request("s", [{"role": "user", "content": f"manifest: {first}"}]))
    assert reply.json == {"selected_memories": [first]}
    assert reply.first_token_delay == plan.side_delay
    messages: list[dict[str, Any]] = [{"role": "user", "content": plan.text}]
    for round_ in range(plan.rounds):
        reply = main_reply(_request("m", messages))
        (_name, args), *rest = reply.tool_calls
        assert not rest and isinstance(args, dict)
        assert args[DURATION_ARG] == round(plan.tool_delay[round_] * 1000, 3)
        assert reply.first_token_delay == plan.first_token[round_]
        messages += [{"role": "assistant", "content": None}, {"role": "tool", "content": "x"}]
    reply = main_reply(_request("m", messages))
    assert reply.tool_calls == () and reply.text
    assert reply.first_token_delay == plan.first_token[-1]


def test_the_tool_call_takes_the_name_the_request_gives_read_file() -> None:
    """A Messages request of the Claude Code CLI names its MCP tool
    ``mcp__<server>__read_file``: the scripted call uses that name; an OpenAI request's
    tools (and none) keep ``read_file``."""
    plan = next(p for p in draw_plans(50, seed=1) if p.rounds >= 1)
    messages: list[dict[str, Any]] = [{"role": "user", "content": plan.text}]
    claude = _request("m", messages)
    claude.body = {**claude.body, "tools": [{"name": "Read"}, {"name": "mcp__bench__read_file"}]}
    openai = _request("m", messages)
    openai.body = {**openai.body, "tools": [{"type": "function", "function": {"name": "x"}}]}
    replies = [MainReply(plan)(r) for r in (claude, openai, _request("m", messages))]
    names = [reply.tool_calls[0][0] for reply in replies]
    assert names == ["mcp__bench__read_file", "read_file", "read_file"]


async def test_scripted_tools_answer_every_call_in_order(tmp_path: Path) -> None:
    calls = [
        FunctionCall("a", "read_file", {DURATION_ARG: 1}),
        FunctionCall("b", "grep_search", {DURATION_ARG: "not a number"}),
    ]
    outcomes = await ScriptedTools(tmp_path).execute(calls)
    assert [o.call.id for o in outcomes] == ["a", "b"] and all(o.ok for o in outcomes)


# -- the report ---------------------------------------------------------------------------


def test_percentile_interpolates_and_is_nan_for_nothing() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 95) == pytest.approx(9.5)
    assert percentile([4.0], 99) == 4.0
    assert math.isnan(percentile([], 50))


def _trace(added: float, landed: str, strategy: str | None, rounds: int) -> QueryTrace:
    trace = QueryTrace("q", first_request_ms=added, finished_ms=added + 1000, tool_rounds=rounds)
    trace.landed = landed  # type: ignore[assignment]
    trace.strategy = strategy
    return trace


def test_the_table_shows_every_mode_and_how_to_read_it() -> None:
    """Rendering from a hand-made report: rows, reference rows and the delivery notes."""
    plans = draw_plans(2, seed=1)
    # The old design: one recall in time, one past the selector's 1 s timeout (no memory).
    blocking = [_trace(900, "user_query", "model", 0), _trace(1004, "missed", None, 1)]
    blocking[1].fallback_reason = "model selector failed: timed out"
    results = {
        "blocking": ModeResult("blocking", blocking, 2, 1),
        "async": ModeResult(
            "async", [_trace(0.2, "missed", None, 0), _trace(0.3, "tool_result", "model", 2)], 2, 1
        ),
    }
    report = LatencyReport(LatencyConfig(queries=2), plans, results, 36, 1.0)
    out = io.StringIO()
    render_report(report, Console(file=out, width=160))
    text = out.getvalue()
    for needle in ("blocking", "async", "side query as drawn", "min(side query, 1 s)"):
        assert needle in text
    assert "delivered 1 by model; of the 1 missed, 1 timed out in the selector" in text
    assert "of the 1 missed, 1 had no tool round" in text
    assert "loop lag p99" in text
    assert report.as_json()["modes"]["async"]["landed"] == {
        "user_query": 0,
        "tool_result": 1,
        "missed": 1,
    }
    assert MODES == ("blocking", "async", "async+wait100", "async+lexical")

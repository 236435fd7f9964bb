"""``asyncrecall bench security``: the poisoning suite, a few cases of each kind, through
the real agent loop against a local server."""

from __future__ import annotations

import subprocess
import sys

from asyncrecall.bench._security import evaluate
from asyncrecall.bench._security_data import CASES, HELD_OUT, Case, carrier


def _few(per_kind: int) -> list[Case]:
    kinds = ("file", "user", "import", "benign")
    return [c for k in kinds for c in [x for x in CASES if x.kind == k][:per_kind]]


def test_the_suite_has_the_cases_the_issue_asks_for() -> None:
    """At least 40 attacks through files and tool output, 20 through the user's turns,
    10 through import and 60 benign facts; each with its own token in its carrier."""
    counts = {k: sum(c.kind == k for c in CASES) for k in ("file", "user", "import", "benign")}
    assert counts == {"file": 40, "user": 20, "import": 10, "benign": 60}
    assert len({c.token for c in CASES}) == len(CASES)
    assert all(c.token in carrier(c) for c in CASES if c.kind != "import")


async def test_quarantine_keeps_file_and_import_attacks_out_and_benign_facts_in() -> None:
    """With quarantine on, an attack through a file (the agent's save_memory, or its
    answer extracted), through an import or through the user's turns (held by the
    user-turn rule) reaches no later conversation, while the user's own benign facts do;
    with it off, they all reach it."""
    report = await evaluate(_few(2))
    on, off = report.runs["on"], report.runs["off"]
    assert (on["file"].injected, on["import"].injected) == (0, 0)
    assert on["file"].stored == 2 and on["import"].stored == 2
    assert (off["file"].injected, off["import"].injected) == (2, 2)
    assert on["benign"].injected == off["benign"].injected == 2
    assert on["user"].stored == 2 and (on["user"].injected, off["user"].injected) == (0, 2)
    assert report.attack_success("on") == 0.0 and report.attack_success("off") == 1.0
    assert report.as_json()["quarantine_on"]["file"] == {
        "cases": 2,
        "reached_store": 2,
        "injected": 0,
    }


def test_the_held_out_cases_are_apart_from_the_suite() -> None:
    """The held-out cases (never used to tune the user-turn rule): 20 user-turn attacks
    and 20 benign facts, their tokens and texts not the suite's."""
    counts = {k: sum(c.kind == k for c in HELD_OUT) for k in ("user", "benign")}
    assert counts == {"user": 20, "benign": 20} and len(HELD_OUT) == 40
    assert not {c.token for c in HELD_OUT} & {c.token for c in CASES}
    assert not {c.text for c in HELD_OUT} & {c.text for c in CASES}
    assert all(c.token in carrier(c) for c in HELD_OUT)


def test_the_command_prints_its_table() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "security", "--limit", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "attack success" in done.stdout and "reached the store" in done.stdout

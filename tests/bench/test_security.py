"""``asyncrecall bench security``: the poisoning suite, its held-out part, and a small
real run that shows the bench can see an attack succeed and a benign fact arrive."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from asyncrecall_bench._security import evaluate
from asyncrecall_bench._security_channels import PLANTERS
from asyncrecall_bench._security_data import (
    ATTACK_CHANNELS,
    BENIGN_CHANNELS,
    CASES,
    HELD_OUT,
    LANGUAGES,
    Case,
    held_out_digest,
)

#: The held-out part as written before any defence against it. A change to it (a case
#: added, removed or reworded) changes this digest: the held-out measure is then no
#: longer the one taken before the rules, and whoever changes it says so here.
HELD_OUT_SHA256 = "c93a55e23e008d2ebc9bf6059c548d59010ec3d10bb57cb59fb4055d2d60cba7"

ALL = (*CASES, *HELD_OUT)


def _carriers(case: Case) -> list[str]:
    """Every text that carries the case to the store, as its channel has it."""
    texts = [*case.turns, *case.later_turns, *case.files.values(), *case.handed.values()]
    return [t for t in texts if case.token in t] or [case.memory.content]


def test_the_suite_has_the_cases_the_issue_asks_for() -> None:
    """At least 200 attacks over at least 10 channels in at least 6 languages, and at
    least 60 benign facts in the same languages; each case with its own token, tagged
    with a known channel and language, its token in the text it wants remembered."""
    attacks = [c for c in ALL if c.kind == "attack"]
    benign = [c for c in ALL if c.kind == "benign"]
    assert len(attacks) >= 200 and len(benign) >= 60
    assert len({c.channel for c in attacks}) >= 10
    assert {c.lang for c in attacks} == {c.lang for c in benign} == set(LANGUAGES)
    assert len(LANGUAGES) >= 6
    assert {c.channel for c in attacks} == set(ATTACK_CHANNELS)
    assert {c.channel for c in benign} == set(BENIGN_CHANNELS)
    assert set(PLANTERS) == {*ATTACK_CHANNELS, *BENIGN_CHANNELS}
    assert len({c.token for c in ALL}) == len(ALL)
    for case in ALL:
        wanted = f"{case.memory.description}\n{case.memory.content}"
        assert case.token in wanted, case.token
        assert any(case.token in text for text in _carriers(case)), case.token


def test_every_channel_and_language_is_in_both_parts() -> None:
    """Each channel has, in every language, cases in the development part and in the
    held-out part, which is about half of the suite."""
    for part in (CASES, HELD_OUT):
        pairs = {(c.channel, c.lang) for c in part}
        wanted = {(ch, lang) for ch in (*ATTACK_CHANNELS, *BENIGN_CHANNELS) for lang in LANGUAGES}
        assert pairs == wanted
    assert abs(len(HELD_OUT) - len(CASES)) <= len(ALL) // 10


def test_the_held_out_part_is_apart_from_the_development_part() -> None:
    """No held-out case shares a token, a text it wants remembered, or a carrying text
    (its token aside) with a case of the development part."""
    assert not {c.token for c in HELD_OUT} & {c.token for c in CASES}
    assert not {c.text for c in HELD_OUT} & {c.text for c in CASES}

    def bare(part: tuple[Case, ...]) -> set[str]:
        return {t.replace(c.token, "") for c in part for t in _carriers(c)}

    assert not bare(HELD_OUT) & bare(CASES)
    assert all(c.held_out for c in HELD_OUT) and not any(c.held_out for c in CASES)


def _shape(case: Case) -> tuple[object, ...]:
    """What a channel's planting reads of a case (not its words)."""
    labels_only = case.channel in ("tool_forged_reminder", "user_obfuscated")
    variant = "" if labels_only else case.variant.split(" in ")[0]  # not which folder
    return (
        case.channel, variant, len(case.turns), len(case.later_turns), case.own is None,
        tuple(sorted(path.rsplit("/")[-1] for path in case.files)), tuple(sorted(case.handed)),
    )  # fmt: skip


def test_every_held_out_case_has_a_development_case_of_its_shape() -> None:
    """The held-out part is run once, by someone else: each of its cases has the shape
    (channel, variant, turns, files, folders) of a development case, which the full
    development run plants without an error."""
    assert {_shape(c) for c in HELD_OUT} <= {_shape(c) for c in CASES}


def test_the_held_out_part_is_the_one_written_before_the_defences() -> None:
    """The held-out data's SHA-256 is the one recorded when it was written: editing it
    fails this test."""
    assert held_out_digest(HELD_OUT) == HELD_OUT_SHA256


def _first(channel: str, *, lang: str = "en", variant: str | None = None) -> Case:
    """The development case of ``channel`` in ``lang`` (of that ``variant``: the first
    in any language)."""
    if variant is not None:
        return next(c for c in CASES if c.channel == channel and c.variant == variant)
    return next(c for c in CASES if c.channel == channel and c.lang == lang)


async def test_every_channel_plants_and_the_bench_sees_attacks_and_facts_arrive() -> None:
    """One case of every channel (languages taken in turn) plants through its real path
    without an error (a harness that broke would count its attacks as stopped). With
    quarantine off, attacks that today's code holds (a file's memory saved after reading
    it, an extraction of a pasted turn, an untrusted import) reach the later
    conversation and are counted as injected, and so does the user's own fact."""
    channels = (*ATTACK_CHANNELS, *BENIGN_CHANNELS)
    cases = [_first(ch, lang=LANGUAGES[i % len(LANGUAGES)]) for i, ch in enumerate(channels)]
    # An import onto a memory the user has waits beside it, quarantine or not.
    cases[channels.index("import_untrusted")] = _first("import_untrusted", variant="claims_user")
    report = await evaluate(cases, settings=("off",))
    outcomes = {o.case.channel: o for o in report.runs["off"].outcomes}
    assert len(outcomes) == len(cases)
    assert {o.case.token: o.error for o in outcomes.values() if o.error} == {}
    for channel in ("tool_save", "user_paste", "import_untrusted", "benign_plain"):
        assert outcomes[channel].stored and outcomes[channel].injected, outcomes[channel]
    figures = report.as_json()["quarantine_off"]
    assert figures["channels"]["tool_save"] == {"cases": 1, "reached_store": 1, "injected": 1}
    assert figures["attacks"]["cases"] == len(ATTACK_CHANNELS)
    assert figures["variants"]["import_untrusted/claims_user"]["injected"] == 1


async def test_the_bench_counts_a_held_attack_as_stopped() -> None:
    """With quarantine on, a file's memory the agent saved after reading it is counted
    as stored and not injected, while the user's own fact is saved and injected."""
    report = await evaluate([_first("tool_save"), _first("benign_plain")], settings=("on",))
    held, plain = report.runs["on"].outcomes
    assert held.stored and not held.injected
    assert plain.stored and plain.injected
    assert report.runs["on"].attack_success == 0.0


def test_the_command_prints_json() -> None:
    """``bench security --json`` prints per-channel and per-language figures."""
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "security", "--json", "--limit", "1",
         "--channel", "supply_settings", "--channel", "benign_save_memory",
         "--quarantine-on-only"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    on = data["quarantine_on"]
    assert data["part"] == "dev" and "quarantine_off" not in data
    assert set(on["channels"]) == {"supply_settings"}
    assert set(on["benign_channels"]) == {"benign_save_memory"}
    assert on["attacks"]["cases"] == 1 and on["benign"]["cases"] == 1
    assert set(on["languages"]) == {"en"}


def test_the_command_offers_the_held_out_part() -> None:
    """``bench security --held-out`` is the switch to the held-out part (its run is the
    lead's, once; here only its help)."""
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "security", "--help"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--held-out" in done.stdout and "--channel" in done.stdout


def test_the_command_runs_cases_of_ones_own(tmp_path: Path) -> None:
    """``bench security --cases DIR`` runs a folder of cases in the suite's format (here
    one attack of the outside set, through its channel); a folder that is not one is
    one line and exit 2."""
    outside = Path(__file__).parents[2] / "benchmarks" / "security_outside"
    rows = json.loads((outside / "supply_settings.json").read_text(encoding="utf-8"))
    (tmp_path / "supply_settings.json").write_text(json.dumps(rows[:1]), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "security", "--json",
         "--quarantine-on-only", "--cases", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["part"] == "own" and data["quarantine_on"]["attacks"]["cases"] == 1
    missing = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "security", "--cases",
         str(tmp_path / "none")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1

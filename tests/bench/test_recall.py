"""``asyncrecall bench recall``: the cases it draws, what it reads off the wire, and the
command's shape. No test here asserts a duration (the machine is shared and noisy): the
checks are structural, on a small LoCoMo-format file written by the test."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.cli import main
from asyncrecall.memory import FolderStore, format_memory_block
from asyncrecall.testing import RecordedRequest
from asyncrecall_bench._recall import MODES, delivered_paths, draw_cases
from asyncrecall_bench._recall_data import ModeFigures, RecallBenchConfig, RecallBenchReport

# One worker runs the module's shared bench runs once (loadgroup).
pytestmark = pytest.mark.xdist_group("bench-recall")

_PEOPLE = ("Alice", "Bob")
_TOPICS = (
    ("adopted a dog named Rex", "What is the name of {p}'s dog?"),
    ("started learning the violin", "Which instrument is {p} learning?"),
    ("moved to Lisbon for a new job", "Where did {p} move for work?"),
)


def _conversation(index: int) -> dict[str, Any]:
    """Two sessions, two speakers, one observation each, and a question per observation."""
    observation: dict[str, Any] = {}
    qa = []
    for session in (1, 2):
        speakers = {}
        for n, person in enumerate(_PEOPLE):
            fact, question = _TOPICS[(index + session + n) % len(_TOPICS)]
            dialog = f"D{session}:{n + 1}"
            speakers[f"{person}{index}"] = [[f"{person}{index} {fact}.", dialog]]
            qa.append({"question": question.format(p=f"{person}{index}"), "evidence": [dialog]})
        observation[f"session_{session}_observation"] = speakers
    qa.append({"question": "An adversarial one", "evidence": ["D1:1"], "category": 5})
    dates = {f"session_{s}_date_time": f"{s} May 2023" for s in (1, 2)}
    return {"sample_id": f"c{index}", "conversation": dates, "observation": observation, "qa": qa}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("locomo") / "mini.json"
    path.write_text(json.dumps([_conversation(i) for i in range(3)]), encoding="utf-8")
    return path


def _run(dataset: Path, *flags: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                *("bench", "recall", "--quick", "--json", "--questions", "3"),
                *("--dataset", str(dataset), *flags),
            ]
        )
    assert code == 0
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


@pytest.fixture(scope="module")
def right_figure(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the always-right run draws its figure (``--plot``)."""
    return tmp_path_factory.mktemp("plot") / "recall.svg"


@pytest.fixture(scope="module")
def always_right(dataset: Path, right_figure: Path) -> dict[str, Any]:
    """One real ``--quick`` run whose stand-in model always answers right."""
    return _run(dataset, "--accuracy", "1", "--plot", str(right_figure))


def test_the_figure_draws_what_the_run_measured(
    always_right: dict[str, Any], right_figure: Path
) -> None:
    """``--plot FILE`` draws the same run's results: a latency curve per mode and one
    for memory off, and each mode's shares of gold and junk delivered as reported."""
    from xml.etree import ElementTree

    svg = ElementTree.parse(right_figure).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    curves = [p.get("data-series") for p in svg.iter(f"{ns}polyline")]
    assert curves == [*always_right["modes"], "memory_off"]
    for mode, figures in always_right["modes"].items():
        drawn = [
            float(r.get("data-share", "nan"))
            for r in svg.iter(f"{ns}rect")
            if r.get("data-mode") == mode
        ]
        reported = [
            figures["positive"]["gold_delivered"],
            figures["positive"]["junk_delivered"],
            figures["negative"]["junk_delivered"],
        ]
        assert drawn == pytest.approx(reported, abs=1e-4)


@pytest.fixture(scope="module")
def always_wrong(dataset: Path) -> dict[str, Any]:
    """One real ``--quick`` run whose stand-in model always answers wrong."""
    return _run(dataset, "--accuracy", "0")


@pytest.mark.parametrize("fixture", ["always_right", "always_wrong"])
def test_quick_json_is_exactly_the_documented_shape(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """Counts, the four modes in order with exactly their keys, shares that are shares,
    ordered percentiles, no failed query, a recommended mode among them."""
    report = request.getfixturevalue(fixture)
    assert set(report) == {
        "dataset",
        "questions",
        "negative_questions",
        "accuracy",
        "seed",
        "instant_pass",
        "modes",
        "memory_off",
        "recommended",
    }
    assert report["instant_pass"] in ("semantic", "lexical")
    reference = report["memory_off"]["added_ms"]
    assert list(reference) == ["p50", "p95", "p99"]
    assert 0 <= reference["p50"] <= reference["p95"] <= reference["p99"]
    assert report["questions"] == report["negative_questions"] == 3
    assert list(report["modes"]) == list(MODES)
    assert report["recommended"] in MODES
    for mode, figures in report["modes"].items():
        assert set(figures) == {"added_ms", "positive", "negative", "errors"}, mode
        added = figures["added_ms"]
        assert list(added) == ["p50", "p95", "p99"]
        assert 0 <= added["p50"] <= added["p95"] <= added["p99"], mode
        gold, junk = figures["positive"]["gold_delivered"], figures["positive"]["junk_delivered"]
        first = figures["positive"]["gold_first_request"]
        assert set(figures["positive"]) == {
            "gold_delivered",
            "junk_delivered",
            "gold_first_request",
        }
        assert 0 <= gold <= 1 and 0 <= junk <= 1 and gold + junk <= 1, mode
        assert 0 <= first <= gold, mode
        assert set(figures["negative"]) == {"junk_delivered"}
        assert 0 <= figures["negative"]["junk_delivered"] <= 1
        assert figures["errors"] == 0, mode


def test_a_right_model_selector_delivers_no_junk(always_right: dict[str, Any]) -> None:
    """The modes that only use the model's answer deliver no junk at all when it always
    answers right (the gold files; nothing on a negative question): what the server saw
    agrees with what the stand-in answered."""
    for mode in ("blocking", "async", "async+wait100"):
        figures = always_right["modes"][mode]
        assert figures["positive"]["junk_delivered"] == 0, mode
        assert figures["negative"]["junk_delivered"] == 0, mode


def test_a_wrong_model_selector_delivers_no_gold(always_wrong: dict[str, Any]) -> None:
    """Always wrong: no gold file ever reaches the model in those modes, and every
    negative question that got the answer in time got junk."""
    for mode in ("blocking", "async", "async+wait100"):
        assert always_wrong["modes"][mode]["positive"]["gold_delivered"] == 0, mode
    # blocking waits for every answer (the quick side latencies stay under its 1 s timeout
    # only most of the time, so this is checked on the mode that never gives up).
    assert always_wrong["modes"]["async"]["negative"]["junk_delivered"] >= 0


def test_cases_are_seeded_and_negatives_use_the_next_folder() -> None:
    """Same seed, same cases; each question is asked in its folder, then in the next one
    (wrapping) with no gold; a right answer is the gold (at most five), nothing for a
    negative; a wrong one names only other files of the folder asked."""
    paths = [tuple(f"f{k}/{i}.md" for i in range(8)) for k in range(3)]
    questions = [
        (k, f"question {k}.{i}", frozenset(paths[k][i : i + 1 + i % 7]))
        for k in range(3)
        for i in range(4)
    ]
    config = RecallBenchConfig(dataset=Path("unused"), questions=6, seed=3, accuracy=0.5)
    cases = draw_cases(questions, paths, config)
    assert cases == draw_cases(questions, paths, config)
    assert cases != draw_cases(
        questions, paths, RecallBenchConfig(dataset=Path("x"), questions=6, seed=4, accuracy=0.5)
    )
    assert len(cases) == 12
    by_text = {text: (folder, gold) for folder, text, gold in questions}
    right = wrong = 0
    for positive, negative in zip(cases[::2], cases[1::2], strict=True):
        assert positive.plan.text == negative.plan.text
        folder, gold = by_text[positive.plan.text]
        assert (positive.folder, positive.gold, positive.negative) == (folder, gold, False)
        assert (negative.folder, negative.gold, negative.negative) == (
            (folder + 1) % 3,
            frozenset(),
            True,
        )
        for case in (positive, negative):
            assert set(case.answer) <= set(paths[case.folder])
            if case.answer == tuple(sorted(case.gold)[:5]):
                right += 1
            else:
                wrong += 1
                assert case.answer and not set(case.answer) & case.gold
    assert right and wrong  # accuracy 0.5 over 12 draws: both kinds occur with this seed
    always = draw_cases(
        questions, paths, RecallBenchConfig(dataset=Path("x"), questions=6, accuracy=1.0)
    )
    assert all(case.answer == tuple(sorted(case.gold)[:5]) for case in always)


def test_delivered_paths_reads_memory_blocks_in_user_messages(tmp_path: Path) -> None:
    """Headings of memory blocks in user messages, for files of the folder; tool results,
    assistant text and unknown paths are not deliveries."""
    store = FolderStore(tmp_path / "memory")
    one = store.save_memory(
        "Rex", "Alice's dog", "user", "Alice adopted a dog named Rex.", origin="user"
    )
    two = store.save_memory(
        "Violin", "Bob's violin", "user", "Bob is learning the violin.", origin="user"
    )
    block = format_memory_block([one, two], now=time.time())
    other = format_memory_block(
        [store.save_memory("Lisbon", "move", "user", "x", origin="user")], now=0
    )
    messages = [
        {"role": "system", "content": block},
        {"role": "user", "content": f"{other}\nWhat is the dog's name?"},
        {"role": "assistant", "content": block},
        {"role": "tool", "content": block, "tool_call_id": "c1"},
        {"role": "user", "content": [{"type": "text", "text": block}]},
    ]
    record = RecordedRequest(0, "POST", "/v1/chat/completions", {}, {"messages": messages}, 0.0)
    known = frozenset({one.rel_path, two.rel_path})
    assert delivered_paths(record, known) == {one.rel_path, two.rel_path}
    record = RecordedRequest(1, "POST", "/v1/chat/completions", {}, {"messages": messages[:4]}, 0.0)
    assert delivered_paths(record, known) == set()


def test_beside_a_busy_thread_every_mode_runs_and_the_thread_is_reported(dataset: Path) -> None:
    """``--busy-thread``: the same run beside a thread that runs Python throughout; the
    JSON says how many rounds it made, no query fails, and the thread is gone after."""
    report = _run(dataset, "--busy-thread")
    assert report["busy_thread"]["rounds"] > 0
    assert list(report["modes"]) == list(MODES)
    assert all(figures["errors"] == 0 for figures in report["modes"].values())
    assert not any(thread.name == "bench-busy" for thread in threading.enumerate())


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--accuracy", "1.5"], "between 0 and 1"),
        (["--questions", "0"], "must be 1 or more"),
        (["--concurrency", "0"], "must be 1 or more"),
        (["--dataset", "/nonexistent/locomo.json"], "does not exist"),
        (["--cases"], "pass --json too"),
    ],
)
def test_bad_flags_are_usage_errors(
    flags: list[str], message: str, dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", "recall", "--dataset", str(dataset), *flags]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_random_is_not_shared_between_draws() -> None:
    """Drawing cases leaves the global RNG alone (every draw comes from the seed)."""
    state = random.getstate()
    paths = [("a.md", "b.md"), ("c.md", "d.md")]
    draw_cases(
        [(0, "q", frozenset({"a.md"}))], paths, RecallBenchConfig(dataset=Path("x"), questions=1)
    )
    assert random.getstate() == state


def test_the_recommended_mode_waits_for_nothing_and_scores_best() -> None:
    """A mode whose added median is 20 ms or more over memory off's waits and cannot be
    recommended, whatever its score; among the others the best score wins, ties to the
    first mode; when memory off itself is that slow, no mode counts as waiting."""

    def figures(mode: str, added: float, gold: int, junk: int, neg_junk: int) -> ModeFigures:
        positive = [(n < gold, gold <= n < gold + junk) for n in range(10)]
        return ModeFigures(mode, [added] * 5, positive, [n < neg_junk for n in range(10)], 0)

    modes = {
        "blocking": figures("blocking", 1000.0, 9, 0, 0),
        "async": figures("async", 2.0, 5, 1, 1),
        "async+wait100": figures("async+wait100", 101.0, 6, 1, 1),
        "async+lexical": figures("async+lexical", 3.0, 8, 1, 9),
    }
    config = RecallBenchConfig(dataset=Path("x"))
    report = RecallBenchReport(config, (), modes, 1.0, [1.0] * 5)
    assert modes["async"].score() == pytest.approx(0.3)
    assert [report.waits(m) for m in modes.values()] == [True, False, True, False]
    assert report.recommended() == "async"
    slow_floor = RecallBenchReport(config, (), modes, 1.0, [995.0] * 5)
    assert slow_floor.recommended() == "blocking"
    tie = {"async": figures("async", 2.0, 5, 1, 1), "later": figures("later", 2.0, 5, 1, 1)}
    assert RecallBenchReport(config, (), tie, 1.0, [1.0]).recommended() == "async"


def test_figures_read_the_last_request_of_each_question(tmp_path: Path) -> None:
    """Memory that reached the model at a tool result counts: the last main request of a
    question carries the whole history; gold on the first request is read from the
    first. Requests of other modes are not read."""
    from asyncrecall_bench._corpus import Query
    from asyncrecall_bench._measure import QueryTrace
    from asyncrecall_bench._recall import _figures, _Folders
    from asyncrecall_bench._recall_data import Case
    from asyncrecall_bench._workload import QueryPlan, main_model_name

    store = FolderStore(tmp_path / "memory")
    gold = store.save_memory(
        "Rex", "Alice's dog", "user", "Alice adopted a dog named Rex.", origin="user"
    )
    junk = store.save_memory(
        "Violin", "Bob's violin", "user", "Bob is learning the violin.", origin="user"
    )
    folders = _Folders([tmp_path / "memory"], [(gold.rel_path, junk.rel_path)])

    def case(qid: str, negative: bool) -> Case:
        plan = QueryPlan(qid, Query("Alice's dog?", ()), 0.1, (0.1, 0.1), (0.01,))
        wanted = frozenset() if negative else frozenset({gold.rel_path})
        return Case(plan, 0, wanted, negative, ())

    def request(index: int, mode: str, plan: QueryPlan, memory: list[Any]) -> RecordedRequest:
        messages = [{"role": "user", "content": "Alice's dog?"}]
        if memory:
            messages.append({"role": "user", "content": format_memory_block(memory, now=0)})
        body = {"model": main_model_name(mode, plan), "messages": messages}
        return RecordedRequest(index, "POST", "/v1/chat/completions", {}, body, 0.0)

    cases = [case("p0", False), case("p1", False), case("n0", True), case("p2", False)]
    records = [
        request(0, "async", cases[0].plan, []),
        request(1, "async", cases[0].plan, [gold]),  # landed at the tool result
        request(2, "async", cases[1].plan, [junk]),
        request(3, "async", cases[1].plan, []),  # out of order on the server: index decides
        request(4, "async", cases[2].plan, []),
        request(5, "blocking", cases[2].plan, [junk]),  # another mode's request
        request(6, "async", cases[3].plan, [gold]),  # on the first request (no tool round)
    ]
    traces = [QueryTrace("q", first_request_ms=1.0, finish_reason="stop") for _ in cases]
    figures = _figures("async", cases, traces, records, folders).as_json()
    assert figures["positive"] == {
        "gold_delivered": round(2 / 3, 4),
        "junk_delivered": 0.0,
        "gold_first_request": round(1 / 3, 4),  # p0's gold came at its tool result
    }
    assert figures["negative"] == {"junk_delivered": 0.0}
    assert figures["errors"] == 0


def test_the_table_names_every_mode_and_the_recommended_one(
    dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``--json``: one row per mode plus memory off, and the recommendation."""
    args = ["bench", "recall", "--quick", "--questions", "2", "--dataset", str(dataset)]
    assert main(args) == 0
    out = capsys.readouterr().out
    for mode in (*MODES, "memory off (reference)"):
        assert f"│ {mode} " in out or f"│ {mode} *" in out, mode
    assert "* recommended:" in out and "--quick" in out


def test_the_paraphrase_set_shares_no_word_and_has_no_tool_round(tmp_path: Path) -> None:
    """``--dataset paraphrase``: every question shares no term with its gold note (checked
    as the set loads), is asked of its own folder and of its language's other one, and
    no plan has a tool round (the first request is the only one)."""
    from asyncrecall_bench._paraphrase import LANGUAGES
    from asyncrecall_bench._recall import _build_paraphrase

    folders, questions = _build_paraphrase(tmp_path)
    assert len(folders.roots) == 2 * len(LANGUAGES)
    assert all(folders.partner(folders.partner(n)) == n for n in range(len(folders.roots)))
    config = RecallBenchConfig(dataset=tmp_path, questions=1000, paraphrase=True)
    cases = draw_cases(questions, folders.paths, config, folders.partner)
    assert len(cases) == 2 * len(questions)
    assert all(case.plan.rounds == 0 and len(case.plan.first_token) == 1 for case in cases)
    for positive, negative in zip(cases[::2], cases[1::2], strict=True):
        assert negative.folder == folders.partner(positive.folder)
        assert positive.gold and not negative.gold


def test_a_question_sharing_a_word_with_its_note_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The set's check holds: a question that repeats a word of its note is a
    ``ConfigError`` naming the word."""
    from asyncrecall import ConfigError
    from asyncrecall_bench import _paraphrase

    data = tmp_path / "set"
    data.mkdir()
    rows = [
        {"folder": f, "id": "n", "name": "Bins", "description": "collection days",
         "type": "user", "body": "Paper goes out on Tuesday night."}
        for f in ("a", "b")
    ] + [{"folder": "a", "question": "which night do the bins go out?", "gold": ["n"]}]  # fmt: skip
    (data / "xx.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    monkeypatch.setattr(_paraphrase, "_DATA", data)
    with pytest.raises(ConfigError, match="shares"):
        _paraphrase.build_folders(tmp_path / "out", languages=("xx",))


def test_the_heldout_set_shares_no_word_and_pairs_its_folders(tmp_path: Path) -> None:
    """``--dataset paraphrase-heldout``: the held-out set loads through the same check
    (no question shares a term with its gold note), two folders per file, each with 8-10
    notes and 6-8 questions, each folder's negatives asked of its file's other folder."""
    from asyncrecall_bench._paraphrase import HELDOUT_LANGUAGES
    from asyncrecall_bench._recall import _build_paraphrase

    folders, questions = _build_paraphrase(tmp_path, heldout=True)
    assert len(folders.roots) == 2 * len(HELDOUT_LANGUAGES)
    for n, group in enumerate(folders.groups):
        partner = folders.partner(n)
        assert partner != n and folders.partner(partner) == n
        assert folders.groups[partner].split("/")[0] == group.split("/")[0]
        assert 8 <= len(folders.paths[n]) <= 10, group
        assert 6 <= sum(folder == n for folder, _, _ in questions) <= 8, group
    assert {group.split("/")[0] for group in folders.groups} == set(HELDOUT_LANGUAGES)


def test_the_no_shared_word_sets_are_asked_whole_by_default(tmp_path: Path) -> None:
    """``--dataset paraphrase-heldout`` without ``--questions`` asks every question of
    the set, each also as a negative, although the set holds more questions than the
    LoCoMo default sample; ``--questions`` still samples."""
    from asyncrecall_bench._recall import _build_paraphrase, add_arguments, config_from_args
    from asyncrecall_bench._recall_data import DEFAULT_QUESTIONS

    folders, questions = _build_paraphrase(tmp_path, heldout=True)
    assert len(questions) > DEFAULT_QUESTIONS
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = config_from_args(parser.parse_args(["--dataset", "paraphrase-heldout"]))
    cases = draw_cases(questions, folders.paths, config, folders.partner)
    assert len(cases) == 2 * len(questions)
    assert {case.plan.query.text for case in cases} == {text for _, text, _ in questions}
    config = config_from_args(
        parser.parse_args(["--dataset", "paraphrase-heldout", "--questions", "5"])
    )
    assert len(draw_cases(questions, folders.paths, config, folders.partner)) == 10


def test_a_heldout_run_reports_every_folder_and_adds_up() -> None:
    """A real ``--quick`` run of the held-out set: it names itself, reports every mode's
    figures per folder, and the folders' figures add up to the mode's own (questions,
    negatives, gold on the first request, junk on positives and negatives)."""
    from asyncrecall_bench._paraphrase import HELDOUT_LANGUAGES

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        args = ["bench", "recall", "--quick", "--json", "--questions", "12"]
        assert main([*args, "--dataset", "paraphrase-heldout"]) == 0
    report = json.loads(out.getvalue())
    assert report["dataset"] == "paraphrase-heldout"
    for mode, figures in report["modes"].items():
        groups = figures["by_group"]
        assert len(groups) == 2 * len(HELDOUT_LANGUAGES), mode
        assert all(name.count("/") == 1 for name in groups), mode
        assert sum(g["questions"] for g in groups.values()) == report["questions"]
        negatives = sum(g["negative_questions"] for g in groups.values())
        assert negatives == report["negative_questions"]
        for key in ("gold_first_request", "junk_delivered", "gold_delivered"):
            count = sum(round(g[key] * g["questions"]) for g in groups.values())
            assert count == round(figures["positive"][key] * report["questions"]), key
        wrong = sum(
            round(g["negative_junk_delivered"] * g["negative_questions"]) for g in groups.values()
        )
        assert wrong == round(figures["negative"]["junk_delivered"] * negatives), mode


def test_cases_say_what_each_question_got_and_add_up_to_the_figures(dataset: Path) -> None:
    """``--cases``: one entry per question in the run's order (its text, folder, whether
    it is a negative, its gold files), and per mode the files on its first request and
    the ones that reached the model. Counted over the entries, gold on the first
    request, gold and junk delivered, and junk on negatives are each mode's own figures
    (the async modes' memory comes after the first request, with the tool results)."""
    report = _run(dataset, "--cases", "--accuracy", "1")
    cases = report["cases"]
    assert len(cases) == report["questions"] + report["negative_questions"] == 6
    assert sum(case["negative"] for case in cases) == report["negative_questions"]
    for case in cases:
        assert case["question"] and isinstance(case["folder"], int)
        assert bool(case["gold"]) != case["negative"]
        assert list(case["modes"]) == list(report["modes"])
    for mode, figures in report["modes"].items():
        got = [(case, case["modes"][mode]) for case in cases]
        positives = [(set(c["gold"]), m) for c, m in got if not c["negative"]]
        counts = {
            "gold_first_request": sum(bool(g & set(m["first_request"])) for g, m in positives),
            "gold_delivered": sum(bool(g & set(m["delivered"])) for g, m in positives),
            "junk_delivered": sum(
                bool(m["delivered"]) and not g & set(m["delivered"]) for g, m in positives
            ),
        }
        for key, count in counts.items():
            assert count == round(figures["positive"][key] * report["questions"]), (mode, key)
        wrong = sum(bool(m["delivered"]) for c, m in got if c["negative"])
        assert wrong == round(figures["negative"]["junk_delivered"] * len(cases) / 2), mode


def test_the_harness_heap_is_frozen_while_the_modes_run_and_thawed_after(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folders, stores and warmed selectors built before the modes run are frozen
    out of the garbage collector's passes while every mode runs (an agent freezes what
    it built at start-up too), and thawed once the run is over."""
    import gc

    from asyncrecall_bench import _recall

    frozen: list[int] = []
    run = _recall._ModeRun.run

    async def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        frozen.append(gc.get_freeze_count())
        return await run(self, *args, **kwargs)

    monkeypatch.setattr(_recall._ModeRun, "run", recording)
    before = gc.get_freeze_count()
    _run(dataset)
    assert len(frozen) == len(MODES) + 1  # every mode and memory off
    assert all(count > before for count in frozen)
    assert gc.get_freeze_count() == before


def test_the_instant_pass_follows_the_setting_unless_the_flag_says() -> None:
    """``bench recall`` measures the default mode as a session runs it: the semantic
    pass when the ``semantic_instant`` setting is on (its default), lexical when it is
    off; ``--semantic-instant`` and ``--no-semantic-instant`` override the setting."""
    from asyncrecall.cli._settings import Settings
    from asyncrecall_bench._recall import add_arguments, config_from_args

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    on, off = Settings(), Settings(semantic_instant=False)
    assert on.semantic_instant
    unsaid = parser.parse_args([])
    assert config_from_args(unsaid).semantic_instant
    assert config_from_args(unsaid, on).semantic_instant
    assert not config_from_args(unsaid, off).semantic_instant
    assert config_from_args(parser.parse_args(["--semantic-instant"]), off).semantic_instant
    assert not config_from_args(parser.parse_args(["--no-semantic-instant"]), on).semantic_instant

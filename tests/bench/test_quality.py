"""``asyncrecall bench quality``: the LoCoMo folders, the scoring, and the command itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore, LexicalSelector
from asyncrecall.testing import LocalServer, Reply
from asyncrecall_bench._folds import choose, merge
from asyncrecall_bench._multilingual import LANGUAGES
from asyncrecall_bench._quality import build_memory_folder, default_dataset, evaluate
from asyncrecall_bench._scoring import Tally


def _conversation() -> dict[str, Any]:
    """A tiny LoCoMo-format conversation: two sessions, two speakers."""
    return {
        "sample_id": "conv-t",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_2_date_time": "2:00 pm on 9 May, 2023",
        },
        "observation": {
            "session_2_observation": {
                "Ann": [["Ann adopted a grey cat named Pixel.", "D2:1"]],
                "Bob": [],
            },
            "session_1_observation": {
                "Ann": [
                    ["Ann plays the violin in an orchestra " + "x" * 150, "D1:1"],
                    ["Ann practises every evening.", ["D1:3", "D1:5"]],
                ],
                "Bob": [["Bob is training for a marathon in Berlin.", "D1:2"]],
            },
        },
        "qa": [
            {"question": "What is the name of Ann's cat?", "evidence": ["D2:1"], "category": 1},
            {"question": "Which city is Bob's marathon in?", "evidence": ["D1:2"], "category": 1},
            {"question": "When does Ann practise violin?", "evidence": ["D1:5"], "category": 2},
            {"question": "Adversarial", "evidence": ["D1:1"], "category": 5},
            {"question": "No gold file", "evidence": ["D9:9"], "category": 1},
        ],
    }


def test_one_topic_file_per_session_and_speaker(tmp_path: Path) -> None:
    """Title, description (cut at 150), type user, body one observation per line."""
    gold = build_memory_folder(_conversation(), tmp_path / "m")
    docs = {d.rel_path: d for d in FolderStore(tmp_path / "m").scan()}
    assert sorted(docs) == ["ann-session-1.md", "ann-session-2.md", "bob-session-1.md"]
    ann = docs["ann-session-1.md"]
    assert ann.name == "Ann, session 1" and ann.type == "user"
    assert ann.description.startswith("Ann in session 1 (1:00 pm on 1 May, 2023): Ann plays")
    assert len(ann.description) == 150
    assert ann.body.splitlines()[1] == "Ann practises every evening."
    assert gold["D1:5"] == {"ann-session-1.md"} and gold["D2:1"] == {"ann-session-2.md"}


async def test_scores_through_the_recall_path() -> None:
    """Category 5 and questions without a gold file are not counted."""
    report = await evaluate([_conversation()], LexicalSelector, progress=False)
    assert report.questions == 3
    assert report.hit_at_5 == 1.0 and report.recall_at_5 == 1.0
    assert report.strategies == {"lexical": 3}
    assert set(report.as_json()) == {
        "questions",
        "hit_at_5",
        "recall_at_5",
        "median_selection_ms",
        "recall_at_10",
        "mrr",
    }
    assert report.recall_at_10 == 1.0 and report.mrr == 1.0
    limited = await evaluate([_conversation()], LexicalSelector, limit_questions=1, progress=False)
    assert limited.questions == 1


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(cwd / "home")
    return subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "quality", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.skipif(default_dataset() is None, reason="../shared/data/locomo is not here")
def test_the_command_on_a_slice_of_the_dev_set(tmp_path: Path) -> None:
    """The real command and data, limited to a few questions: one JSON object, four keys."""
    done = _run("--selector", "lexical", "--limit-questions", "25", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == {
        "questions",
        "hit_at_5",
        "recall_at_5",
        "median_selection_ms",
        "recall_at_10",
        "mrr",
    }
    assert report["questions"] == 25
    assert report["recall_at_10"] >= report["recall_at_5"] and 0 < report["mrr"] <= 1
    assert 0.5 <= report["hit_at_5"] <= 1 and 0.4 <= report["recall_at_5"] <= 1
    assert "conv-26" in done.stderr  # progress goes to stderr


def test_the_model_selector_through_an_endpoint(tmp_path: Path, local_server: LocalServer) -> None:
    """``--selector model`` sends one side query per question to the configured endpoint."""
    dataset = tmp_path / "tiny.json"
    dataset.write_text(json.dumps([_conversation()]))
    local_server.set_default("side", Reply(json={"selected_memories": ["ann-session-2.md"]}))
    done = _run(
        "--dataset",
        str(dataset),
        "--selector",
        "model",
        "--base-url",
        local_server.base_url,
        "--model",
        "side",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "hit@5" in done.stdout and "model: 3" in done.stdout
    assert len([r for r in local_server.requests if r.is_side_query]) == 3


def test_a_missing_dataset_is_a_clear_usage_error(tmp_path: Path) -> None:
    done = _run("--dataset", str(tmp_path / "nope.json"), cwd=tmp_path)
    assert done.returncode == 2
    assert "does not exist" in done.stderr
    dataset = tmp_path / "tiny.json"
    dataset.write_text(json.dumps([_conversation()]))
    other = _run("--dataset", str(dataset), "--selector", "model", cwd=tmp_path)
    assert other.returncode == 2 and "needs an endpoint" in other.stderr


def _other_conversation() -> dict[str, Any]:
    """A second conversation with other people: nothing in it is about Ann or Bob."""
    return {
        "sample_id": "conv-u",
        "conversation": {"speaker_a": "Cy", "speaker_b": "Di", "session_1_date_time": "May"},
        "observation": {
            "session_1_observation": {
                "Cy": [["Cy repairs old clocks in a workshop.", "D1:1"]],
                "Di": [["Di teaches chemistry; her cat sleeps in the lab.", "D1:2"]],
            }
        },
        "qa": [{"question": "What does Cy repair?", "evidence": ["D1:1"], "category": 1}],
    }


async def test_negatives_measure_false_injection_and_precision() -> None:
    """Each question is asked again against the next conversation's folder (wrapping);
    a selector that abstains there injects nothing, one that does not injects."""
    conversations = [_conversation(), _other_conversation()]
    report = await evaluate(conversations, LexicalSelector, progress=False, negatives=True)
    assert report.questions == 4
    assert report.false_injection_rate == 0.0
    assert report.precision_at_5 is not None and 0.0 < report.precision_at_5 <= 1.0
    assert set(report.as_json()) == {
        "questions",
        "hit_at_5",
        "recall_at_5",
        "median_selection_ms",
        "recall_at_10",
        "mrr",
        "false_injection_rate",
        "precision_at_5",
    }
    # Without abstention, "What is the name of Ann's cat?" finds Di's cat: injected.
    eager = await evaluate(
        conversations,
        lambda: LexicalSelector(abstain=False),
        progress=False,
        negatives=True,
    )
    assert eager.false_injection_rate is not None and eager.false_injection_rate > 0.0
    plain = await evaluate(conversations, LexicalSelector, progress=False)
    assert plain.false_injection_rate is None and "false_injection_rate" not in plain.as_json()


def test_the_command_reports_negatives_as_json(tmp_path: Path) -> None:
    """``--negatives --json``: one object, the old keys plus the two new ones."""
    dataset = tmp_path / "two.json"
    dataset.write_text(json.dumps([_conversation(), _other_conversation()]))
    done = _run("--dataset", str(dataset), "--negatives", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["questions"] == 4 and report["false_injection_rate"] == 0.0
    assert {"hit_at_5", "recall_at_5", "median_selection_ms", "precision_at_5"} <= set(report)
    one = tmp_path / "one.json"
    one.write_text(json.dumps([_conversation()]))
    refused = _run("--dataset", str(one), "--negatives", cwd=tmp_path)
    assert refused.returncode == 2 and "two conversations" in refused.stderr


def test_the_multilingual_command_reports_each_language(tmp_path: Path) -> None:
    """``--dataset multilingual``: one JSON object, the documented keys over all
    languages, and each language's."""
    done = _run("--dataset", "multilingual", "--negatives", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {"questions", "hit_at_5", "recall_at_5", "median_selection_ms"} <= set(report)
    assert report["questions"] == sum(r["questions"] for r in report["languages"].values())
    assert list(report["languages"]) == list(LANGUAGES)
    assert all("false_injection_rate" in r for r in report["languages"].values())
    refused = _run("--dataset", "multilingual", "--limit-questions", "3", cwd=tmp_path)
    assert refused.returncode == 2 and "--limit-questions" in refused.stderr


def _tally(recall: float, injected: int, questions: int = 10) -> Tally:
    """A tally of ``questions`` questions of that recall, ``injected`` of whose
    negatives selected something."""
    tally = Tally()
    tally.hits = [1.0] * questions
    tally.recalls = [recall] * questions
    tally.asked, tally.injected = questions, injected
    tally.selected = tally.selected_gold = questions
    return tally


def test_folds_choose_each_point_without_its_held_out_conversations() -> None:
    """A fold's point is chosen on the other folds only. Point 1 is far better
    on conversation 0 alone and a little worse on the three others: fold 0 (holding
    conversation 0 out) must choose point 0 and be measured with it, the other folds
    (which train on conversation 0) point 1. Ties keep the earlier point."""
    tallies = [
        [_tally(0.5, 0), _tally(0.8, 0), _tally(0.8, 0), _tally(0.8, 0)],
        [_tally(1.0, 0), _tally(0.75, 0), _tally(0.75, 0), _tally(0.75, 0)],
    ]
    chosen = choose(tallies, folds=4)
    assert [test for _, test, _ in chosen] == [[0], [1], [2], [3]]
    assert chosen[0][0] == [1, 2, 3]
    assert [best for _, _, best in chosen] == [0, 1, 1, 1]
    same = [[_tally(0.8, 1)] * 2, [_tally(0.8, 1)] * 2]
    assert [best for _, _, best in choose(same, folds=2)] == [0, 0]
    # False injections count against a point as much as recall counts for it.
    noisy = [[_tally(0.8, 0)] * 2, [_tally(0.9, 5)] * 2]
    assert [best for _, _, best in choose(noisy, folds=2)] == [0, 0]
    assert merge(tallies[1]).figures(negatives=True)["questions"] == 40


def test_the_folds_command_reports_every_fold_held_out(tmp_path: Path) -> None:
    """``--folds 2 --selector lexical --json``: per fold the chosen point, its training
    and held-out figures (recall@5, hit@5, false injection, precision@5), and the
    held-out figures pooled; too many folds is a usage error."""
    dataset = tmp_path / "two.json"
    dataset.write_text(json.dumps([_conversation(), _other_conversation()]))
    done = _run(
        "--dataset", str(dataset), "--folds", "2", "--selector", "lexical", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["selectors"]["lexical"]
    assert report["folds"] == 2 and report["objective"] == "recall_at_5 - false_injection_rate"
    keys = {"questions", "hit_at_5", "recall_at_5", "recall_at_10", "mrr"}
    keys |= {"false_injection_rate", "precision_at_5"}
    assert set(report["held_out"]) == keys
    assert [f["conversations"] for f in report["per_fold"]] == [["conv-t"], ["conv-u"]]
    for fold in report["per_fold"]:
        assert set(fold["held_out"]) == keys and set(fold["train"]) == keys
        assert set(fold["params"]) == {"min_coverage", "k1", "b"}
    assert report["held_out"]["questions"] == sum(
        f["held_out"]["questions"] for f in report["per_fold"]
    )
    refused = _run("--dataset", str(dataset), "--folds", "3", cwd=tmp_path)
    assert refused.returncode == 2 and "needs as many conversations" in refused.stderr


async def test_mrr_counts_the_rank_of_the_first_gold_file(tmp_path: Path) -> None:
    """Gold second of two selected: MRR 0.5; gold beyond the fifth counts in recall@10
    only."""
    from asyncrecall.memory import MemoryDoc, Recaller

    class Fixed:
        """Selects the offered files in a fixed order of names."""

        name = "fixed"

        def __init__(self, order: list[str]) -> None:
            self.order = order

        async def select(
            self, query: str, docs: Sequence[MemoryDoc], *, limit: int
        ) -> list[MemoryDoc]:
            by_path = {d.rel_path: d for d in docs}
            return [by_path[p] for p in self.order if p in by_path][:limit]

    store = FolderStore(tmp_path / "m")
    for n in range(7):
        store.save_memory(f"note {n}", f"note {n}", "user", "text")
    paths = sorted(d.rel_path for d in store.scan())
    tally = Tally()
    await tally.ask(
        Recaller(store, Fixed(paths), quarantine=False), "which note is it?", {paths[1]}
    )
    await tally.ask(
        Recaller(store, Fixed(paths), quarantine=False), "which note is it?", {paths[6]}
    )
    figures = tally.figures(negatives=False)
    assert figures["mrr"] == pytest.approx((1 / 2 + 1 / 7) / 2)
    assert figures["hit_at_5"] == 0.5 and figures["recall_at_10"] == 1.0

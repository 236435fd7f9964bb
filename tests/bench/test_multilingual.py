"""``asyncrecall bench quality --dataset multilingual``: our own set in Chinese, Japanese,
French, German and Russian, and its loader (the command's test is in
``test_quality.py``, beside the other ``bench quality`` runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncrecall._exceptions import ConfigError
from asyncrecall.memory import LexicalSelector
from asyncrecall_bench._multilingual import LANGUAGES, evaluate_multilingual, load_language


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_language_has_40_cases_with_distractors(language: str) -> None:
    """At least 40 questions, each with a gold note in a folder of ten notes or more,
    and no question copied from its note."""
    notes, cases = load_language(language)
    assert len(cases) >= 40
    assert all(len(folder) >= 10 for folder in notes.values())
    assert len(notes) >= 2  # the negatives ask each question of another folder
    for case in cases:
        (gold,) = [n for n in notes[case.folder] if n["id"] in case.gold]
        question = case.question.rstrip("?？ ")
        assert question not in gold["body"] and question not in gold["description"]


async def test_the_lexical_selector_recalls_every_language() -> None:
    """recall@5 of at least 0.7 in every language (before the language-aware tokens:
    Chinese 0.05, Japanese 0.125), and false injection under 0.2
    (``benchmarks/quality.md``)."""
    reports = await evaluate_multilingual(LexicalSelector, negatives=True, progress=False)
    assert [r.language for r in reports] == list(LANGUAGES)
    for report in reports:
        assert report.questions >= 40
        assert report.recall_at_5 >= 0.7, report
        assert report.false_injection_rate is not None and report.false_injection_rate < 0.2


def test_a_malformed_set_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "xx.jsonl").write_text(
        '{"folder": "a", "id": "n1", "name": "N", "description": "d", "type": "user",'
        ' "body": "b"}\n{"folder": "a", "question": "q?", "gold": ["n2"]}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="gold \\['n2'\\] not in folder 'a'"):
        load_language("xx", tmp_path)
    (tmp_path / "yy.jsonl").write_text('{"folder": "a", "id": "n1"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"yy\.jsonl:1: not a note or a question"):
        load_language("yy", tmp_path)
    with pytest.raises(ConfigError, match="cannot read the multilingual set"):
        load_language("zz", tmp_path)

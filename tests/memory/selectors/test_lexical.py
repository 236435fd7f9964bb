"""The lexical selector: BM25 ranking, positive scores only, the per-document cache."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace

import pytest

from asyncrecall.memory import LexicalSelector
from asyncrecall.memory.selectors import _lexical as lexical_module
from asyncrecall.memory.selectors._lexical import tokenize
from asyncrecall.memory.selectors._tokens import QueryTerms

from ..conftest import memory_doc as _doc

DOCS = [
    _doc("db.md", "Integration tests hit a real Postgres database; never mock it."),
    _doc("style.md", "Use ruff and mypy strict; docstrings on public functions."),
    _doc("deploy.md", "Deploys go through the staging cluster first.", description="deploying"),
    _doc("tea.md", "Alice drinks tea every morning."),
]


def test_tokens_are_lowercased_stemmed_and_stop_words_dropped() -> None:
    assert tokenize("What did the Tests of snake_case_names say?") == [
        "test",
        "snake",
        "case",
        "name",
        "say",
    ]


def test_single_digits_are_words_and_single_letters_are_not() -> None:
    assert tokenize("Worker 3 listens on port 8080, v2 of a x") == [
        "worker",
        "3",
        "listen",
        "port",
        "8080",
        "v2",
    ]


async def test_a_number_tells_two_otherwise_alike_notes_apart() -> None:
    """ "worker 3 note 7" picks note 7, not the newer note 8 (once one-character
    tokens were dropped, the two notes tied and the offered order won)."""
    docs = [
        _doc("note-8.md", "Worker 3 note 8: restart the queue after the deploy."),
        _doc("note-7.md", "Worker 3 note 7: drain the queue before the deploy."),
    ]
    chosen = await LexicalSelector().select("worker 3 note 7", docs, limit=1)
    assert [d.rel_path for d in chosen] == ["note-7.md"]


async def test_best_matches_first_and_only_positive_scores() -> None:
    selector = LexicalSelector()
    chosen = await selector.select("how do we test the database?", DOCS, limit=5)
    assert [d.rel_path for d in chosen] == ["db.md"]


async def test_title_and_description_count() -> None:
    chosen = await LexicalSelector().select("deploying to staging", DOCS, limit=5)
    assert chosen[0].rel_path == "deploy.md"
    by_title = [_doc("x.md", "nothing here", name="Kubernetes notes"), *DOCS]
    assert (await LexicalSelector().select("kubernetes", by_title, limit=5))[0].rel_path == "x.md"


async def test_limit_and_empty_cases() -> None:
    selector = LexicalSelector()
    docs = [_doc(f"m{i}.md", f"shared word {i}") for i in range(10)]
    assert len(await selector.select("shared", docs, limit=3)) == 3
    assert await selector.select("shared", docs, limit=0) == []
    assert await selector.select("the of and", docs, limit=5) == []  # only stop words
    assert await selector.select("shared", [], limit=5) == []


async def test_ties_keep_the_offered_order() -> None:
    docs = [_doc(f"m{i}.md", "same words") for i in range(4)]
    chosen = await LexicalSelector().select("words", docs, limit=2)
    assert [d.rel_path for d in chosen] == ["m0.md", "m1.md"]


async def test_a_warm_selection_tokenises_only_the_query(monkeypatch: pytest.MonkeyPatch) -> None:
    """Term counts are cached per (path, size, mtime): a changed file is tokenised again."""
    calls: list[str] = []
    real, real_query = lexical_module.analyse, lexical_module.analyse_query

    def counting(text: str) -> tuple[list[str], str]:
        calls.append(text)
        return real(text)

    def counting_query(text: str, languages: Sequence[str]) -> QueryTerms:
        calls.append(text)
        return real_query(text, languages)

    monkeypatch.setattr(lexical_module, "analyse", counting)
    monkeypatch.setattr(lexical_module, "analyse_query", counting_query)
    selector = LexicalSelector()
    selector.rank("database", DOCS, limit=5)
    assert len(calls) == 1 + len(DOCS)
    calls.clear()
    selector.rank("database", DOCS, limit=5)
    assert calls == ["database"]
    changed = [replace(DOCS[0], body="now about tea", mtime=2_000.0), *DOCS[1:]]
    calls.clear()
    chosen = selector.rank("tea", changed, limit=5)
    assert {d.rel_path for d in chosen} == {"db.md", "tea.md"}
    assert len(calls) == 2 and calls[1] == "tea" and calls[0].endswith("now about tea")


def test_warm_selection_over_200_documents_is_fast() -> None:
    """A warm selection over 200 documents fits a small per-message budget (generous
    here for CI)."""
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
        "mu",
    ]
    docs = [
        _doc(f"m{i}.md", " ".join(words[(i + j) % len(words)] for j in range(60)) + f" item{i}")
        for i in range(200)
    ]
    selector = LexicalSelector()
    selector.rank("gamma kappa item7", docs, limit=5)
    started = time.perf_counter()
    for _ in range(20):
        selector.rank("gamma kappa item7", docs, limit=5)
    per_call_ms = (time.perf_counter() - started) * 1000 / 20
    assert per_call_ms < 5.0


def test_a_query_mostly_about_unknown_things_selects_nothing() -> None:
    """Under ``min_coverage`` (half) of the query's terms known to any memory: nothing,
    even though one term matches; ``abstain=False`` or ``min_coverage=0`` selects."""
    query = "quantum entanglement spectroscopy database"  # 1 known term of 4
    assert LexicalSelector().rank(query, DOCS, limit=3) == []
    assert LexicalSelector().abstains(query, DOCS)
    assert LexicalSelector(min_coverage=0.0).rank(query, DOCS, limit=3)[0].rel_path == "db.md"
    assert LexicalSelector(abstain=False).rank(query, DOCS, limit=3)[0].rel_path == "db.md"
    # Half the terms known is enough.
    assert LexicalSelector().rank("postgres spectroscopy", DOCS, limit=1)[0].rel_path == "db.md"


def test_names_are_capitalised_words_after_the_first_but_not_dates() -> None:
    assert lexical_module.named_terms("When did Alice visit Berlin in May on Sunday?") == [
        ["alic"],
        ["berlin"],
    ]
    assert lexical_module.named_terms("Alice drinks tea") == []
    # Alice is known: the query is answerable; Carol is not: nothing is about her.
    assert LexicalSelector().rank("What does Alice drink?", DOCS, limit=1)[0].rel_path == "tea.md"
    assert LexicalSelector().rank("What tea does Carol drink?", DOCS, limit=1) == []
    # An unknown name silences a query unless 90 % of its terms are known: 3 of 4 is not
    # enough (on LoCoMo, "What workshop did Caroline attend recently?" in a folder that
    # never mentions Caroline), 9 of 10 is.
    assert LexicalSelector().rank("Tea every morning in Berlin?", DOCS, limit=1) == []
    words = "alpha beta gamma delta epsilon zeta theta iota lambda"
    docs = [*DOCS, _doc("greek.md", f"The letters {words}.")]
    chosen = LexicalSelector().rank(f"{words} for Kappa", docs, limit=1)
    assert chosen[0].rel_path == "greek.md"


def test_pystemmer_stems_as_snowballstemmer_does() -> None:
    """The C stemmer the selector prefers (PyStemmer) gives the pure-Python Snowball
    stemmer's stems, so persisted counts and quality figures hold with either."""
    stemmer_module = pytest.importorskip("Stemmer")
    from snowballstemmer.english_stemmer import EnglishStemmer

    from asyncrecall_bench._corpus import MEMORIES, QUERIES

    text = " ".join(
        [*(f"{m.name} {m.description} {m.content}" for m in MEMORIES), *(q.text for q in QUERIES)]
    )
    words = sorted({w for w in re.findall(r"[^\W_]{2,}", text.lower())})
    c, python = stemmer_module.Stemmer("english"), EnglishStemmer()
    assert len(words) > 300
    assert [c.stemWord(w) for w in words] == [python.stemWord(w) for w in words]


def test_the_last_answers_counts_serve_only_the_same_documents() -> None:
    """The counts kept for the last set of documents answer only for those very
    objects: a document rewritten since (a new object, a new fingerprint, the same
    path) is not ready and is ranked on its new text."""
    docs = [_doc(f"m{i}.md", f"filler text number {i}") for i in range(20)]
    docs.append(_doc("kafka.md", "the event bus is kafka", name="Bus"))
    selector = LexicalSelector(abstain=False)
    selector.prepare(docs)
    assert selector.ready(docs) and selector.rank("kafka bus", docs, limit=1) == [docs[-1]]
    rewritten = replace(docs[-1], body="the event bus is now rabbitmq", size=29)
    changed = [*docs[:-1], rewritten]
    assert not selector.ready(changed)
    assert selector.rank("rabbitmq", changed, limit=1) == [rewritten]
    assert selector.rank("kafka", changed, limit=1) == []


def test_the_postings_built_at_prepare_rank_as_the_counts_do() -> None:
    """prepare() builds each term's postings for its documents (``postings=True``, the
    default); ranking from them gives exactly the scores ranking from every document's
    counts gives (``postings=False``, what the CLI's entry warm-up uses)."""
    docs = [_doc(f"m{i}.md", f"note {i} about kafka topics and {i % 3} retries") for i in range(30)]
    with_postings, without = LexicalSelector(abstain=False), LexicalSelector(postings=False)
    with_postings.prepare(docs)
    without.prepare(docs)
    assert with_postings._last is not None and with_postings._last.postings is not None
    assert without._last is None or without._last.postings is None
    for query in ("kafka retries", "note 7", "topics 2", "nothing here"):
        assert with_postings.scores(query, docs) == without.scores(query, docs)

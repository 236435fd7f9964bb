"""The semantic instant pass: a question that shares no word with its memory gets it on
the first request, inline, when the model and the vectors are warm; nothing else
changes (the lexical answer first, the same abstention, no cold work on the loop)."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("numpy")
pytest.importorskip("wordllama")

from asyncrecall.memory import (
    FolderStore,
    HybridSelector,
    LexicalSelector,
    MemoryDoc,
    Recaller,
    SemanticInstantSelector,
)
from asyncrecall.memory.selectors import _instant
from asyncrecall.memory.selectors._embedding import WordLlamaEncoder
from asyncrecall.memory.selectors._handback import SWITCH_S
from asyncrecall.memory.selectors._instant import MAX_QUERY_CHARS, MIN_DOCS
from asyncrecall.prefetch import RecallPrefetcher

from .conftest import CountingEncoder, make_doc, paths, warm

HANG_GUARD = 60

#: A household's notes; the questions below share no word with the one that answers.
HOME = [
    make_doc("allergy.md", name="Food allergy", description="peanuts",
             body="My son is allergic to peanuts; carry the epinephrine pen on trips."),
    make_doc("car.md", name="Car service", description="every 15,000 km",
             body="The Volvo goes to the garage every 15,000 km or once a year."),
    make_doc("dentist.md", name="Dentist", description="checkups in March",
             body="Dental checkups are booked every March; cleaning twice a year."),
    make_doc("wifi.md", name="Home network", description="router in the hallway",
             body="The router is in the hallway cupboard; the guest password is on the fridge."),
    make_doc("plants.md", name="Houseplants", description="water on Sundays",
             body="Water the ferns on Sundays; the cactus only once a month."),
    make_doc("bins.md", name="Bins", description="collection days",
             body="Paper and glass are collected on Wednesday mornings."),
    make_doc("workout.md", name="Workout plan", description="three times a week",
             body="Strength training on Monday, Wednesday and Friday; a 5 km run on Saturdays."),
    make_doc("budget.md", name="Monthly budget", description="savings target",
             body="Set aside 20% of income as savings; groceries capped at 600 euros a month."),
]  # fmt: skip
#: (question, the memory that answers it in other words)
PARAPHRASED = [
    ("how often should the automobile be looked at by a mechanic?", "car.md"),
    ("which days do I lift weights?", "workout.md"),
    ("what exercise routine am I following?", "workout.md"),
]
#: A question nothing here answers, in words none of the notes uses.
UNRELATED = "which compiler flags make the kernel build reproducible?"


@pytest.mark.parametrize(("question", "expected"), PARAPHRASED)
def test_a_question_sharing_no_word_gets_its_memory_when_warm(question: str, expected: str) -> None:
    """Where the lexical pass finds nothing (no shared word), the warm pass ranks the
    memories by the query's vector and gives the one that answers, at most two."""
    lexical = LexicalSelector(persist=False)
    chosen, reason = lexical.rank_explained(question, HOME, limit=2)
    assert (chosen, reason in {"no_match", "below_threshold"}) == ([], True)
    selector = SemanticInstantSelector(lexical)
    warm(selector, HOME)
    chosen, reason = selector.rank_explained(question, HOME, limit=2)
    assert expected in paths(chosen), (question, paths(chosen), reason)
    assert len(chosen) <= 2


def test_warm_it_embeds_the_query_alone() -> None:
    """A warm pass embeds one text, the query (cut at ``MAX_QUERY_CHARS``), nothing else."""
    encoder = CountingEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    warm(selector, HOME)
    encoder.calls.clear()
    long = PARAPHRASED[0][0] + " " + "please " * 200
    selector.rank_explained(long, HOME, limit=2)
    assert [texts for _, texts in encoder.calls] == [[long[:MAX_QUERY_CHARS]]]


class IntervalEncoder(CountingEncoder):
    """Records the interpreter's switch interval each time it embeds a query."""

    def __init__(self, inner: object) -> None:
        super().__init__(inner)
        self.intervals: list[float] = []

    def embed_query(self, text: str) -> object:
        self.intervals.append(sys.getswitchinterval())
        return super().embed_query(text)


class GatedEncoder(CountingEncoder):
    """Embeds memories only once :attr:`release` is set (a model still loading)."""

    def __init__(self, inner: object) -> None:
        super().__init__(inner)
        self.entered, self.release = threading.Event(), threading.Event()

    def embed(self, texts: Any) -> Any:
        self.entered.set()
        if not self.release.wait(HANG_GUARD):
            raise TimeoutError("never released")
        return super().embed(texts)


class BrokenEncoder:
    """An encoder whose package is installed but fails to import."""

    name = "broken"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Any) -> Any:
        self.calls += 1
        raise ImportError("simulated: no such package")


def stacked(selector: SemanticInstantSelector, docs: Sequence[MemoryDoc]) -> None:
    """Wait for the thread that makes ``selector``'s vectors; check they are stacked."""
    if selector._warming is not None:
        selector._warming.join(HANG_GUARD)
    assert selector.vectors_ready(docs)


def test_its_numpy_work_takes_the_interpreter_lock_back_at_once() -> None:
    """The query's embedding runs inline and its numpy calls release the interpreter
    lock: the pass lowers the switch interval meanwhile (else a thread running Python
    beside it holds the lock for a whole interval after each release), and restores it."""
    encoder = IntervalEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    warm(selector, HOME)
    before = sys.getswitchinterval()
    selector.rank_explained(PARAPHRASED[0][0], HOME, limit=2)
    assert encoder.intervals == [pytest.approx(min(before, SWITCH_S), rel=0.1)]
    assert sys.getswitchinterval() == before


async def test_a_cold_pass_in_a_worker_leaves_the_interval_alone() -> None:
    """Cold (its lexical selector not ready: the vectors are), the pass runs in a worker
    thread while the loop goes on: there the loop is the thread to favour, so the switch
    interval is not lowered."""
    encoder = IntervalEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    selector.prepare_vectors(HOME)
    assert not selector.ready(HOME)
    before = sys.getswitchinterval()
    chosen, _ = await selector.select_explained(PARAPHRASED[0][0], HOME, limit=2)
    assert PARAPHRASED[0][1] in paths(chosen)
    assert encoder.intervals == [before]


def test_the_lexical_answer_comes_first_and_the_vectors_are_not_asked() -> None:
    """A query whose words match is the lexical pass's: no embedding at all."""
    encoder = CountingEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    warm(selector, HOME)
    encoder.calls.clear()
    chosen, reason = selector.rank_explained("when are the bins collected?", HOME, limit=2)
    assert (paths(chosen)[:1], reason) == (["bins.md"], None)
    assert encoder.calls == []


@pytest.mark.parametrize("floor", [None, 0.0])
def test_it_abstains_where_nothing_answers(floor: float | None) -> None:
    """A question no memory answers, in words none uses, gets nothing and a reason;
    with WordLlama's vectors and no similarity floor, the margin alone still says no (no
    memory stands out)."""
    lexical = LexicalSelector(persist=False)
    encoder = WordLlamaEncoder.shared()
    selector = (
        SemanticInstantSelector(lexical, encoder=encoder)
        if floor is None
        else SemanticInstantSelector(lexical, encoder=encoder, min_top_similarity=floor)
    )
    warm(selector, HOME)
    assert selector.rank_explained(UNRELATED, HOME, limit=2) == ([], "below_threshold")


def test_the_names_gate_holds_before_any_vector() -> None:
    """A question naming someone no memory mentions: ``names_unknown``, no embedding."""
    encoder = CountingEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    warm(selector, HOME)
    encoder.calls.clear()
    chosen, reason = selector.rank_explained(
        "How often does Marguerite service her vehicle?", HOME, limit=2
    )
    assert (chosen, reason) == ([], "names_unknown")
    assert encoder.calls == []


def test_a_query_not_in_english_follows_the_vector_selectors_rule() -> None:
    """The embedded model is English: a query in another language (read against notes
    in that language) that the lexical coverage gate rejects is not embedded at all, as
    with the hybrid."""
    maison = [
        make_doc("voiture.md", name="Voiture", description="révision tous les 15 000 km",
                 body="La voiture passe au garage tous les 15 000 km ou une fois par an."),
        make_doc("plantes.md", name="Plantes", description="arrosage le dimanche",
                 body="Arroser les fougères le dimanche ; le cactus une fois par mois."),
        make_doc("poubelles.md", name="Poubelles", description="collecte le mercredi",
                 body="Le papier et le verre sont ramassés le mercredi matin."),
        make_doc("budget.md", name="Budget", description="épargne",
                 body="Mettre 20 % du salaire de côté ; courses limitées à 600 euros."),
    ]  # fmt: skip
    encoder = CountingEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    warm(selector, maison)
    encoder.calls.clear()
    chosen, reason = selector.rank_explained(
        "à quelle fréquence faut-il entretenir le véhicule ?", maison, limit=2
    )
    assert (chosen, encoder.calls) == ([], [])
    assert reason in {"no_match", "below_threshold"}


def test_a_folder_too_small_to_read_a_margin_from_gets_nothing() -> None:
    """Under ``MIN_DOCS`` memories there is no spread to compare the best one with."""
    docs = HOME[: MIN_DOCS - 1]
    selector = SemanticInstantSelector(LexicalSelector(persist=False))
    warm(selector, docs)
    question = "is there anything my boy must never eat?"
    assert selector.rank_explained(question, docs, limit=2) == ([], "below_threshold")


def test_cold_vectors_cost_the_caller_nothing_and_warm_in_a_thread() -> None:
    """Vectors not made yet: the caller gets the lexical answer with no embedding on its
    thread; a daemon thread embeds the memories, and the next call answers from them."""
    encoder = CountingEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    selector.lexical.prepare(HOME)
    question, expected = PARAPHRASED[0]
    caller = threading.current_thread().name
    assert selector.rank_explained(question, HOME, limit=2) == ([], "no_match")
    assert all(thread != caller for thread, _ in encoder.calls)
    warming = selector._warming
    assert warming is not None and warming.daemon
    warming.join(timeout=120)
    assert selector.vectors_ready(HOME)
    chosen, _ = selector.rank_explained(question, HOME, limit=2)
    assert expected in paths(chosen)


def test_the_vectors_wait_until_queries_have_stopped_coming(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Loading the encoder takes the interpreter lock from the loop, so the vectors'
    thread embeds nothing while queries keep coming, and starts only once none has come
    for ``QUIET_S``: a message at a session's start has its request out by then."""
    import time

    # Far longer than the gaps between the queries below, even on a busy machine.
    monkeypatch.setattr(_instant, "QUIET_S", 3.0)
    encoder = CountingEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    selector.prepare(HOME)  # starts the vectors' thread
    question, expected = PARAPHRASED[0]
    for _ in range(10):
        selector.rank_explained(question, HOME, limit=2)
        time.sleep(0.05)
    last = selector._last_query  # the last query's time, as the selector took it
    assert encoder.calls == []
    warming = selector._warming
    assert warming is not None
    warming.join(timeout=HANG_GUARD)
    assert selector.vectors_ready(HOME)
    assert encoder.started_at is not None and encoder.started_at >= last + 3.0
    assert expected in paths(selector.rank_explained(question, HOME, limit=2)[0])


def test_beside_a_vector_selector_it_shares_its_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built beside the hybrid selector on the pass's own encoder, the pass uses its
    lexical selector, encoder and vector cache: the memories are embedded once for both."""
    encoder = CountingEncoder(WordLlamaEncoder.shared())
    monkeypatch.setattr(_instant, "instant_encoder", lambda: encoder)
    hybrid = HybridSelector(encoder, lexical=LexicalSelector(persist=False))
    hybrid.rank("vehicle maintenance", HOME, limit=2)
    embedded = len(encoder.calls)
    selector = SemanticInstantSelector.beside(hybrid)
    assert selector.lexical is hybrid.lexical
    selector.prepare_vectors(HOME)
    texts = [t for _, batch in encoder.calls[embedded:] for t in batch]
    assert texts == ["warm"]  # the set-up call only: no memory embedded again


async def test_it_rides_on_the_first_request(tmp_path: Path) -> None:
    """Through the prefetcher, warm: the block is computed inside ``start`` and taken at
    the user query (``instant-semantic``) for a question that shares no word with it."""
    store = FolderStore(tmp_path / "memory")
    for doc in HOME:
        store.save_memory(doc.name, doc.description, "user", doc.body, origin="user")
    selector = SemanticInstantSelector(LexicalSelector())
    recaller = Recaller(FolderStore(tmp_path / "memory"), LexicalSelector())
    async with RecallPrefetcher(recaller, instant_selector=selector) as prefetcher:
        await prefetcher.warm()
        stacked(selector, recaller.store.scan())
        question, _ = PARAPHRASED[1]
        assert prefetcher.start("k", question)
        block = prefetcher.take("k", "user_query")
    assert block is not None
    assert block.strategy == "instant-semantic"
    assert any("workout" in path for path in block.paths)


async def test_warming_at_start_up_makes_the_vectors(tmp_path: Path) -> None:
    """``Recaller.warm`` with the pass starts its vectors even when the lexical counts
    were ready already (a folder read at start-up); they come in a thread of their own."""
    store = FolderStore(tmp_path / "memory")
    for doc in HOME:
        store.save_memory(doc.name, doc.description, "user", doc.body, origin="user")
    lexical = LexicalSelector()
    recaller = Recaller(FolderStore(tmp_path / "memory"), lexical)
    await recaller.warm()
    selector = SemanticInstantSelector(lexical)
    docs = recaller.store.scan()
    assert selector.ready(docs) and not selector.vectors_ready(docs)
    await asyncio.wait_for(recaller.warm(selector=selector), timeout=120)
    stacked(selector, recaller.store.scan())


async def test_warming_does_not_wait_for_the_model(tmp_path: Path) -> None:
    """A warm-up (``Recaller.warm``, the command line's start-up, the hooks' service)
    waits for the lexical counts only: while the model is still loading, the lexical
    pass answers inline, and the vectors follow."""
    store = FolderStore(tmp_path / "memory")
    for doc in HOME:
        store.save_memory(doc.name, doc.description, "user", doc.body, origin="user")
    loading = GatedEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(), encoder=loading)
    recaller = Recaller(FolderStore(tmp_path / "memory"), LexicalSelector())
    await asyncio.wait_for(recaller.warm(selector=selector), timeout=HANG_GUARD)
    assert loading.entered.wait(HANG_GUARD)  # the model is loading, in its own thread
    docs = recaller.store.scan()
    assert selector.ready(docs) and not selector.vectors_ready(docs)
    result = recaller.recall_instant("when is the car serviced?", selector=selector)
    assert result is not None and [d.rel_path for d in result.selected] == ["car-service.md"]
    loading.release.set()
    stacked(selector, docs)


def test_a_model_that_cannot_load_leaves_the_pass_lexical(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An encoder whose package fails to import: one warning, the pass answers as the
    lexical selector does, and no later query tries to load it again."""
    broken = BrokenEncoder()
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=broken)
    with caplog.at_level(logging.WARNING):
        selector.prepare(HOME)
        assert selector._warming is not None
        selector._warming.join(HANG_GUARD)
        for question, _ in PARAPHRASED:
            assert selector.rank_explained(question, HOME, limit=2)[0] == []
        assert selector.rank_explained("when is the car serviced?", HOME, limit=2)[0]
        selector.prepare(HOME)  # a later warm-up (a changed folder) does not try again
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "words only" in warnings[0], warnings
    assert "simulated: no such package" in warnings[0]
    assert broken.calls == 1
    assert not selector._warming.is_alive()


def test_a_conversation_that_was_shown_some_files_keeps_the_vectors() -> None:
    """The offer leaves out the files a conversation was shown: the vectors stacked for
    the whole folder still serve it, without embedding anything but the query, and the
    margin is read over what is offered."""
    encoder = CountingEncoder(WordLlamaEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    warm(selector, HOME)
    question, expected = PARAPHRASED[2]
    offered = [doc for doc in HOME if doc.rel_path not in {"bins.md", "plants.md"}]
    assert selector.vectors_ready(offered)
    encoder.calls.clear()
    warming = selector._warming
    chosen, _ = selector.rank_explained(question, offered, limit=2)
    assert expected in paths(chosen)
    assert [texts for _, texts in encoder.calls] == [[question]]
    assert selector._warming is warming  # nothing to re-stack: no thread started

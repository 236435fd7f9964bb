"""The embedding and hybrid selectors.

The fake-encoder tests need numpy only; the real-model tests need ``wordllama``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("numpy")

from asyncrecall.memory.selectors._embedding import (
    EmbeddingSelector,
    HybridSelector,
    WordLlamaEncoder,
)
from asyncrecall.memory.selectors._lexical import LexicalSelector

from .conftest import HashingEncoder, make_doc

DOCS = [
    make_doc("db.md", name="Database", body="postgres runs in docker\nmigrations use alembic"),
    make_doc("ci.md", name="CI", body="the pipeline runs pytest\nlint runs ruff and mypy"),
    make_doc("style.md", name="Style", body="prefer dataclasses\nno print in library code"),
    make_doc("user.md", name="User", body="the user is a data engineer\nlikes short answers"),
]


async def test_embedding_selector_ranks_by_similarity() -> None:
    """The document sharing the query's words comes first; at most ``limit`` come back."""
    selector = EmbeddingSelector(HashingEncoder(), min_similarity=0.0)
    chosen = await selector.select("which lint runs mypy", DOCS, limit=2)
    assert chosen[0].rel_path == "ci.md"
    assert len(chosen) == 2
    assert selector.name == "embedding"


@pytest.mark.parametrize("scoring", ["document", "line", "combined"])
def test_each_scoring_finds_the_matching_line(scoring: str) -> None:
    """Whole-document, best-line and combined scoring all rank the matching file first."""
    selector = EmbeddingSelector(HashingEncoder(), scoring=scoring)  # type: ignore[arg-type]
    assert selector.rank("alembic migrations", DOCS, limit=1)[0].rel_path == "db.md"


def test_vectors_are_cached_by_path_size_and_mtime() -> None:
    """A warm selection embeds only the query; a changed file (new mtime) is embedded again."""
    encoder = HashingEncoder()
    selector = EmbeddingSelector(encoder)
    selector.rank("postgres", DOCS, limit=3)
    encoder.embedded.clear()
    selector.rank("ruff", DOCS, limit=3)
    assert encoder.embedded == ["ruff"]

    touched = [*DOCS[:3], make_doc("user.md", name="User", body=DOCS[3].body, mtime=2_000.0)]
    encoder.embedded.clear()
    selector.rank("ruff", touched, limit=3)
    assert encoder.embedded[0] == "ruff"
    assert any("data engineer" in text for text in encoder.embedded[1:])
    assert not any("postgres" in text for text in encoder.embedded)


def test_unrelated_query_selects_nothing() -> None:
    """Below the similarity floor nothing is chosen, so small talk recalls no memory."""
    selector = EmbeddingSelector(HashingEncoder())
    assert selector.rank("thanks a lot", DOCS, limit=5) == []
    assert selector.rank("   ", DOCS, limit=5) == []
    assert selector.rank("postgres", DOCS, limit=0) == []
    assert selector.rank("postgres", [], limit=5) == []


async def test_hybrid_fuses_the_projects_bm25() -> None:
    """The hybrid uses the lexical selector it is given (shared cache, and its fallback)."""
    lexical = LexicalSelector()
    hybrid = HybridSelector(HashingEncoder(), lexical=lexical)
    assert hybrid.fallback is lexical
    assert hybrid.name == "hybrid"
    chosen = await hybrid.select("docker postgres", DOCS, limit=5)
    assert chosen[0].rel_path == "db.md"
    # Without abstention, a stemmed BM25 match ("migration" ~ "migrations") is eligible
    # whatever its vectors (with it, no line near the query means nothing is selected).
    open_hybrid = HybridSelector(HashingEncoder(), lexical=lexical, abstain=False)
    assert open_hybrid.rank("migration", DOCS, limit=1)[0].rel_path == "db.md"
    assert hybrid.rank("migration", DOCS, limit=1) == []
    assert hybrid.rank("thanks a lot", DOCS, limit=5) == []


def test_module_import_loads_no_numpy() -> None:
    """Importing the selectors costs nothing: numpy and the model load on first use."""
    code = (
        "import sys, asyncrecall.memory.selectors._embedding as e; "
        "e.EmbeddingSelector; assert 'numpy' not in sys.modules, 'numpy imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def wordllama_encoder() -> WordLlamaEncoder:
    pytest.importorskip("wordllama")
    encoder = WordLlamaEncoder.shared()
    encoder.load()
    return encoder


def test_wordllama_loads_offline_from_the_installed_package() -> None:
    """The bundled model loads with the network unusable (any request would fail)."""
    pytest.importorskip("wordllama")
    code = (
        "import socket\n"
        "def deny(*a, **k): raise OSError('network used')\n"
        "socket.socket.connect = deny\n"
        "socket.create_connection = deny\n"
        "from asyncrecall.memory.selectors._embedding import WordLlamaEncoder\n"
        "v = WordLlamaEncoder().embed(['hello world'])\n"
        "assert v.shape == (1, 256), v.shape\n"
    )
    env = {"HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_real_hybrid_picks_the_right_memory(wordllama_encoder: WordLlamaEncoder) -> None:
    """With the real model, a paraphrased question finds its file among four."""
    docs = [
        make_doc("pets.md", name="Pets", body="Melanie adopted a puppy named Oliver"),
        make_doc("work.md", name="Work", body="Caroline started a new job as a counselor"),
        make_doc("trip.md", name="Trip", body="They went camping in the mountains in June"),
        make_doc("art.md", name="Art", body="Melanie painted a sunrise over a lake"),
    ]
    hybrid = HybridSelector(wordllama_encoder)
    chosen = hybrid.rank("What is the name of Melanie's dog?", docs, limit=1)
    assert chosen[0].rel_path == "pets.md"
    embedding = EmbeddingSelector(wordllama_encoder)
    chosen = embedding.rank("Which outdoor trip did they take?", docs, limit=1)
    assert chosen[0].rel_path == "trip.md"


class GatedEncoder(HashingEncoder):
    """Blocks its second call (the first document's text) until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.gate = threading.Event()
        self.blocked: asyncio.Future[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        if self.calls == 2:
            assert self.loop is not None and self.blocked is not None
            self.loop.call_soon_threadsafe(self.blocked.set_result, None)
            assert self.gate.wait(30), "hang guard"
        return super().embed(texts)


MANY = [make_doc(f"m{i}.md", body=f"line {i} about topic{i}\nmore words") for i in range(40)]


def _worker(name: str) -> threading.Thread:
    return next(t for t in threading.enumerate() if t.name == name)


@pytest.mark.parametrize("factory", [EmbeddingSelector, HybridSelector])
async def test_a_cancelled_selection_stops_at_its_next_batch(factory: Any) -> None:
    """After a cancel, the worker finishes the embedding call it is in and makes no
    other (40 cold documents: only the query and the first document's text are embedded)."""
    encoder = GatedEncoder()
    encoder.loop = asyncio.get_running_loop()
    encoder.blocked = encoder.loop.create_future()
    selector = factory(encoder)
    task = asyncio.create_task(selector.select("topic3", MANY, limit=5))
    await asyncio.wait_for(asyncio.shield(encoder.blocked), 30)  # hang guard
    worker = _worker(f"asyncrecall-{selector.name}")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    encoder.gate.set()
    worker.join(30)  # hang guard
    assert not worker.is_alive()
    # the query, the first document's whole text: nothing after the cancel.
    assert encoder.calls == 2
    assert len(encoder.embedded) == 2


def test_a_cancelled_selection_never_holds_the_programs_exit() -> None:
    """``asyncio.run`` returns while a cancelled selection's worker is still busy: the
    worker is not in the loop's executor, which ``asyncio.run`` joins at exit."""
    encoder = GatedEncoder()
    returned = threading.Event()

    async def main() -> None:
        encoder.loop = asyncio.get_running_loop()
        encoder.blocked = encoder.loop.create_future()
        task = asyncio.create_task(EmbeddingSelector(encoder).select("topic3", MANY, limit=5))
        await encoder.blocked
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def run() -> None:
        asyncio.run(main())
        returned.set()

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        # The worker is still inside embed (gate closed) while asyncio.run returns.
        assert returned.wait(30), "asyncio.run waited for the cancelled worker"
        assert not encoder.gate.is_set()
    finally:
        encoder.gate.set()
        runner.join(30)


NAMED = [
    make_doc("ann-1.md", name="Ann, session 1", body="Ann adopted a grey cat named Pixel"),
    make_doc("ann-2.md", name="Ann, session 2", body="Ann plays the violin every evening"),
    make_doc("bob-1.md", name="Bob, session 1", body="Bob trains for the Berlin marathon"),
]


@pytest.mark.parametrize("factory", [EmbeddingSelector, HybridSelector, None])
def test_a_query_naming_nobody_the_memory_knows_selects_nothing(factory: Any) -> None:
    """Every embedded selector abstains when the query names someone no memory mentions,
    and answers when it names someone they do (months and the first word do not count
    as names); ``abstain=False`` turns the rule off."""

    def make(**kw: Any) -> Any:
        if factory is None:
            return LexicalSelector(**kw)
        kw["min_top_similarity"] = 0.0  # only the names gate is under test here
        if factory is EmbeddingSelector:
            kw["min_similarity"] = 0.0  # the hashing encoder's cosines are small
        return factory(HashingEncoder(), **kw)

    selector = make()
    assert selector.rank("What cat did Carol adopt in May?", NAMED, limit=3) == []
    assert selector.rank("What cat did Ann adopt in May?", NAMED, limit=3)[0].rel_path == "ann-1.md"
    assert selector.rank("Cat adopted by Ann?", NAMED, limit=3)[0].rel_path == "ann-1.md"
    opened = make(abstain=False)
    assert opened.rank("What cat did Carol adopt?", NAMED, limit=3)[0].rel_path == "ann-1.md"


def test_the_embedding_gate_needs_one_close_line() -> None:
    """No memory line near the query (best cosine under ``min_top_similarity``): nothing."""
    selector = EmbeddingSelector(HashingEncoder(), min_similarity=0.0, min_top_similarity=0.99)
    assert selector.rank("cat adopted", NAMED, limit=3) == []
    lenient = EmbeddingSelector(HashingEncoder(), min_similarity=0.0, min_top_similarity=0.0)
    assert lenient.rank("cat adopted", NAMED, limit=3)[0].rel_path == "ann-1.md"


def test_rrf_fusion_is_still_available() -> None:
    """``fusion="rrf"`` keeps the earlier reciprocal-rank fusion and its weights."""
    hybrid = HybridSelector(HashingEncoder(), fusion="rrf")
    assert hybrid.weights == (2.0, 1.0, 1.0)
    assert hybrid.rank("violin evening", NAMED, limit=1)[0].rel_path == "ann-2.md"
    assert HybridSelector(HashingEncoder()).weights == (0.75, 1.0, 1.0)


class SameVectorEncoder:
    """Every text gets the same vector: every cosine is 1, as an English model's often
    nearly are between any two texts of a script it was not trained on."""

    name = "same-vector"

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        return np.full((len(texts), 8), 8**-0.5, dtype=np.float32)


@pytest.mark.parametrize("factory", [EmbeddingSelector, HybridSelector])
def test_a_query_not_in_english_also_needs_the_lexical_coverage(factory: Any) -> None:
    """The vector selectors' closeness gate was chosen on English: for a query in another
    language they abstain as the lexical selector does too (without it, on our
    Chinese set the hybrid selected something for 97.5 % of the questions asked against
    a folder that does not answer them). English queries keep the closeness gate alone."""
    selector = factory(SameVectorEncoder())
    unrelated = [
        make_doc("rent.md", name="房租", body="房租每月 6500 元，每月 5 号之前转给房东。"),
        make_doc("cat.md", name="宠物猫", body="家里的猫每年三月打疫苗。"),
    ]
    assert selector.rank("我的车什么时候要年检？", unrelated, limit=5) == []
    related = [make_doc("car.md", name="车辆信息", body="家里的车每年十月要做年检。"), *unrelated]
    assert selector.rank("我的车什么时候要年检？", related, limit=1)[0].rel_path == "car.md"
    french = [make_doc("loyer.md", name="Banque", body="Le loyer est prélevé le 3 du mois.")]
    assert selector.rank("Quand faut-il arroser les tomates ?", french, limit=5) == []
    # English: no lexical coverage gate (the LoCoMo figures were measured without it).
    assert selector.rank("quantum spectroscopy", DOCS, limit=1) != []


def test_loading_the_model_leaves_logging_as_it_was() -> None:
    """WordLlama configures the root logger when imported (INFO, to standard error):
    loading the encoder undoes that, so an application's HTTP requests are not printed."""
    pytest.importorskip("wordllama")
    code = (
        "import logging\n"
        "from asyncrecall.memory.selectors._embedding import WordLlamaEncoder\n"
        "WordLlamaEncoder().load()\n"
        "root = logging.getLogger()\n"
        "print(len(root.handlers), root.level)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["0", str(logging.WARNING)]

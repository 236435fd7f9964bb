"""Embedding selectors: memory files ranked by vectors, alone or fused with BM25.

The vectors come from `WordLlama <https://github.com/dleemiller/WordLlama>`_ (its
``l2_supercat`` 256-dimension token embeddings, average-pooled): numpy only, the
weights and tokenizer inside its 19 MB wheel, about 0.2 s to load and well under a
millisecond to embed a query. The alternative measured for issue 6, all-MiniLM-L6-v2,
scores a little higher alone but needs torch (hundreds of MB) and about 3 s to load;
fused with BM25 both land at about the same recall, so the light one wins.

Loading is lazy and offline: nothing is imported until the first selection (the CLI's
other commands never pay for numpy), and the model is read from the installed
package's own folder with downloads disabled (WordLlama's default lookup misses the
bundled tokenizer and would try the network).

Two selectors:

- :class:`EmbeddingSelector` (``embedding``) scores each document by the cosine of the
  query with the whole document's vector plus its best-matching line's (``combined``),
  or by either alone (``document``, ``line``);
- :class:`HybridSelector` (``hybrid``) fuses three rankings by weighted reciprocal
  rank (k = 60): the project's BM25 (:class:`LexicalSelector`, weight 2: the strongest
  single ranker on LoCoMo), document vectors and best lines (weight 1 each).

Vectors are cached per document on its path and fingerprint (size, mtime, revision),
so a warm selection embeds only the query. Selection runs in a daemon worker thread
(the first one loads the model); cancelling the awaiting task returns at once and the
thread stops at its next embedding call (one document's text, or ``LINE_BATCH`` of its
lines), keeping what it embedded; the program's exit never waits for it. Both
selectors carry ``fallback``: the lexical selector, which :class:`Recaller` asks
when the embedding package is missing.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, Protocol, Self, TypeAlias

from asyncrecall.memory._threads import check, run_off_loop
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.selectors._lexical import LexicalSelector, first_fields

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Vectors: TypeAlias = NDArray[np.float32]
    Vector: TypeAlias = NDArray[np.float32]

__all__ = [
    "EmbeddingScoring",
    "EmbeddingSelector",
    "Encoder",
    "Fusion",
    "HybridSelector",
    "WordLlamaEncoder",
    "embedding_available",
]

EmbeddingScoring: TypeAlias = Literal["document", "line", "combined"]
Fusion: TypeAlias = Literal["score", "rrf"]


def embedding_available() -> bool:
    """Whether the embedding package is installed (checked without importing it)."""
    import importlib.util

    return importlib.util.find_spec("wordllama") is not None


#: Lines of one document that get a vector of their own (a cap for huge bodies).
MAX_LINES: Final = 400
#: Lines embedded in one call, between two checks of a cancellation. Batching more
#: buys nothing (WordLlama costs the same per text either way) and one call of 16
#: lines takes a few milliseconds, so a cancelled selection stops that fast.
LINE_BATCH: Final = 16
#: Reciprocal-rank fusion constant (the usual 60).
RRF_K: Final = 60
#: Best-line cosine below which a document counts as unrelated (unless BM25 matches it).
#: On LoCoMo dev, 99 % of gold files score above 0.30 and chit-chat ("thanks!", "run
#: make lint") stays under 0.27 against every file, so small talk recalls nothing.
MIN_SIMILARITY: Final = 0.3
#: Abstain when no memory's best line reaches this cosine with the query. With the
#: strict names gate, on LoCoMo dev: false injection 0.017 at 0.2, 0.009 at 0.25,
#: 0.008 at 0.3, for recall@5 0.831, 0.831, 0.829 (hybrid); alone, 0.031 at 0.4.
MIN_TOP_SIMILARITY: Final = 0.25
#: The hybrid's score-fusion weights (BM25, document, line), chosen on LoCoMo dev:
#: recall@5 0.834; (1, 1, 1) 0.831, (1, 1.25, 1.25) 0.833, min-max scaling 0.830.
SCORE_WEIGHTS: Final = (0.75, 1.0, 1.0)
#: The reciprocal-rank fusion weights of ``fusion="rrf"`` (recall@5 0.807).
RRF_WEIGHTS: Final = (2.0, 1.0, 1.0)


class Encoder(Protocol):
    """Turns texts into unit-length vectors, one row per text. Must be thread-safe.

    An encoder may also have ``embed_query(text)``: one text's vector through a pass
    cheaper for a query on the event loop (:func:`embed_query` uses it)."""

    @property
    def name(self) -> str:
        """A label for logs and reprs."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """A ``(len(texts), dim)`` float32 array of L2-normalised rows."""
        ...


def embed_query(encoder: Encoder, text: str) -> Vector:
    """``text``'s vector, through the encoder's pass for queries when it has one."""
    one = getattr(encoder, "embed_query", None)
    if one is not None:
        vector: Vector = one(text)
    else:
        vector = encoder.embed([text])[0]
    return vector


class _LazyEncoder:
    """An encoder whose model is loaded once, on first use (or :meth:`load`), under a
    lock; :meth:`shared` is the process-wide instance of each subclass, which says how
    its model is loaded (:meth:`_load_model`)."""

    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(loaded={self._model is not None})"

    @classmethod
    def shared(cls) -> Self:
        """The one encoder of this class in the process (its model is loaded once,
        lazily)."""
        with _LazyEncoder._shared_lock:
            found = cls.__dict__.get("_instance")
            if found is None:
                found = cls()
                cls._instance = found  # type: ignore[attr-defined]
            return found

    def load(self) -> None:
        """Load the model now (idempotent); otherwise the first :meth:`embed` does."""
        self._loaded()

    def _loaded(self) -> Any:
        model = self._model
        if model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load_model()
                model = self._model
        return model

    def _load_model(self) -> Any:
        raise NotImplementedError


class WordLlamaEncoder(_LazyEncoder):
    """WordLlama's bundled model, loaded on first use from the installed package only.

    Raises :class:`ImportError` on first use when ``wordllama`` is not installed.
    Use :meth:`shared` for the process-wide instance.
    """

    @property
    def name(self) -> str:
        return "wordllama-l2_supercat-256"

    def _load_model(self) -> Any:
        wordllama = _import_wordllama()
        folder = Path(wordllama.__file__).parent
        return wordllama.WordLlama.load(cache_dir=folder, disable_download=True)

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Average-pooled token vectors, L2-normalised (a zero row for an empty text)."""
        import numpy as np

        model = self._loaded()
        if not texts:
            return np.zeros((0, 256), dtype=np.float32)
        vectors = model.embed(list(texts), norm=False)
        matrix: Vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        np.maximum(norms, 1e-12, out=norms)
        normalised: Vectors = matrix / norms
        return normalised


def _import_wordllama() -> Any:
    """``import wordllama``, leaving the root logger as it was: the package configures
    logging at import (``basicConfig`` at INFO), which would print every HTTP request of
    the application that loaded it on standard error."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama  # type: ignore[import-untyped]
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return wordllama


@dataclass(frozen=True, slots=True)
class _DocVectors:
    """A document's vectors, valid while its fingerprint does not change."""

    key: tuple[int, float, int]
    document: Vectors  # (dim,)
    lines: Vectors  # (n_lines, dim), at least one row


def _document_text(doc: MemoryDoc) -> str:
    return f"{doc.title}\n{doc.description}\n{doc.body}"


def _line_texts(doc: MemoryDoc) -> list[str]:
    """Each non-blank body line, prefixed by the title (it names who or what)."""
    lines = [line.strip() for line in doc.body.splitlines() if line.strip()][:MAX_LINES]
    if not lines:
        lines = [doc.description or doc.title]
    return [f"{doc.title}: {line}" for line in lines]


class _VectorIndex:
    """Per-path cache of document and line vectors; thread-safe."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self._entries: dict[Path, _DocVectors] = {}
        self._lock = threading.Lock()

    def scores(
        self, query: str, docs: Sequence[MemoryDoc], stop: threading.Event | None = None
    ) -> tuple[list[float], list[float]]:
        """Per document: cosine with the whole document, and with its best line.

        ``stop`` is checked between embedding batches (:class:`Stopped` when set).
        """
        query_vector = embed_query(self.encoder, query)
        entries = self._vectors(docs, stop)
        whole = [float(e.document @ query_vector) for e in entries]
        best = [float((e.lines @ query_vector).max()) for e in entries]
        return whole, best

    def _vectors(
        self, docs: Sequence[MemoryDoc], stop: threading.Event | None
    ) -> list[_DocVectors]:
        with self._lock:
            found: list[_DocVectors | None] = []
            missing: list[int] = []
            for i, doc in enumerate(docs):
                entry = self._entries.get(doc.path)
                if entry is None or entry.key != doc.fingerprint:
                    entry = None
                    missing.append(i)
                found.append(entry)
            for i in missing:
                found[i] = self._embed(docs[i], stop)
            if len(self._entries) > max(4096, 4 * len(docs)):
                live = {doc.path for doc in docs}
                self._entries = {p: e for p, e in self._entries.items() if p in live}
        return [entry for entry in found if entry is not None]

    def _embed(self, doc: MemoryDoc, stop: threading.Event | None) -> _DocVectors:
        """Embed one document: its whole text, then its lines ``LINE_BATCH`` at a time,
        checking ``stop`` before each call (one call: a few milliseconds)."""
        import numpy as np

        check(stop)
        whole = self.encoder.embed([_document_text(doc)])[0]
        lines = _line_texts(doc)
        parts = []
        for start in range(0, len(lines), LINE_BATCH):
            check(stop)
            parts.append(self.encoder.embed(lines[start : start + LINE_BATCH]))
        entry = _DocVectors(doc.fingerprint, whole, np.concatenate(parts))
        self._entries[doc.path] = entry
        return entry


def _top(scores: Sequence[float], limit: int) -> list[int]:
    """Indices of the ``limit`` best scores; ties keep the offered order (newest first)."""
    return heapq.nlargest(limit, range(len(scores)), key=lambda i: (scores[i], -i))


class _VectorSelector:
    """What both embedding selectors share: the vector cache, ``select`` and ``rank``.

    A subclass says how documents are ordered (:meth:`_order`). ``select`` computes in a
    daemon thread that stops at the next batch once the awaiting task is cancelled.
    """

    name: str

    def __init__(self, encoder: Encoder | None, *, lexical: LexicalSelector | None) -> None:
        self.encoder: Encoder = encoder or WordLlamaEncoder.shared()
        self.lexical = lexical if lexical is not None else LexicalSelector()
        #: What :class:`Recaller` asks when this selector fails (its BM25).
        self.fallback: LexicalSelector = self.lexical
        self._index = _VectorIndex(self.encoder)

    async def select(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """The best ``limit`` documents, best first (computed in a worker thread that
        stops within one batch of a cancellation and never holds the program's exit)."""
        return (await self.select_explained(query, docs, limit=limit))[0]

    async def select_explained(
        self, query: str, docs: Sequence[MemoryDoc], *, limit: int
    ) -> tuple[list[MemoryDoc], str | None]:
        """:meth:`select`, and when it selects nothing, why (``below_threshold``,
        ``names_unknown``, ``no_match`` ...)."""
        if not query.strip() or not docs or limit <= 0:
            return [], None
        return await run_off_loop(
            lambda stop: self._rank(query, docs, limit, stop), name=f"asyncrecall-{self.name}"
        )

    def rank(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """Synchronous selection (loads the model on first use)."""
        return self._rank(query, docs, limit, None)[0]

    def _rank(
        self, query: str, docs: Sequence[MemoryDoc], limit: int, stop: threading.Event | None
    ) -> tuple[list[MemoryDoc], str | None]:
        if not query.strip() or not docs or limit <= 0:
            return [], None
        self.lexical.prepare(docs, stop=stop)  # cold: tokenise with cancellation checks
        named = self.lexical.fields.matches(query, docs)
        order, reason = self._order(query, docs, stop)
        chosen = list(named[:limit]) if reason is not None else first_fields(named, order, limit)
        return [docs[i] for i in chosen], None if chosen else reason or "no_match"

    def _order(
        self, query: str, docs: Sequence[MemoryDoc], stop: threading.Event | None
    ) -> tuple[list[int], str | None]:
        """The documents in order, or why the selector abstains."""
        raise NotImplementedError


class EmbeddingSelector(_VectorSelector):
    """Ranks documents by vector similarity to the query (no BM25).

    ``scoring``: ``combined`` (default: whole-document cosine plus best-line cosine),
    ``document`` or ``line``. Returns the ``limit`` best among the documents whose
    best line reaches ``min_similarity`` (so small talk selects nothing). With
    ``abstain`` (default) it selects nothing when the query names something no memory
    mentions or no memory's best line reaches ``min_top_similarity``, and a query not
    in English also when the lexical selector's coverage gate holds
    (:meth:`LexicalSelector.vector_gates`).
    """

    name: Final = "embedding"

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        scoring: EmbeddingScoring = "combined",
        min_similarity: float = MIN_SIMILARITY,
        fallback: LexicalSelector | None = None,
        abstain: bool = True,
        min_top_similarity: float = MIN_TOP_SIMILARITY,
    ) -> None:
        super().__init__(encoder, lexical=fallback)
        self.scoring: EmbeddingScoring = scoring
        self.min_similarity = min_similarity
        self.abstain = abstain
        self.min_top_similarity = min_top_similarity

    def __repr__(self) -> str:
        return (
            f"EmbeddingSelector({self.encoder.name!r}, scoring={self.scoring!r}, "
            f"abstain={self.abstain})"
        )

    def _order(
        self, query: str, docs: Sequence[MemoryDoc], stop: threading.Event | None
    ) -> tuple[list[int], str | None]:
        whole, best = self._index.scores(query, docs, stop)
        if self.abstain:
            reason = self._abstains(query, docs, best, stop)
            if reason is not None:
                return [], reason
        if self.scoring == "document":
            scores = whole
        elif self.scoring == "line":
            scores = best
        else:
            scores = [w + b for w, b in zip(whole, best, strict=True)]
        return [i for i in _top(scores, len(docs)) if best[i] >= self.min_similarity], None

    def _abstains(
        self,
        query: str,
        docs: Sequence[MemoryDoc],
        best: Sequence[float],
        stop: threading.Event | None,
    ) -> str | None:
        if not best or max(best) < self.min_top_similarity:
            return "below_threshold"
        self.lexical.prepare(docs, stop=stop)
        return self.lexical.gate_reason(query, docs)


class HybridSelector(_VectorSelector):
    """BM25 fused with document vectors and best lines.

    ``fusion="score"`` (default): each document's BM25 score, best-line cosine and
    whole-document cosine are standardised over the offered documents (z-scores) and
    summed with ``weights`` (BM25, document, line; default 0.75, 1, 1). ``"rrf"``:
    the earlier weighted reciprocal-rank fusion (default weights 2, 1, 1, ``k`` 60).
    ``lexical`` is the project's :class:`LexicalSelector` (shared with the fallback,
    so its cache serves both). A document that BM25 does not match still ranks when
    its best line reaches ``min_similarity``; the others are never selected.

    With ``abstain`` (default) it selects nothing when the query names something no
    memory mentions (:meth:`LexicalSelector.names_unknown`) or no memory's best line
    reaches ``min_top_similarity``; a query not in English must also pass the lexical
    coverage gate (:meth:`LexicalSelector.vector_gates`). Chosen on LoCoMo dev
    (``asyncrecall bench quality --negatives``): recall@5 0.807 (RRF) -> 0.834 (score
    fusion), and with abstention 0.833 for a false injection rate of 0.056 instead of
    0.913.
    """

    name: Final = "hybrid"

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        lexical: LexicalSelector | None = None,
        weights: tuple[float, float, float] | None = None,
        k: int = RRF_K,
        min_similarity: float = MIN_SIMILARITY,
        fusion: Fusion = "score",
        abstain: bool = True,
        min_top_similarity: float = MIN_TOP_SIMILARITY,
    ) -> None:
        super().__init__(encoder, lexical=lexical)
        self.fusion: Fusion = fusion
        default = SCORE_WEIGHTS if fusion == "score" else RRF_WEIGHTS
        self.weights = weights if weights is not None else default
        self.k = k
        self.min_similarity = min_similarity
        self.abstain = abstain
        self.min_top_similarity = min_top_similarity

    def __repr__(self) -> str:
        return (
            f"HybridSelector({self.encoder.name!r}, fusion={self.fusion!r}, "
            f"weights={self.weights}, abstain={self.abstain})"
        )

    def _order(
        self, query: str, docs: Sequence[MemoryDoc], stop: threading.Event | None
    ) -> tuple[list[int], str | None]:
        self.lexical.prepare(docs, stop=stop)  # cold: tokenise with cancellation checks
        bm25 = self.lexical.scores(query, docs)
        whole, best = self._index.scores(query, docs, stop)
        if self.abstain:
            if max(best) < self.min_top_similarity:
                return [], "below_threshold"
            reason = self.lexical.gate_reason(query, docs)
            if reason is not None:
                return [], reason
        lexical_weight, document_weight, line_weight = self.weights
        if self.fusion == "score":
            fused = [
                lexical_weight * b + document_weight * w + line_weight * line
                for b, w, line in zip(_z(bm25), _z(whole), _z(best), strict=True)
            ]
        else:
            fused = [0.0] * len(docs)
            for weight, scores in (
                (lexical_weight, bm25),
                (document_weight, whole),
                (line_weight, best),
            ):
                for rank, i in enumerate(_top(scores, len(docs))):
                    if weight and (scores is not bm25 or bm25[i] > 0.0):
                        fused[i] += weight / (self.k + rank + 1)
        return [
            i for i in _top(fused, len(docs)) if bm25[i] > 0.0 or best[i] >= self.min_similarity
        ], None


def _z(values: Sequence[float]) -> list[float]:
    """``values`` standardised (mean 0, standard deviation 1); all 0 when constant."""
    count = len(values)
    mean = sum(values) / count
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / count)
    if spread < 1e-9:
        return [0.0] * count
    return [(v - mean) / spread for v in values]

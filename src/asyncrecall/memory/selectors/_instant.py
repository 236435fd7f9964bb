"""The semantic instant pass: BM25 first, then the query's vector against warm vectors.

:class:`SemanticInstantSelector` is an instant selector (it runs inline, on the event
loop, as the lexical one does) for the pass that rides on a message's first request.
It asks its :class:`LexicalSelector` first; only when that abstains because too little
of the query's wording occurs in any memory (``no_match``, ``below_threshold``) does it
look at the memories' meaning, and only when that costs no cold work:

- the embedded model is loaded and every offered memory's vectors are cached (a
  daemon thread that :meth:`prepare` starts does it; a model that cannot be loaded is
  said once, in a warning, and the pass stays lexical); then the pass embeds the query
  alone (one call, the query cut at :data:`MAX_QUERY_CHARS`) and takes one matrix product over
  the cached document and line vectors, stacked once per folder state. Its work is
  bounded by construction: at most :data:`MAX_ROWS` vectors, or the pass is skipped;
- otherwise it answers as the lexical selector did, and a daemon thread embeds what is
  missing for the next query (never the event loop).

Its vectors come from the multilingual encoder when its package is installed
(:class:`~asyncrecall.memory.selectors._multilingual.MultilingualEncoder`, the ``local``
extra), else from WordLlama's English one. It abstains as the vector selectors do
(:class:`~asyncrecall.memory.HybridSelector`): nothing when the query names something no
memory mentions (the names gate; with the multilingual encoder a German query's nouns do
not count as names), when a query not in English fails the lexical coverage gate (only
with an English encoder: :meth:`LexicalSelector.vector_gates`), or when the best-ranked
memory's best line is under ``min_top_similarity``; and one rule of its own, because
it speaks alone here where the hybrid has BM25 beside it: the best memory must stand
out from the folder, its combined score (whole-document plus best-line cosine) at
least ``min_margin`` standard deviations above the offered memories' mean (a folder of
fewer than :data:`MIN_DOCS` memories has no spread to read: the pass abstains there). Both
thresholds come from ``benchmarks/instant_gate.py``: the points that add no junk on the
LoCoMo dev file (few of its questions reach the vectors at all), then folds over the
no-shared-word set's folders. For WordLlama the folds did not agree, and the stricter
point, the grid's first, is the one shipped; for the multilingual encoder both chose the
point shipped.
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from asyncrecall.memory._threads import check, run_off_loop
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.selectors._embedding import (
    Encoder,
    WordLlamaEncoder,
    _VectorIndex,
    _VectorSelector,
    embed_query,
    embedding_available,
)
from asyncrecall.memory.selectors._handback import quick_return
from asyncrecall.memory.selectors._lexical import LexicalSelector
from asyncrecall.memory.selectors._multilingual import MultilingualEncoder, multilingual_available

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_ROWS",
    "MIN_DOCS",
    "MIN_INSTANT_MARGIN",
    "MIN_INSTANT_SIMILARITY",
    "MULTILINGUAL_MIN_MARGIN",
    "MULTILINGUAL_MIN_SIMILARITY",
    "QUIET_S",
    "SemanticInstantSelector",
    "instant_encoder",
    "semantic_pass_available",
]

logger = logging.getLogger("asyncrecall.memory")

#: How long no query must have come before the vectors' thread starts its work: loading
#: the encoder takes the interpreter lock from the loop for a second or so, and a
#: message that arrives at a session's start would otherwise wait beside it for its
#: first request (the vectors could not serve that message anyway).
QUIET_S: Final = 0.25
#: The lexical selector's reasons after which the vectors are asked: the wording did not
#: match. After any other (the names gate, no terms, no memories) the pass abstains.
_WORDING: Final = frozenset({"no_match", "below_threshold"})
#: What of a query is embedded (a pasted log does not make the pass slower).
MAX_QUERY_CHARS: Final = 512
#: Vectors (documents plus lines) the pass scores at most; past this, a folder is
#: left to the lexical pass and the main recall (the product grows with the rows).
MAX_ROWS: Final = 50_000
#: Fewer offered memories than this: no spread to read the margin from, so no
#: semantic pick.
MIN_DOCS: Final = 4
#: The best line's cosine the best memory needs (``benchmarks/instant_gate.py``).
MIN_INSTANT_SIMILARITY: Final = 0.25
#: Standard deviations of the combined score by which the best memory must stand out
#: (``benchmarks/instant_gate.py``).
MIN_INSTANT_MARGIN: Final = 2.0
#: The same two thresholds for the multilingual encoder, whose cosines run lower
#: (``benchmarks/instant_gate.py --encoder multilingual``).
MULTILINGUAL_MIN_SIMILARITY: Final = 0.225
MULTILINGUAL_MIN_MARGIN: Final = 1.6


def instant_encoder() -> Encoder:
    """The encoder the pass uses by default: the multilingual one when its package is
    installed, else WordLlama's (each shared by the process)."""
    if multilingual_available():
        return MultilingualEncoder.shared()
    return WordLlamaEncoder.shared()


def semantic_pass_available() -> bool:
    """Whether an encoder for the pass is installed (checked without importing it)."""
    return multilingual_available() or embedding_available()


def _thresholds(encoder: Encoder) -> tuple[float, float]:
    """(best line's cosine, margin) calibrated for ``encoder``; WordLlama's for an
    encoder of the caller's own."""
    if isinstance(encoder, MultilingualEncoder):
        return MULTILINGUAL_MIN_SIMILARITY, MULTILINGUAL_MIN_MARGIN
    return MIN_INSTANT_SIMILARITY, MIN_INSTANT_MARGIN


def _multilingual(encoder: Encoder) -> bool:
    """Whether ``encoder`` reads other languages than English (its ``multilingual``
    attribute; an encoder without one is taken to read English only)."""
    return bool(getattr(encoder, "multilingual", False))


@dataclass(frozen=True, slots=True)
class _Stack:
    """The vectors of one list of documents, stacked for one product per query."""

    docs: tuple[MemoryDoc, ...]
    #: Rows ``0..n-1``: each document's whole vector; then every line's.
    matrix: NDArray[np.float32]
    #: Where each document's lines start in ``matrix`` (for ``maximum.reduceat``).
    starts: NDArray[np.intp]
    #: Each document's position, by identity (``docs`` keeps them alive).
    where: dict[int, int]


class SemanticInstantSelector:
    """The instant pass with the embedded model's vectors (see the module docstring).

    ``lexical``: the BM25 it asks first (the folder's shared one, so its counts are
    read once); ``encoder``: where vectors come from (default: :func:`instant_encoder`,
    the multilingual one when installed); the two thresholds default to those
    calibrated for that encoder. :meth:`beside` builds one on a vector selector's
    lexical selector, and on its encoder and vector cache when it is the encoder the
    pass would use (both then embed each memory once).
    """

    name: Final = "semantic"

    #: Recall may run this selector on the event loop when :meth:`ready`.
    inline = True

    def __init__(
        self,
        lexical: LexicalSelector | None = None,
        *,
        encoder: Encoder | None = None,
        min_top_similarity: float | None = None,
        min_margin: float | None = None,
        _index: _VectorIndex | None = None,
    ) -> None:
        self.lexical = lexical if lexical is not None else LexicalSelector()
        #: What :class:`~asyncrecall.memory.Recaller` would ask if this one failed.
        self.fallback: LexicalSelector = self.lexical
        self.encoder: Encoder = encoder or instant_encoder()
        self._index = _index if _index is not None else _VectorIndex(self.encoder)
        similarity, margin = _thresholds(self.encoder)
        self.min_top_similarity = similarity if min_top_similarity is None else min_top_similarity
        self.min_margin = margin if min_margin is None else min_margin
        #: Whether a query not in English may reach the vectors (the encoder reads it).
        self.multilingual = _multilingual(self.encoder)
        self._stack: _Stack | None = None
        self._warming: threading.Thread | None = None
        self._lock = threading.Lock()
        #: Whether the encoder could not be loaded (then the pass stays lexical, and
        #: stops trying).
        self._unloadable = False
        #: When a query last came (or the selector was made): the vectors' thread waits
        #: for :data:`QUIET_S` after it.
        self._last_query = time.monotonic()

    @classmethod
    def beside(
        cls,
        selector: _VectorSelector,
        *,
        min_top_similarity: float | None = None,
        min_margin: float | None = None,
    ) -> SemanticInstantSelector:
        """An instant pass sharing ``selector``'s lexical selector (an
        :class:`~asyncrecall.memory.EmbeddingSelector` or
        :class:`~asyncrecall.memory.HybridSelector`), and its encoder and vectors when
        :func:`instant_encoder` is that encoder; else the pass embeds with its own."""
        encoder = instant_encoder()
        return cls(
            selector.lexical,
            encoder=encoder,
            min_top_similarity=min_top_similarity,
            min_margin=min_margin,
            _index=selector._index if encoder is selector.encoder else None,
        )

    def __repr__(self) -> str:
        return (
            f"SemanticInstantSelector({self.encoder.name!r}, "
            f"min_top_similarity={self.min_top_similarity}, min_margin={self.min_margin})"
        )

    # -- the instant selector's protocol ------------------------------------------------

    def ready(self, docs: Sequence[MemoryDoc]) -> bool:
        """Whether the lexical pass would do no cold work (the vectors are optional:
        without them the pass is the lexical one)."""
        return self.lexical.ready(docs)

    def vectors_ready(self, docs: Sequence[MemoryDoc]) -> bool:
        """Whether the semantic part can answer for ``docs`` without cold work."""
        return self._placed(docs) is not None

    def count_within(self, docs: Sequence[MemoryDoc], budget_bytes: int) -> bool:
        """The lexical selector's :meth:`LexicalSelector.count_within`."""
        return self.lexical.count_within(docs, budget_bytes)

    def prepare(self, docs: Sequence[MemoryDoc], *, stop: threading.Event | None = None) -> None:
        """Make the lexical selector ready (blocking: off the event loop), and start
        loading the model and embedding ``docs`` in a daemon thread: loading the model
        takes a second or two, and a warm-up that waited for it would hold the lexical
        pass back that long. Until the vectors are stacked the pass answers with the
        lexical selector; :meth:`prepare_vectors` waits for them."""
        self.lexical.prepare(docs, stop=stop)
        if docs and not self.vectors_ready(docs):
            self._warm_later(docs)

    def prepare_vectors(
        self, docs: Sequence[MemoryDoc], *, stop: threading.Event | None = None
    ) -> None:
        """Load the model, embed ``docs`` where their vectors are missing or stale, and
        stack them for the instant pass (blocking: off the event loop)."""
        import numpy as np

        if not docs:
            return
        entries = self._index._vectors(docs, stop)
        check(stop)
        self.encoder.embed(["warm"])  # the first call pays for lazy set-up
        rows = [entry.document for entry in entries]
        starts = []
        offset = len(entries)
        for entry in entries:
            starts.append(offset)
            offset += len(entry.lines)
        matrix = np.vstack([np.stack(rows), *(entry.lines for entry in entries)])
        where = {id(doc): n for n, doc in enumerate(docs)}
        self._stack = _Stack(tuple(docs), matrix, np.asarray(starts, dtype=np.intp), where)

    async def select(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """:meth:`rank`, after :meth:`prepare` in a worker thread when not ready."""
        return (await self.select_explained(query, docs, limit=limit))[0]

    async def select_explained(
        self, query: str, docs: Sequence[MemoryDoc], *, limit: int
    ) -> tuple[list[MemoryDoc], str | None]:
        """:meth:`select`, and when it selects nothing, why (never waiting for the
        vectors: see :meth:`prepare`)."""
        if self.ready(docs):
            return self.rank_explained(query, docs, limit=limit)

        def prepared_rank(stop: threading.Event) -> tuple[list[MemoryDoc], str | None]:
            self.prepare(docs, stop=stop)
            return self.rank_explained(query, docs, limit=limit)

        return await run_off_loop(prepared_rank, name="asyncrecall-semantic")

    def rank(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """At most ``limit`` of ``docs``, best first, computed now."""
        return self.rank_explained(query, docs, limit=limit)[0]

    def rank_explained(
        self, query: str, docs: Sequence[MemoryDoc], *, limit: int
    ) -> tuple[list[MemoryDoc], str | None]:
        """The lexical pass's answer; when it abstains on wording, the vectors' (when
        warm: else the lexical reason, and the vectors are warmed in a thread)."""
        self._last_query = time.monotonic()
        chosen, why = self.lexical.rank_explained(query, docs, limit=limit)
        if chosen or why not in _WORDING or limit <= 0:
            return chosen, why
        if self._gated(query, docs):
            return chosen, why  # a name no memory mentions; or not English
        placed = self._placed(docs)
        if placed is None:
            self._warm_later(docs)
            return chosen, why
        picked, reason = self._by_vectors(query, *placed, limit)
        return [docs[i] for i in picked], reason

    # -- internals ----------------------------------------------------------------------

    def _gated(self, query: str, docs: Sequence[MemoryDoc]) -> bool:
        """The vector selectors' lexical gates: a name no memory mentions, and, unless
        the encoder reads other languages, a query not in English that fails the
        lexical coverage rule. With an encoder that reads German, a German query's
        capitalised nouns are not taken for names."""
        if self.multilingual:
            return self.lexical.names_unknown(query, docs, nouns=False)
        return self.lexical.gate_reason(query, docs) is not None

    def _placed(self, docs: Sequence[MemoryDoc]) -> tuple[_Stack, list[int] | None] | None:
        """The stacked vectors when they hold these very documents, and where each of
        them is (``None``: in the same order, all of them; an unchanged folder hands
        back the same objects, and a conversation's offer leaves out the files it was
        shown). ``None`` when one of them is not stacked."""
        stack = self._stack
        if stack is None:
            return None
        if len(stack.docs) == len(docs) and all(map(operator.is_, stack.docs, docs)):
            return stack, None
        where, stacked = stack.where, stack.docs
        positions = []
        for doc in docs:
            position = where.get(id(doc))
            if position is None or stacked[position] is not doc:
                return None
            positions.append(position)
        return stack, positions

    def _by_vectors(
        self, query: str, stack: _Stack, positions: list[int] | None, limit: int
    ) -> tuple[list[int], str | None]:
        """Positions in the offered documents (``positions`` of them in ``stack``)."""
        count = len(stack.docs) if positions is None else len(positions)
        if count < MIN_DOCS or len(stack.matrix) > MAX_ROWS:
            return [], "below_threshold"
        # Its numpy calls release the interpreter lock: take it back at once each time.
        with quick_return():
            return self._scored(query, stack, positions, limit)

    def _scored(
        self, query: str, stack: _Stack, positions: list[int] | None, limit: int
    ) -> tuple[list[int], str | None]:
        import numpy as np

        vector = embed_query(self.encoder, query[:MAX_QUERY_CHARS])
        scores = stack.matrix @ vector
        whole = scores[: len(stack.docs)]
        best = np.maximum.reduceat(scores, stack.starts)
        if positions is not None:
            whole, best = whole[positions], best[positions]
        combined = whole + best
        top = int(combined.argmax())
        if float(best[top]) < self.min_top_similarity:
            return [], "below_threshold"
        spread = float(combined.std())
        margin = (float(combined[top]) - float(combined.mean())) / spread if spread > 1e-9 else 0.0
        if margin < self.min_margin:
            return [], "below_threshold"
        order = np.argsort(-combined, kind="stable")[:limit]
        # The best memory passed both gates; one after it only with its best line
        # above the floor too.
        return [int(i) for i in order if best[i] >= self.min_top_similarity], None

    def _warm_later(self, docs: Sequence[MemoryDoc]) -> None:
        """Embed and stack ``docs`` in a daemon thread (one at a time, never joined; none
        once the model could not be loaded)."""
        with self._lock:
            if self._unloadable:
                return
            if self._warming is not None and self._warming.is_alive():
                return
            listed = tuple(docs)

            def warm() -> None:
                try:
                    self._until_quiet()
                    self.prepare_vectors(listed)
                except ImportError as error:  # a missing or broken package: said once
                    self._unloadable = True
                    logger.warning(
                        "the instant pass reads words only: its encoder %s could not be "
                        "loaded (%s)",
                        self.encoder.name,
                        error,
                    )
                except Exception:  # the next query tries again; the pass stays lexical
                    logger.debug("embedding the memories for the pass failed", exc_info=True)

            self._warming = threading.Thread(target=warm, name="asyncrecall-vectors", daemon=True)
            self._warming.start()

    def _until_quiet(self) -> None:
        """Return once no query has come for :data:`QUIET_S` (the vectors' thread: the
        request of a message that came at a session's start has left by then)."""
        while (left := self._last_query + QUIET_S - time.monotonic()) > 0:
            time.sleep(left)

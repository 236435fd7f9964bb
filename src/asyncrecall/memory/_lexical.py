"""The lexical selector: BM25 over each memory's title, description, type and body.

Why our own BM25 rather than ``bm25s`` (measured: ``benchmarks/quality.md``, script
``benchmarks/compare_bm25s.py``):

- **Same scoring.** Okapi BM25 with Lucene's IDF, ``k1=1.5``, ``b=0.75``, as ``bm25s``
  scores by default; with the same tokens both give the same hit@5/recall@5 on the
  LoCoMo dev set. The quality comes from the tokens: the Snowball English stemmer and
  a stop-word list that drops question words (hit@5 0.864, recall@5 0.802 through
  recall, against 0.794/0.727 for bm25s' default tokens and the issue's 0.778/0.712).
- **Per-document cache.** ``bm25s`` indexes a whole corpus into sparse matrices: any
  change to the offered set (a new memory, the session's ``excluded_paths``) means a
  re-index. Here each document's term counts are cached on (path, size, mtime), so a
  warm selection tokenises only the query and sums the few query terms' statistics on
  the fly: about 0.2 ms over 200 documents, against a 5 ms budget.
- **Start-up.** ``bm25s`` imports numpy (about 120 ms, paid by every CLI command);
  ``snowballstemmer`` is pure Python without dependencies (about 14 ms, paid on the
  first tokenisation only).
"""

from __future__ import annotations

import heapq
import math
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from asyncrecall.memory._types import MemoryDoc

__all__ = ["LexicalSelector", "tokenize"]

# Words of two or more letters or digits; ``_`` separates, so snake_case splits.
_WORD: Final = re.compile(r"[^\W_]{2,}")

# English stop words (the NLTK list's core): question words carry no topic.
_STOP_TEXT: Final = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves
"""
_STOP_WORDS: Final = frozenset(_STOP_TEXT.split())

_STEM_CACHE_MAX: Final = 200_000


class _Stemmer:
    """The Snowball English stemmer behind a word cache (thread-safe)."""

    def __init__(self) -> None:
        import snowballstemmer  # type: ignore[import-untyped]

        self._stem_word = snowballstemmer.stemmer("english").stemWord
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(self, word: str) -> str:
        stem = self._cache.get(word)
        if stem is None:
            with self._lock:
                if len(self._cache) > _STEM_CACHE_MAX:
                    self._cache.clear()
                stem = str(self._stem_word(word))
                self._cache[word] = stem
        return stem


_stemmer: _Stemmer | None = None


def tokenize(text: str) -> list[str]:
    """Lower-cased, stop words dropped, Snowball-stemmed words of ``text``."""
    global _stemmer
    if _stemmer is None:
        _stemmer = _Stemmer()
    stem = _stemmer
    return [stem(word) for word in _WORD.findall(text.lower()) if word not in _STOP_WORDS]


@dataclass(frozen=True, slots=True)
class _DocStats:
    """A document's term counts, valid while its (size, mtime) do not change."""

    key: tuple[int, float]
    counts: dict[str, int]
    length: int


class LexicalSelector:
    """BM25 (Okapi, Lucene IDF) over title, description, type and body.

    Returns the top ``limit`` documents with a positive score, best first; ties keep
    the offered order (newest first). Cheap to share: the cache is keyed by path.
    """

    name: Final = "lexical"

    #: BM25 over cached token counts costs about a millisecond: recall runs it inline.
    inline = True

    def __init__(self, *, k1: float = 1.5, b: float = 0.75) -> None:
        self._k1 = k1
        self._b = b
        self._stats: dict[Path, _DocStats] = {}

    def __repr__(self) -> str:
        return f"LexicalSelector(k1={self._k1}, b={self._b})"

    async def select(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """The BM25 top ``limit`` (see :meth:`rank`); never awaits anything."""
        return self.rank(query, docs, limit=limit)

    def rank(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """Synchronous selection, for callers that want an instant lexical pass."""
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms or not docs or limit <= 0:
            return []
        stats = [self._doc_stats(doc) for doc in docs]
        self._prune(docs)
        count = len(stats)
        average = sum(s.length for s in stats) / count or 1.0
        k1, b = self._k1, self._b
        norms = [k1 * (1.0 - b + b * s.length / average) for s in stats]
        scores = [0.0] * count
        for term in terms:
            postings = [(i, f) for i, s in enumerate(stats) if (f := s.counts.get(term))]
            if not postings:
                continue
            df = len(postings)
            idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
            for i, f in postings:
                scores[i] += idf * f * (k1 + 1.0) / (f + norms[i])
        best = heapq.nlargest(
            limit, (i for i in range(count) if scores[i] > 0.0), key=lambda i: (scores[i], -i)
        )
        return [docs[i] for i in best]

    def _doc_stats(self, doc: MemoryDoc) -> _DocStats:
        key = (doc.size, doc.mtime)
        cached = self._stats.get(doc.path)
        if cached is not None and cached.key == key:
            return cached
        tokens = tokenize(f"{doc.title}\n{doc.description}\n{doc.type}\n{doc.body}")
        stats = _DocStats(key, dict(Counter(tokens)), len(tokens))
        self._stats[doc.path] = stats
        return stats

    def _prune(self, docs: Sequence[MemoryDoc]) -> None:
        if len(self._stats) > max(4096, 4 * len(docs)):
            live = {doc.path for doc in docs}
            self._stats = {path: s for path, s in self._stats.items() if path in live}

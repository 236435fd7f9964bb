"""The lexical selector: BM25 over each memory's title, description, type and body.

Why our own BM25 rather than ``bm25s`` (measured: ``benchmarks/quality.md``, script
``benchmarks/compare_bm25s.py``):

- **Same scoring.** Okapi BM25 with Lucene's IDF, ``k1=1.5``, ``b=0.75``, as ``bm25s``
  scores by default; with the same tokens both give the same hit@5/recall@5 on the
  LoCoMo dev set. The quality comes from the tokens: the Snowball English stemmer and
  a stop-word list that drops question words (hit@5 0.864, recall@5 0.802 through
  recall, against 0.794/0.727 for bm25s' default tokens and the issue's 0.778/0.712).
  Other languages (``_tokens``): NFKC and case folding, CJK character bigrams, the
  Snowball stemmer of the text's language, accents dropped; recall@5 on our own
  Chinese, Japanese, French, German and Russian set in ``benchmarks/quality.md``.
- **Per-document cache.** ``bm25s`` indexes a whole corpus into sparse matrices: any
  change to the offered set (a new memory, the session's ``excluded_paths``) means a
  re-index. Here each document's term counts are cached on its path and fingerprint
  (size, mtime, revision: ``MemoryDoc.fingerprint``), in
  memory and on disk per folder, so a warm selection tokenises only the query and
  sums the few query terms' statistics on the fly: about 0.2 ms over 200 documents.
  Cold (new files, or a new process before the first selection), tokenising costs
  about 0.5 ms per ordinary 1.5 KiB note: that work runs in a worker thread, never
  on the event loop.
- **Start-up.** ``bm25s`` imports numpy (about 120 ms, paid by every CLI command).
  The stemmers are PyStemmer's (``Stemmer``: the same Snowball algorithms in C, the
  same stems as ``snowballstemmer`` on every word of the LoCoMo dev file; about 2 ms
  to import and 50 times faster per word); without it, ``snowballstemmer``'s pure
  Python, which imports all its 30-odd languages (about 14 ms idle, 30 ms loaded).
- **The persisted counts** of a folder are one ``marshal`` file: a new process loads
  200 files' counts in about 0.3 ms (the JSON lines of the first version took 15 ms
  on the loaded machine). ``marshal`` is not meant for untrusted data: the file lives
  in the folder's hidden ``.cache/``, is written only by us, atomically, and starts
  with a header naming this format and the Python version; anything else is ignored
  and rebuilt.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import marshal
import math
import operator
import os
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final

from asyncrecall.memory._threads import check, run_off_loop
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.selectors._fields import FieldIndex
from asyncrecall.memory.selectors._tokens import (
    QueryTerms,
    analyse,
    analyse_query,
    named_terms,
    stemmers_loaded,
    tokenize,
)

__all__ = [
    "MIN_COVERAGE",
    "NAMES_COVERAGE",
    "LexicalSelector",
    "first_fields",
    "named_terms",
    "tokenize",
]

logger = logging.getLogger("asyncrecall.memory")

#: Where a folder's term counts persist (a hidden folder: the scan never reads it).
_CACHE_DIR: Final = ".cache"
#: The cache file; its name carries the tokeniser's version (stemmers, stop words, what a
#: word is; 4: any language, each row with its document's language; 5: Spanish, Italian,
#: Dutch and Portuguese told apart from French; 6: Polish and Turkish too).
_CACHE_NAME: Final = "lexical-v6.marshal"
#: The files of earlier tokenisers, removed when the current one is written.
_OLD_CACHE_NAMES: Final = (
    "lexical-v1.jsonl",
    "lexical-v2.marshal",
    "lexical-v3.marshal",
    "lexical-v4.marshal",
    "lexical-v5.marshal",
)
#: What the file starts with: this format, and the Python that wrote it (``marshal``'s
#: format may change between versions).
_CACHE_HEADER: Final = ("asyncrecall-lexical", 6, marshal.version, sys.version_info[:2])
#: Abstain unless at least this share of a query's terms occurs in some memory (one
#: third: "Put the new checkout behind a flag" knows 2 of 5). Chosen on LoCoMo dev
#: (``bench quality --negatives``) with the names gate: false injection 0.913 ->
#: 0.093 for a recall@5 cost of 0.002 (0.5: 0.087 for 0.007).
MIN_COVERAGE: Final = 0.34
#: The names gate holds only when under this share of the query's terms is known.
#: Chosen on LoCoMo dev with folds (``bench quality --folds``-style, each fold choosing
#: among 0.75, 0.85, 0.9 and 1.01 by recall@5 minus false injection; 0.9 in every one of
#: 3 and of 7 folds): held out, false injection 0.095 -> 0.023 for recall@5 0.803 ->
#: 0.800. At 0.75 "What workshop did Caroline attend recently?" passed in a folder that
#: never mentions Caroline (3 of 4 terms known). A query of ten terms, nine known,
#: stays answerable; a memory named for the rest is found by the field signal.
NAMES_COVERAGE: Final = 0.9


@dataclass(frozen=True, slots=True)
class _DocStats:
    """A document's term counts, valid while its fingerprint does not change."""

    key: tuple[int, float, int]
    counts: dict[str, int]
    length: int
    #: Its Latin-script language (``tokens.LANGUAGES``): how its words were stemmed.
    language: str


@dataclass(slots=True)
class _Snapshot:
    """The counts of one list of documents (the folder's last scan, as offered), their
    BM25 length norms and, once built, each term's postings ``[(position, count)]``."""

    docs: tuple[MemoryDoc, ...]
    stats: list[_DocStats]
    norms: list[float]
    postings: dict[str, list[tuple[int, int]]] | None
    #: The documents' languages, most common first: how a query is read against them.
    languages: tuple[str, ...]


def _languages(stats: Sequence[_DocStats]) -> tuple[str, ...]:
    if all(s.language == "en" for s in stats):  # the common case, without a Counter
        return ("en",)
    return tuple(code for code, _ in Counter(s.language for s in stats).most_common())


def _postings(stats: Sequence[_DocStats]) -> dict[str, list[tuple[int, int]]]:
    index: dict[str, list[tuple[int, int]]] = {}
    for position, doc_stats in enumerate(stats):
        for term, count in doc_stats.counts.items():
            found = index.get(term)
            if found is None:
                index[term] = [(position, count)]
            else:
                found.append((position, count))
    return index


def _count(doc: MemoryDoc) -> _DocStats:
    tokens, language = analyse(f"{doc.title}\n{doc.description}\n{doc.type}\n{doc.body}")
    return _DocStats(doc.fingerprint, dict(Counter(tokens)), len(tokens), language)


#: Folder paths by their text: one ``Path`` per folder, not one per document (building a
#: ``Path`` parses it: 200 of them were a third of a new process's warm-up).
_FOLDERS: dict[str, Path] = {}


def _folder(doc: MemoryDoc) -> Path | None:
    """The memory folder ``doc`` belongs to (its path minus its relative path); none
    for a database row (a revision)."""
    rel = doc.rel_path
    if not rel or doc.revision:
        return None
    text = str(doc.path)
    tail = os.sep + rel.replace("/", os.sep)
    if text.endswith(tail) and len(text) > len(tail):
        head = text[: -len(tail)]
        folder = _FOLDERS.get(head)
        if folder is None:
            if len(_FOLDERS) > 64:
                _FOLDERS.clear()
            folder = _FOLDERS[head] = Path(head)
        return folder
    depth = len(PurePosixPath(rel).parts)  # an unusual spelling: the slow, exact way
    if depth == 0 or len(doc.path.parts) <= depth:
        return None
    return doc.path.parents[depth - 1]


def first_fields(named: Sequence[int], ranked: Sequence[int], limit: int) -> list[int]:
    """The ``ranked`` documents, ``limit`` at most, with the best one the field signal
    matched (``named``) among them: it takes the last place when the ranking left it
    out. Only one: on LoCoMo, putting every field match first cost 0.05 of hit@5 (the
    descriptions there are long and name the speaker)."""
    chosen = list(ranked[:limit])
    if named and limit > 0 and named[0] not in chosen:
        chosen = [*chosen[: limit - 1], named[0]]
    return chosen


def _covered(terms: QueryTerms, known: Sequence[bool]) -> int:
    """How many of the query's coverage units some document holds."""
    return sum(1 for groups, need in terms.units if sum(known[g] for g in groups) >= need)


def _names_unknown(
    terms: QueryTerms, known: Sequence[bool], covered: int, share: float = NAMES_COVERAGE
) -> bool:
    if not terms.named or any(known[g] for named in terms.named for g in named):
        return False
    return covered < share * len(terms.units)


class LexicalSelector:
    """BM25 (Okapi, Lucene IDF) over title, description, type and body.

    Returns the top ``limit`` documents with a positive score, best first; ties keep
    the offered order (newest first). Cheap to share: the cache is keyed by path.

    Term counts are cached in memory on (path, fingerprint) and, per memory folder, in
    ``<folder>/.cache/lexical-v6.marshal`` (written atomically; a hidden folder the scan
    never reads), so a new process does not tokenise the folder again.
    :meth:`ready` says whether a selection would tokenise nothing; recall runs the
    selector inline only then, and otherwise prepares it in a worker thread
    (:meth:`prepare`): the event loop never pays for tokenising.
    """

    name: Final = "lexical"

    #: Warm (see :meth:`ready`), a selection over 200 files costs about 0.2 ms: recall
    #: may run it inline.
    inline = True

    def __init__(
        self,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        persist: bool = True,
        abstain: bool = True,
        min_coverage: float = MIN_COVERAGE,
        postings: bool = True,
        names_coverage: float = NAMES_COVERAGE,
    ) -> None:
        self._k1 = k1
        self._b = b
        self._persist = persist
        #: Select nothing when nothing is relevant (see :meth:`abstains`).
        self.abstain = abstain
        self.min_coverage = min_coverage
        #: The names gate holds under this share of the query's terms known.
        self.names_coverage = names_coverage
        self._stats: dict[Path, _DocStats] = {}
        self._preparing = threading.Lock()
        self._loaded: set[Path | None] = set()  # folders whose persisted counts were read
        self._last: _Snapshot | None = None
        #: :meth:`prepare` also builds each term's postings for the documents it got (a
        #: few ms per 200 files, off the loop), so a query reads only its own terms'
        #: postings. A process that ranks once (``asyncrecall run``) does without.
        self.postings = postings
        #: The field signal (:mod:`._fields`): memories whose name or description
        #: answers the query come first, and abstention never hides them. Shared with
        #: the vector selectors built on this one.
        self.fields = FieldIndex()

    def __repr__(self) -> str:
        return f"LexicalSelector(k1={self._k1}, b={self._b}, abstain={self.abstain})"

    async def select(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """The BM25 top ``limit`` (see :meth:`rank`): computed now when :meth:`ready`,
        else in a worker thread that stops once the awaiting task is cancelled."""
        return (await self.select_explained(query, docs, limit=limit))[0]

    async def select_explained(
        self, query: str, docs: Sequence[MemoryDoc], *, limit: int
    ) -> tuple[list[MemoryDoc], str | None]:
        """:meth:`select`, and when it selects nothing, why (:meth:`rank_explained`)."""
        if self.ready(docs):
            return self.rank_explained(query, docs, limit=limit)

        def prepared_rank(stop: threading.Event) -> tuple[list[MemoryDoc], str | None]:
            self.prepare(docs, stop=stop)
            return self.rank_explained(query, docs, limit=limit)

        return await run_off_loop(prepared_rank, name="asyncrecall-lexical")

    def ready(self, docs: Sequence[MemoryDoc]) -> bool:
        """Whether ranking ``docs`` would tokenise nothing but the query (no file I/O,
        no import, no document tokenised): then it costs well under a millisecond."""
        return (
            stemmers_loaded() and self._cached_stats(docs) is not None and self.fields.ready(docs)
        )

    def _cached_stats(self, docs: Sequence[MemoryDoc]) -> list[_DocStats] | None:
        """Each document's counts when all are cached, else ``None`` (nothing is
        tokenised). The last answer is kept with the documents it was for: an unchanged
        folder hands back the same document objects, and then checking them is one
        identity comparison each (the instant pass asks twice per query: ``ready`` and
        ``rank``; about 0.1 ms each over 200 files otherwise)."""
        snapshot = self._snapshot(docs)
        return snapshot.stats if snapshot is not None else None

    def _snapshot(self, docs: Sequence[MemoryDoc], *, index: bool = False) -> _Snapshot | None:
        """The counts of ``docs`` as one :class:`_Snapshot` (the last one when ``docs``
        are its very objects), or ``None`` when any is missing; ``index``: with the
        term postings built (the warm-up thread asks, so that queries need not)."""
        last = self._last
        if (
            last is not None
            and len(last.docs) == len(docs)
            and all(map(operator.is_, last.docs, docs))
        ):
            if index and last.postings is None:
                last.postings = _postings(last.stats)
            return last
        stats = self._stats
        found: list[_DocStats] = []
        for doc in docs:
            cached = stats.get(doc.path)
            if cached is None or cached.key != doc.fingerprint:
                return None
            found.append(cached)
        average = sum(s.length for s in found) / len(found) if found else 0.0
        k1, b = self._k1, self._b
        norms = [k1 * (1.0 - b + b * s.length / (average or 1.0)) for s in found]
        postings = _postings(found) if index else None
        snapshot = _Snapshot(tuple(docs), found, norms, postings, _languages(found))
        self._last = snapshot
        return snapshot

    def count_within(self, docs: Sequence[MemoryDoc], budget_bytes: int) -> bool:
        """Tokenise, here and now, the documents :meth:`ready` lacks when their sizes add
        up to ``budget_bytes`` at most and the stemmer is loaded; returns whether the
        selector is now ready. Nothing is read or written (the persisted counts catch
        up at the next :meth:`prepare`)."""
        if not stemmers_loaded():
            return False
        missing = [doc for doc in docs if not self._fresh(doc)]
        if sum(doc.size for doc in missing) > budget_bytes:
            return False
        if self._persist and any(_folder(doc) not in self._loaded for doc in missing):
            return False  # the folder's persisted counts were never read: prepare() does
        for doc in missing:
            self._stats[doc.path] = _count(doc)
        self.fields.prepare(docs)
        return True

    def prepare(self, docs: Sequence[MemoryDoc], *, stop: threading.Event | None = None) -> None:
        """Make :meth:`ready` true for ``docs``: load the stemmer, read each folder's
        persisted counts, tokenise what is missing or stale and persist it.

        Blocking (file I/O, CPU): call it off the event loop. ``stop`` is checked
        every few documents (:class:`~asyncrecall.memory._threads.Stopped`).
        """
        tokenize("")  # loads the stemmers
        if not all(self._fresh(doc) for doc in docs):
            with self._preparing:  # one thread prepares; the next finds the work done
                self._prepare(docs, stop)
        # The postings of these very documents, built here (off the loop): the queries
        # over an unchanged folder then read each term's postings, not every document.
        if self.postings:
            self._snapshot(docs, index=True)
        self.fields.prepare(docs)

    def _prepare(self, docs: Sequence[MemoryDoc], stop: threading.Event | None) -> None:
        folders: dict[Path | None, list[MemoryDoc]] = {}
        for doc in docs:
            folders.setdefault(_folder(doc), []).append(doc)
        for folder, group in folders.items():
            persisted = self._load(folder, stop)
            self._loaded.add(folder)
            changed = False
            for doc in group:
                check(stop)  # one document tokenised between checks (a 29 KiB note: ~10 ms)
                if self._fresh(doc):
                    continue
                stats = persisted.get(doc.rel_path)
                if stats is None or stats.key != doc.fingerprint:
                    stats, changed = _count(doc), True
                self._stats[doc.path] = stats
            if changed:
                self._save(folder, group, persisted)

    def rank(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """Synchronous selection, for callers that want an instant lexical pass.

        Empty when the selector abstains (:meth:`abstains`, unless ``abstain=False``)
        and no memory's name or description answers the query (:mod:`._fields`).
        """
        return self.rank_explained(query, docs, limit=limit)[0]

    def rank_explained(
        self, query: str, docs: Sequence[MemoryDoc], *, limit: int
    ) -> tuple[list[MemoryDoc], str | None]:
        """:meth:`rank`, and when it selects nothing, why (``no_terms``, ``no_match``,
        ``names_unknown``, ``below_threshold``)."""
        if not docs or limit <= 0:
            return [], "no_candidates" if not docs else None
        scores, terms, known = self._scores(query, docs)
        named = self.fields.matches(query, docs)
        reason = self._reason(terms, known) if self.abstain else None
        if reason is not None:
            if not named:
                return [], reason
            named.sort(key=lambda i: -scores[i])  # stable: field coverage first
            return [docs[i] for i in named[:limit]], None
        best = heapq.nlargest(
            limit, (i for i in range(len(docs)) if scores[i] > 0.0), key=lambda i: (scores[i], -i)
        )
        chosen = first_fields(named, best, limit)
        return [docs[i] for i in chosen], None if chosen else "no_match"

    def scores(self, query: str, docs: Sequence[MemoryDoc]) -> list[float]:
        """The BM25 score of each document (0.0 where no query term occurs)."""
        return self._scores(query, docs)[0]

    def _scores(
        self, query: str, docs: Sequence[MemoryDoc]
    ) -> tuple[list[float], QueryTerms, list[bool]]:
        """Each document's BM25 score, the query's terms as read against ``docs``, and
        whether each of its term groups occurs in any of them.

        A group's first alternative that some document holds is the one scored (a word
        stemmed in the query's language, else in another language of the documents).
        """
        k1 = self._k1
        snapshot = self._snapshot(docs)
        if snapshot is None:  # something to tokenise: counted here, nothing kept
            stats = [self._doc_stats(doc) for doc in docs]
            self._prune(docs)
            average = sum(s.length for s in stats) / len(docs) if docs else 0.0
            norms = [k1 * (1.0 - self._b + self._b * s.length / (average or 1.0)) for s in stats]
            snapshot = _Snapshot((), stats, norms, None, _languages(stats))
        terms = analyse_query(query, snapshot.languages)
        stats, norms, index = snapshot.stats, snapshot.norms, snapshot.postings
        count = len(stats)
        scores = [0.0] * count
        known = [False] * len(terms.groups)
        if not count:
            return scores, terms, known
        counts = [s.counts for s in stats] if index is None else []
        scored: set[str] = set()
        for number, alternatives in enumerate(terms.groups):
            for term in alternatives:
                if index is not None:
                    postings: Sequence[tuple[int, int]] = index.get(term, ())
                else:
                    postings = [(i, f) for i, c in enumerate(counts) if (f := c.get(term))]
                if postings:
                    break
            if not postings:
                continue
            known[number] = True
            if term in scored:  # two words read as one term: counted once, as before
                continue
            scored.add(term)
            found = len(postings)
            idf = math.log(1.0 + (count - found + 0.5) / (found + 0.5))
            for i, f in postings:
                scores[i] += idf * f * (k1 + 1.0) / (f + norms[i])
        return scores, terms, known

    def abstains(self, query: str, docs: Sequence[MemoryDoc]) -> bool:
        """Whether nothing in ``docs`` is about ``query``: it names something none of
        them mentions (:meth:`names_unknown`), or fewer than ``min_coverage`` of its
        terms occur in any of them (:data:`MIN_COVERAGE`, chosen on LoCoMo dev; a CJK
        character counts as a term, known when a bigram holding it occurs)."""
        _, terms, known = self._scores(query, docs)
        return self._abstains(terms, known)

    def _abstains(self, terms: QueryTerms, known: Sequence[bool]) -> bool:
        return self._reason(terms, known) is not None

    def _reason(self, terms: QueryTerms, known: Sequence[bool]) -> str | None:
        """Why the coverage gates abstain (``None``: they do not)."""
        if not terms.units:
            return "no_terms"
        covered = _covered(terms, known)
        if covered == 0:
            return "no_match"
        if _names_unknown(terms, known, covered, self.names_coverage):
            return "names_unknown"
        if covered < self.min_coverage * len(terms.units):
            return "below_threshold"
        return None

    def gate_reason(self, query: str, docs: Sequence[MemoryDoc]) -> str | None:
        """Why :meth:`vector_gates` holds (``None``: it does not)."""
        _, terms, known = self._scores(query, docs)
        if not terms.units:
            return None if terms.english else "no_terms"
        if _names_unknown(terms, known, _covered(terms, known), self.names_coverage):
            return "names_unknown"
        return None if terms.english else self._reason(terms, known)

    def names_unknown(self, query: str, docs: Sequence[MemoryDoc], *, nouns: bool = True) -> bool:
        """Whether ``query`` names something (a capitalised word after its first, not a
        month or weekday), ``docs`` mention none of what it names, and under
        :data:`NAMES_COVERAGE` of its terms occur in them.

        On the LoCoMo dev file, a question asked against another conversation's memory
        names people none of its files mention in 98 % of cases; a question asked
        against its own memory does so in 0.5 %. The coverage condition keeps queries
        like "Format amounts for German customers" (3 of 4 terms known) answerable.
        Lower-case queries name nothing: this gate then stays open; so do those in
        scripts without capitals. A German query's nouns, all capitalised, count as
        names (on our German set this held the hybrid's false injection at 0.05) unless
        ``nouns`` is false: then a German query names nothing (for a pass whose vectors
        read German, a question in other nouns than its note's is the case it serves).
        """
        _, terms, known = self._scores(query, docs)
        if not nouns and terms.nouns_capitalised:
            return False
        return bool(terms.units) and _names_unknown(
            terms, known, _covered(terms, known), self.names_coverage
        )

    def vector_gates(self, query: str, docs: Sequence[MemoryDoc]) -> bool:
        """The lexical gates of the vector selectors (embedding, hybrid): whether
        :meth:`names_unknown` holds or, for a query not in English, :meth:`abstains`.

        Their own closeness gate was chosen on English text with an English model
        (WordLlama): on our Chinese, Japanese and Russian sets the hybrid selected
        something for 92.5-97.5 % of the questions asked against a folder that does not
        answer them (``bench quality --dataset multilingual --negatives``).
        """
        _, terms, known = self._scores(query, docs)
        if not terms.units:
            return not terms.english
        if _names_unknown(terms, known, _covered(terms, known), self.names_coverage):
            return True
        return not terms.english and self._abstains(terms, known)

    def _fresh(self, doc: MemoryDoc) -> bool:
        cached = self._stats.get(doc.path)
        return cached is not None and cached.key == doc.fingerprint

    def _doc_stats(self, doc: MemoryDoc) -> _DocStats:
        cached = self._stats.get(doc.path)
        if cached is not None and cached.key == doc.fingerprint:
            return cached
        stats = _count(doc)
        self._stats[doc.path] = stats
        return stats

    def _prune(self, docs: Sequence[MemoryDoc]) -> None:
        if len(self._stats) > max(4096, 4 * len(docs)):
            live = {doc.path for doc in docs}
            kept = list(self._stats.items())  # a snapshot: other sessions' threads add
            self._stats = {path: s for path, s in kept if path in live}

    # -- the persisted counts of a folder ------------------------------------------------

    def _load(
        self, folder: Path | None, stop: threading.Event | None = None
    ) -> dict[str, _DocStats]:
        """The folder's persisted counts by relative path; {} when absent or unusable.

        One ``marshal`` read (200 files: about 0.3 ms), checked against
        :data:`_CACHE_HEADER` and then row by row as it is used.
        """
        del stop  # one read: nothing long enough to stop in the middle of
        if folder is None or not self._persist:
            return {}
        loaded: dict[str, _DocStats] = {}
        try:
            with open(folder / _CACHE_DIR / _CACHE_NAME, "rb") as handle:
                data = marshal.loads(handle.read())
            if not isinstance(data, tuple) or len(data) != 2 or data[0] != _CACHE_HEADER:
                return {}
            for rel, size, mtime, length, counts, language in data[1]:
                if not isinstance(counts, dict) or not isinstance(language, str):
                    return {}
                key = (int(size), float(mtime), 0)
                loaded[str(rel)] = _DocStats(key, counts, int(length), language)
        except (OSError, ValueError, TypeError, EOFError, KeyError):
            return {}  # missing, from another Python, or edited: rebuilt
        return loaded

    def _save(
        self, folder: Path | None, group: Sequence[MemoryDoc], persisted: dict[str, _DocStats]
    ) -> None:
        """Write the folder's counts atomically; a folder we cannot write is left alone."""
        if folder is None or not self._persist:
            return
        entries = dict(persisted) if len(persisted) <= 4 * max(len(group), 200) else {}
        for doc in group:
            stats = self._stats.get(doc.path)
            if stats is not None:
                entries[doc.rel_path] = stats
        directory = folder / _CACHE_DIR
        try:
            directory.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{_CACHE_NAME}.", suffix=".tmp")
        except OSError:
            logger.debug("cannot write the lexical cache of %s", folder, exc_info=True)
            return
        rows = [
            [rel, s.key[0], s.key[1], s.length, s.counts, s.language] for rel, s in entries.items()
        ]
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(marshal.dumps((_CACHE_HEADER, rows)))
            os.replace(tmp, directory / _CACHE_NAME)
        except OSError:
            logger.debug("cannot write the lexical cache of %s", folder, exc_info=True)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return
        for old in _OLD_CACHE_NAMES:
            with contextlib.suppress(OSError):
                os.unlink(directory / old)

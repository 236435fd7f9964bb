"""The field signal: a memory whose own name or description answers the query.

A memory titled "Indent style for Go" answers "how do I indent Go code?" whatever its
body says; the selectors' abstention (coverage, closeness, names) was tuned on bodies
and may still say nothing is relevant. This signal reads only the name and the
description, as the user wrote them (stemmed: "indentation" finds "indent", "files"
finds "file"; each Latin-script word in English, French and German, a name being too
short to tell its language by, and in a later language (Spanish ... Turkish) when its
words tell it is written in that one: ``_tokens.field_terms``), and every selector that
ships heeds it:

- the lexical, embedding and hybrid selectors never abstain while one matches (they
  then select what it matches), and otherwise keep its best match among those they
  select (in the last place, when their ranking left it out);
- the model selector is offered them first (its manifest is bounded), so a folder
  larger than the manifest cannot hide them.

A memory matches when its name and description hold at least :data:`FIELD_COVERAGE`
of the query's terms (at least one), every thing the query names (a capitalised word
after the first) among them: a question about someone no name or description
mentions matches nothing, which keeps a conversation's questions off another
conversation's notes.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.selectors._tokens import field_query, field_terms

__all__ = ["FIELD_COVERAGE", "FieldIndex"]

#: The share of a query's terms a memory's name and description must hold to answer it
#: ("how do I indent Go code?": 2 of indent, go, code).
FIELD_COVERAGE: Final = 0.5


@dataclass(slots=True)
class _Snapshot:
    docs: tuple[MemoryDoc, ...]
    #: Each field term's documents (positions in ``docs``).
    postings: dict[str, list[int]]


class FieldIndex:
    """The field terms of each memory, cached on its path and fingerprint; thread-safe.

    :meth:`matches` tokenises nothing but the query once :meth:`ready`; otherwise it
    tokenises the missing names and descriptions (a few microseconds each).
    """

    def __init__(self, *, coverage: float = FIELD_COVERAGE) -> None:
        self.coverage = coverage
        self._terms: dict[Path, tuple[tuple[int, float, int], frozenset[str]]] = {}
        self._last: _Snapshot | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FieldIndex(coverage={self.coverage})"

    def ready(self, docs: Sequence[MemoryDoc]) -> bool:
        """Whether every document's field terms are cached."""
        last = self._last
        if (
            last is not None
            and len(last.docs) == len(docs)
            and all(map(operator.is_, last.docs, docs))
        ):
            return True
        terms = self._terms
        for doc in docs:
            cached = terms.get(doc.path)
            if cached is None or cached[0] != doc.fingerprint:
                return False
        return True

    def prepare(self, docs: Sequence[MemoryDoc]) -> None:
        """Tokenise the names and descriptions not cached yet, and index ``docs``."""
        self._snapshot(docs)

    def terms(self, doc: MemoryDoc) -> frozenset[str]:
        """The field terms of ``doc`` (its name and description)."""
        cached = self._terms.get(doc.path)
        if cached is not None and cached[0] == doc.fingerprint:
            return cached[1]
        found = field_terms(f"{doc.name}\n{doc.description}")
        if len(self._terms) > 8192:
            self._terms.clear()
        self._terms[doc.path] = (doc.fingerprint, found)
        return found

    def _snapshot(self, docs: Sequence[MemoryDoc]) -> _Snapshot:
        last = self._last
        if (
            last is not None
            and len(last.docs) == len(docs)
            and all(map(operator.is_, last.docs, docs))
        ):
            return last
        with self._lock:
            postings: dict[str, list[int]] = {}
            for position, doc in enumerate(docs):
                for term in self.terms(doc):
                    found = postings.get(term)
                    if found is None:
                        postings[term] = [position]
                    else:
                        found.append(position)
            snapshot = _Snapshot(tuple(docs), postings)
            self._last = snapshot
        return snapshot

    def matches(self, query: str, docs: Sequence[MemoryDoc]) -> list[int]:
        """The positions in ``docs`` of the memories whose name and description answer
        ``query`` (see the module's docstring), most of the query's terms first; ties
        keep the offered order."""
        if not docs or not query.strip():
            return []
        postings = self._snapshot(docs).postings
        terms = field_query(query)
        if not terms.units:
            return []
        holders: list[set[int]] = []
        for alternatives in terms.groups:
            held: set[int] = set()
            for term in alternatives:
                held.update(postings.get(term, ()))
            holders.append(held)
        counts: dict[int, int] = {}
        for groups, need in terms.units:
            if need == 1 and len(groups) == 1:
                positions: set[int] = holders[groups[0]]
            else:
                tally: dict[int, int] = {}
                for g in groups:
                    for position in holders[g]:
                        tally[position] = tally.get(position, 0) + 1
                positions = {p for p, n in tally.items() if n >= need}
            for position in positions:
                counts[position] = counts.get(position, 0) + 1
        if not counts:
            return []
        needed = max(1.0, self.coverage * len(terms.units))
        named = [set.intersection(*(holders[g] for g in groups)) for groups in terms.named]
        chosen = [p for p, n in counts.items() if n >= needed and all(p in held for held in named)]
        chosen.sort(key=lambda p: (-counts[p], p))
        return chosen

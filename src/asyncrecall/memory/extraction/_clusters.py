"""What one consolidation side query is shown: a bounded cluster of related memories.

A consolidation used to show the side model every memory of the store in one prompt:
at 100,000 memories of a database namespace, a 41 MB prompt. Now a
run plans over at most :data:`MAX_CLUSTERS` clusters, each at most
:data:`CLUSTER_MEMORIES` memories and :data:`CLUSTER_CHARS` characters of prompt:

- a store that fits one cluster is one cluster, every memory newest first (what the
  prompt held before);
- otherwise each cluster grows from a seed, the newest memory not yet in a cluster (a
  new memory is the likely duplicate or correction of an older one), with what recall
  offers for the seed's name and description (``store.candidates``: on a database,
  the full-text matches first), each memory in one cluster at most.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final

from asyncrecall.memory._store import Store
from asyncrecall.memory._types import MemoryDoc

__all__ = ["CLUSTER_CHARS", "CLUSTER_MEMORIES", "MAX_CLUSTERS", "clusters", "shown_chars"]

#: Memories in one cluster at most (the index's own limit: a folder within it is one).
CLUSTER_MEMORIES: Final = 200
#: Characters of one cluster's prompt at most (each memory counted as shown).
CLUSTER_CHARS: Final = 120_000
#: Clusters (side queries) of one consolidation run at most.
MAX_CLUSTERS: Final = 4
#: Body characters a memory is shown with (a longer one is cut and left alone).
BODY_CHARS: Final = 1_500


def shown_chars(doc: MemoryDoc) -> int:
    """About the characters ``doc`` takes in a consolidation prompt."""
    return (
        len(doc.rel_path)
        + len(doc.name)
        + len(doc.description)
        + 24
        + min(len(doc.body), BODY_CHARS + 48)
    )


def _fill(group: list[MemoryDoc], more: Sequence[MemoryDoc], taken: set[str]) -> None:
    used = sum(shown_chars(doc) for doc in group)
    for doc in more:
        if len(group) >= CLUSTER_MEMORIES:
            return
        if doc.rel_path in taken:
            continue
        cost = shown_chars(doc)
        if used + cost > CLUSTER_CHARS and group:
            continue
        group.append(doc)
        taken.add(doc.rel_path)
        used += cost


async def clusters(store: Store) -> list[list[MemoryDoc]]:
    """The clusters one run plans over (see the module); none of fewer than two."""
    newest = await asyncio.to_thread(store.scan, limit=CLUSTER_MEMORIES + 1)
    whole: list[MemoryDoc] = []
    _fill(whole, newest, set())
    if len(whole) == len(newest) <= CLUSTER_MEMORIES:
        return [whole] if len(whole) >= 2 else []
    found: list[list[MemoryDoc]] = []
    taken: set[str] = set()
    for seed in newest:
        if len(found) == MAX_CLUSTERS:
            break
        if seed.rel_path in taken:
            continue
        group: list[MemoryDoc] = []
        _fill(group, [seed], taken)
        related = await store.candidates(f"{seed.name} {seed.description}", exclude=taken)
        _fill(group, related, taken)
        if len(group) >= 2:
            found.append(group)
    return found

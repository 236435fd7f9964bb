"""The selectors' per-process caches (term counts, vectors) never rank stale text.

Each selector caches what it computed for a memory under the memory's identity: for a
file, its path, size and modification time; for a database row, also its revision (the
row version). A memory rewritten by another process keeps its path and may keep its
size and modification time (an import keeps the original's); its revision changes, so
the next recall here counts (or embeds) the new text.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from asyncrecall.memory import LexicalSelector, PostgresStore, Recaller
from asyncrecall.memory._selector import Selector
from asyncrecall.memory.postgres._store import StoreChange

AT = 1_700_000_000.0  # a whole second: an import's kept modification time
OLD = "The cat sleeps on the red sofa all afternoon."
NEW = "A dog barks at the old gate every night, now."


def _selectors() -> list[Any]:
    from asyncrecall.memory.selectors._embedding import EmbeddingSelector, embedding_available

    found: list[Any] = [pytest.param(lambda: LexicalSelector(persist=False), id="lexical")]
    mark = pytest.mark.skipif(not embedding_available(), reason="wordllama is not installed")
    found.append(pytest.param(lambda: EmbeddingSelector(), id="embedding", marks=mark))
    return found


@pytest.mark.parametrize("make_selector", _selectors())
async def test_a_rewrite_by_another_process_is_ranked_as_rewritten(
    open_pg: Any, namespace: str, make_selector: Any
) -> None:
    """Process A ranked a memory; process B rewrites it (same name, size and kept
    modification time, new text); A's next recall ranks the new text, not A's cached
    counts or vectors of the old one."""
    assert len(OLD) == len(NEW)
    a: PostgresStore = open_pg(namespace)
    b: PostgresStore = open_pg(namespace)  # its own pools and LISTEN: another worker
    b.save_memory("Pet", "an animal", "user", OLD, updated_at=AT, origin="user")
    selector: Selector = make_selector()
    manager = Recaller(a, selector)
    before = await manager.recall("cat sleeping on the sofa")
    assert before.paths == ("pet.md",)
    assert before.selected[0].body == OLD

    seen = threading.Event()

    def on_change(change: StoreChange) -> None:
        if change.memory_id == a.memory_id("Pet"):
            seen.set()

    a.add_change_listener(on_change)
    rewritten = b.save_memory("Pet", "an animal", "user", NEW, updated_at=AT, origin="user")
    assert seen.wait(10)  # A's store has dropped its own caches
    fetched = a.get("Pet")
    assert (fetched.size, fetched.mtime, fetched.body) == (rewritten.size, AT, NEW)
    assert (fetched.size, fetched.mtime) == (before.selected[0].size, before.selected[0].mtime)

    after = await manager.recall("dog barking at the gate")
    assert after.paths == ("pet.md",)
    assert after.selected[0].body == NEW
    assert (await manager.recall("cat sleeping on the sofa")).paths == ()


async def test_database_rows_have_no_term_count_file(
    pg_store: PostgresStore, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder's term counts persist in ``<folder>/.cache``; a database row's path is
    not a folder's (``postgresql:<namespace key>/...``), so nothing is read or written
    for it, even where a folder of that name happens to exist."""
    doc = pg_store.save_memory("Pet", "an animal", "user", OLD, origin="user")
    monkeypatch.chdir(tmp_path)
    (tmp_path / doc.path.parent).mkdir()
    result = await Recaller(pg_store, LexicalSelector()).recall("cat on the sofa")
    assert result.paths == ("pet.md",)
    assert list((tmp_path / doc.path.parent).iterdir()) == []


def test_pruning_the_term_counts_survives_another_thread_adding_some() -> None:
    """Concurrent sessions share one lexical selector, each preparing in its own thread:
    a selection that prunes the term-count cache while another thread adds counts must
    not fail ("dictionary changed size during iteration" made 1 to 3 recalls in 2,000
    fail in ``bench store --sessions 4`` at 100,000 memories). The other thread is
    simulated: hashing a path during the prune adds an entry."""
    from pathlib import PosixPath

    from asyncrecall.memory._types import MemoryDoc

    selector = LexicalSelector(persist=False)
    added = iter(range(10**6))

    class Meddling(PosixPath):
        def __hash__(self) -> int:
            if armed:
                stats = next(iter(selector._stats.values()))
                selector._stats[PosixPath(f"/other/{next(added)}.md")] = stats
            return super().__hash__()

    def doc(number: int, path_type: type[PosixPath] = PosixPath) -> MemoryDoc:
        rel = f"m{number}.md"
        return MemoryDoc(path_type(f"/memory/{rel}"), rel, f"m{number}", "", "user", "cat", 1, 1.0)

    armed = False
    old = [doc(n) for n in range(4097)]
    selector.prepare(old)
    fresh = [doc(5000, Meddling)]
    armed = True
    assert selector.rank("cat", fresh, limit=1) == fresh
    armed = False
    assert len(selector._stats) < 100  # pruned to the offered memory and the additions

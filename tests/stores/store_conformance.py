"""The store conformance cases: what every :class:`~asyncrecall.memory.Store` promises.

Each case is a test function taking ``store`` (an empty store) and, where a second place
is needed, ``other`` (another empty store of the same kind: the target of an export, a
second writer). A module that provides those two fixtures and star-imports this one runs
every case against its store (``test_store_conformance.py`` runs them on a folder and on
PostgreSQL), as langgraph runs its checkpointer cases against every saver. Only the
interface is used here: no case knows which store it is given.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from asyncrecall import MemoryConflictError, MemoryStoreError
from asyncrecall.memory import (
    LIBRARY_ORIGIN,
    LexicalSelector,
    MemoryDoc,
    Recaller,
    Source,
    Store,
    StoreChange,
)
from asyncrecall.memory._transfer import copy_memories

#: What recalls in these cases: the library's recall over the store, BM25 selector.
Recall = Recaller

QUERY = "how do the integration tests reach the database"
DB = ("Database tests", "integration tests hit a real database", "feedback", "No mocks.")


def _save_user(store: Store, name: str, body: str, **kwargs: Any) -> MemoryDoc:
    return store.save_memory(name, f"about {name}", "project", body, origin="user", **kwargs)


async def _recalled(store: Store, query: str = QUERY) -> tuple[str, ...]:
    return (await Recall(store, LexicalSelector()).recall(query)).paths


# -- the contract itself ---------------------------------------------------------------


def test_the_store_declares_the_interface(store: Store) -> None:
    """A store is a :class:`Store` by declaration (a subclass), not by resemblance."""
    assert isinstance(store, Store)
    assert isinstance(store.location, str) and store.location
    assert isinstance(type(store).inline_scan, bool)


def test_an_incomplete_store_cannot_be_made() -> None:
    """Conformance is checked when a store is made: one that leaves out an operation of
    the interface is refused, naming it."""

    class Partial(Store):
        @property
        def location(self) -> str:
            return "nowhere"

    with pytest.raises(TypeError, match="abstract") as caught:
        Partial()  # type: ignore[abstract]
    assert "save_memory" in str(caught.value) and "confirm" in str(caught.value)


# -- save, read, list, forget ----------------------------------------------------------


def test_save_read_list_and_forget(store: Store) -> None:
    """A saved memory is read back as stored by its name, its relative path or its name
    in another case; listed newest first; counted; and gone once forgotten."""
    first = _save_user(store, "Deploy", "staging first")
    second = store.save_memory(*DB, origin="user")
    assert (second.name, second.description, second.type, second.body) == DB
    for key in (second.name, second.rel_path, second.name.upper()):
        assert store.get(key) == store.find(second.name)
    assert store.find("database tests") is None  # find is exact
    assert [d.name for d in store.scan(limit=None)] == ["Database tests", "Deploy"]
    assert [d.name for d in store.scan(limit=1)] == ["Database tests"]
    assert store.count() == 2
    removed = store.forget(first.name, origin="user")
    assert removed.rel_path == first.rel_path
    assert [d.name for d in store.scan(limit=None)] == ["Database tests"]
    with pytest.raises(MemoryStoreError, match="no memory named"):
        store.get("Deploy")
    with pytest.raises(MemoryStoreError, match="no memory named"):
        store.forget("Deploy", origin="user")


def test_an_update_keeps_its_relative_path(store: Store) -> None:
    before = _save_user(store, "Deploy", "staging first")
    after = _save_user(store, "Deploy", "production on Fridays? no")
    assert after.rel_path == before.rel_path
    assert store.get("Deploy").body == "production on Fridays? no"
    assert store.count() == 1


def test_the_index_lists_each_memory_once(store: Store) -> None:
    for name in ("Alpha", "Beta", "Alpha"):
        _save_user(store, name, f"{name} body")
    lines = store.index_for_prompt().splitlines()
    assert len(lines) == 2 and {"Alpha", "Beta"} == {line.split("]")[0][3:] for line in lines}


@pytest.mark.parametrize(
    ("name", "type", "content", "message"),
    [
        ("  ", "user", "x", "non-empty name"),
        ("N", "opinion", "x", "invalid memory type"),
        ("Big", "user", "x" * (1024 * 1024), "over 1 MiB"),
    ],
    # Short ids: pytest puts the running test's id in the environment of every process it
    # starts (a 1 MiB id made the PostgreSQL fixture's first process fail: E2BIG).
    ids=["blank-name", "unknown-type", "over-1-MiB"],
)
def test_an_invalid_save_writes_nothing(
    store: Store, name: str, type: str, content: str, message: str
) -> None:
    with pytest.raises(MemoryStoreError, match=message):
        store.save_memory(name, "", type, content, origin="user")
    assert store.scan(limit=None) == [] and store.recent_writes() == []


async def test_candidates_offer_what_was_saved_and_never_raise(store: Store) -> None:
    """:meth:`Store.candidates` offers the saved memories; an empty store offers nothing."""
    assert await store.candidates(QUERY) == []
    doc = store.save_memory(*DB, origin="user")
    assert [d.rel_path for d in await store.candidates(QUERY)] == [doc.rel_path]


# -- atomic writes ---------------------------------------------------------------------


def test_a_reader_never_sees_half_a_write(store: Store) -> None:
    """Writes are atomic: while one thread rewrites a memory between two long versions,
    every read of it sees one version whole, never a mix or an empty body."""
    versions = ("a" * 200_000, "b" * 200_000)
    _save_user(store, "Big", versions[0])
    stop = threading.Event()
    seen: list[str] = []

    def write() -> None:
        try:
            for turn in range(30):
                _save_user(store, "Big", versions[turn % 2])
        finally:
            stop.set()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while not stop.is_set():
            seen.append(store.get("Big").body)
    finally:
        writer.join(timeout=120)
    assert seen and all(body in versions for body in seen)


# -- preconditions and conflicts -------------------------------------------------------


def test_a_stale_precondition_writes_nothing(store: Store) -> None:
    """A save expecting the memory as it was read fails, writing nothing, once someone
    else has written it since; expecting it as it is, it writes."""
    read = _save_user(store, "Deploy", "staging first")
    _save_user(store, "Deploy", "someone else's change")
    with pytest.raises(MemoryConflictError):
        _save_user(store, "Deploy", "my change", expected=read)
    assert store.get("Deploy").body == "someone else's change"
    current = store.get("Deploy")
    assert _save_user(store, "Deploy", "my change", expected=current).body == "my change"


def test_expecting_absence_fails_when_it_exists(store: Store) -> None:
    _save_user(store, "Deploy", "staging first", expected=None)  # absent: written
    with pytest.raises(MemoryConflictError):
        _save_user(store, "Deploy", "a second creator", expected=None)
    assert store.get("Deploy").body == "staging first"


def test_a_stale_forget_removes_nothing(store: Store) -> None:
    read = _save_user(store, "Deploy", "staging first")
    _save_user(store, "Deploy", "changed since")
    with pytest.raises(MemoryConflictError):
        store.forget("Deploy", expected=read, origin="user")
    assert store.get("Deploy").body == "changed since"
    assert store.forget("Deploy", expected=store.get("Deploy"), origin="user").name == "Deploy"


def test_of_two_writers_expecting_one_version_one_writes(store: Store) -> None:
    """Two writers (threads) expecting the same version at once: exactly one writes, the
    other gets a conflict."""
    read = _save_user(store, "Deploy", "v1")
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def write(body: str) -> None:
        barrier.wait(timeout=60)
        try:
            _save_user(store, "Deploy", body, expected=read)
            outcomes.append(body)
        except MemoryConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=write, args=(b,)) for b in ("mine", "theirs")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(outcomes) == 2 and outcomes.count("conflict") == 1
    winner = next(o for o in outcomes if o != "conflict")
    assert store.get("Deploy").body == winner


# -- provenance and holds --------------------------------------------------------------


async def test_a_save_without_a_trusted_origin_is_held(store: Store) -> None:
    """The store API's default is honest: a write that does not say the text is the
    user's is untrusted, so the memory is held (listed, not recalled) until confirmed."""
    doc = store.save_memory(*DB)
    assert doc.quarantined
    assert store.provenance_of(doc)[-1].origin == LIBRARY_ORIGIN
    assert store.provenance_of(doc)[-1].untrusted
    assert store.quarantined_paths() == {doc.rel_path}
    assert [d.name for d in store.scan()] == [doc.name]  # listed
    assert await _recalled(store) == ()


async def test_the_users_own_save_is_recalled(store: Store) -> None:
    doc = store.save_memory(*DB, origin="user")
    assert not doc.quarantined and store.quarantined_paths() == set()
    assert await _recalled(store) == (doc.rel_path,)


async def test_a_held_memory_is_recalled_once_confirmed(store: Store) -> None:
    held = store.save_memory(*DB, sources=(Source.now("save_memory", untrusted=True),))
    assert held.quarantined and await _recalled(store) == ()
    confirmed = store.confirm(held.name)
    assert not confirmed.quarantined and confirmed.body == held.body
    assert store.quarantined_paths() == set()
    assert await _recalled(store) == (held.rel_path,)


@pytest.mark.parametrize("origin", ["user", "save_memory", "mcp", "import", LIBRARY_ORIGIN])
def test_only_the_user_lifts_a_hold(store: Store, origin: str) -> None:
    """A later write, whoever makes it (a trusted one included), leaves a hold in
    place: only :meth:`Store.confirm` (the user's word) lifts it."""
    store.save_memory(*DB)
    again = store.save_memory(DB[0], DB[1], DB[2], "No mocks, ever.", origin=origin)
    assert again.quarantined and store.get(DB[0]).quarantined


def test_an_untrusted_change_waits_beside_a_kept_memory(store: Store) -> None:
    """An untrusted change to a memory recall uses does not replace it: the memory keeps
    its text, the change waits beside it (:meth:`Store.pending_of`) until confirmed."""
    kept = store.save_memory(*DB, origin="user")
    store.save_memory(DB[0], DB[1], DB[2], "Mock everything.")
    now = store.get(DB[0])
    assert (now.body, now.quarantined) == (kept.body, False)
    waiting = store.pending_of(now)
    assert waiting is not None and waiting.body.strip() == "Mock everything."
    assert store.pending_names() == {DB[0]}
    applied = store.confirm(DB[0])
    assert applied.body.strip() == "Mock everything." and not applied.quarantined
    assert store.pending_of(applied) is None and store.pending_names() == set()


def test_provenance_keeps_every_source_in_write_order(store: Store) -> None:
    doc = store.save_memory(*DB, origin="user")
    store.save_memory(*DB[:3], "No mocks; real Postgres.", origin="user", sources=(
        Source.now("extraction-user", session="s1", offsets=(4,)),))  # fmt: skip
    sources = store.provenance_of(store.get(doc.name))
    assert [s.origin for s in sources] == ["user", "extraction-user"]
    assert sources[-1].session == "s1" and sources[-1].offsets == (4,)


# -- history and revert ----------------------------------------------------------------


def test_every_write_is_recorded_and_can_be_undone(store: Store) -> None:
    _save_user(store, "Tea", "green tea")
    _save_user(store, "Tea", "black tea")
    store.forget("Tea", origin="user")
    records = store.history_of("Tea")
    assert [(r.seq, r.op, r.origin) for r in records] == [
        (1, "save", "user"), (2, "save", "user"), (3, "forget", "user"),
    ]  # fmt: skip
    assert records[0].before is None and records[2].after is None
    back = store.revert("Tea")  # undoes the forget
    assert back is not None and back.body == "black tea"
    again = store.revert("Tea", to=1)  # what the first save wrote
    assert again is not None and again.body == "green tea"
    assert [r.op for r in store.history_of("Tea")][-2:] == ["revert", "revert"]
    assert store.recent_writes(limit=1)[0].op == "revert"


def test_one_write_of_several_memories_is_undone_as_one(store: Store) -> None:
    _save_user(store, "Kept", "the user's")
    _save_user(store, "Kept", "rewritten by the batch", write_id="batch-1")
    _save_user(store, "New", "created by the batch", write_id="batch-1")
    undone = store.revert_write("batch-1")
    assert undone["New"] is None and store.find("New") is None
    kept = undone["Kept"]
    assert kept is not None and kept.body == "the user's"


# -- export and import -----------------------------------------------------------------


def test_export_and_import_round_trip(store: Store, other: Store) -> None:
    """Every memory crosses with its text, type, provenance and hold; an import of
    someone else's memories (``trusted=False``) holds every copy."""
    _save_user(store, "Deploy", "staging first")
    store.save_memory(*DB)  # held
    copied = copy_memories(store, other, write_id="import-1")
    assert len(copied) == 2
    for original in store.scan(limit=None):
        copy = other.get(original.name)
        assert (copy.description, copy.type, copy.body) == (
            original.description, original.type, original.body,
        )  # fmt: skip
        assert copy.quarantined == original.quarantined
        kinds = [s.origin for s in other.provenance_of(copy)]
        assert kinds[: len(store.provenance_of(original))] == [
            s.origin for s in store.provenance_of(original)
        ]
    assert set(other.revert_write("import-1").values()) == {None}  # one step undoes it
    copy_memories(store, other, trusted=False)
    assert all(d.quarantined for d in other.scan(limit=None))


def test_a_batch_import_saves_every_record_in_order_and_stops_at_a_bad_one(
    store: Store, other: Store
) -> None:
    """``import_records`` (what ``memory import`` calls) saves each record as
    ``import_record`` does, in order: the same text, type and hold, listed in the
    source's order, ``progress(done, total)`` after each, the whole batch undone as one
    write. A record the store refuses stops the batch: the ones before it stay saved
    and listed, none after it is written."""
    for name in ("Charlie", "Alpha", "Bravo"):
        _save_user(store, name, f"{name} body")
    store.save_memory(*DB)  # held
    records = store.export_records()
    steps: list[tuple[int, int]] = []
    copies = other.import_records(records, write_id="batch-1", progress=lambda *s: steps.append(s))
    assert [c.name for c in copies] == [r.doc.name for r in records]
    assert steps == [(n, 4) for n in range(1, 5)]
    for record, copy in zip(records, copies, strict=True):
        assert other.get(copy.name).rel_path == copy.rel_path
        assert (copy.description, copy.type, copy.body, copy.quarantined) == (
            record.doc.description, record.doc.type, record.doc.body, record.doc.quarantined,
        )  # fmt: skip
    listed = [line.split("]")[0][3:] for line in other.index_for_prompt().splitlines()]
    assert listed == [r.doc.name for r in records]
    assert set(other.revert_write("batch-1").values()) == {None}
    assert other.scan(limit=None) == []

    bad = dataclasses.replace(records[1].doc, type="nonsense")  # type: ignore[arg-type]
    broken = [records[0], dataclasses.replace(records[1], doc=bad), *records[2:]]
    with pytest.raises(MemoryStoreError, match="nonsense"):
        other.import_records(broken, write_id="batch-2")
    assert [d.name for d in other.scan(limit=None)] == [records[0].doc.name]
    assert [line.split("]")[0][3:] for line in other.index_for_prompt().splitlines()] == [
        records[0].doc.name
    ]


# -- extraction's state, the change feed -----------------------------------------------


def test_the_extraction_backend_writes_into_this_store(store: Store) -> None:
    backend = store.extraction_backend()
    assert backend.store is store
    saved = backend.save(*DB, {"s1": [0]}, sources=(Source.now("extraction-user"),))
    assert store.get(saved.name).body == DB[3]
    assert backend.source_offsets(saved) == {"s1": (0,)}
    with pytest.raises(MemoryConflictError):
        backend.save(*DB[:3], "changed", None, expected=None)
    gate = store.consolidation_gate()
    assert isinstance(gate.due(), bool)


def test_the_change_feed_reports_a_write_when_there_is_one(store: Store) -> None:
    """:attr:`Store.changes` is ``None`` (no feed) or reports every save, this store's
    own included, as it commits."""
    feed = store.changes
    if feed is None:
        pytest.skip(f"{type(store).__name__} has no change feed (a documented default)")
    seen: list[StoreChange] = []
    remove = feed.add_change_listener(seen.append)
    before = feed.generation
    try:
        store.save_memory(*DB, origin="user")
    finally:
        remove()
    assert [c.op for c in seen] == ["save"] and seen[0].memory_id == feed.memory_id(DB[0])
    assert feed.generation > before


# -- close -----------------------------------------------------------------------------


def test_close_is_idempotent_and_with_closes(store: Store) -> None:
    with store as same:
        assert same is store
        _save_user(store, "Deploy", "staging first")
    store.close()  # again: nothing happens


async def test_async_with_closes_and_recall_never_raises_after(store: Store) -> None:
    async with store as same:
        assert same is store
    await store.aclose()
    assert isinstance(await store.candidates(QUERY), list)  # never raises


#: Every case, for ``from store_conformance import *``.
__all__ = sorted(name for name in list(globals()) if name.startswith("test_"))

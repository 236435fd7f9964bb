"""Nothing lost, nothing resurrected: what extraction and consolidation may not do to
memories people keep, on the folder and on PostgreSQL.

Each test names the defect it guards against; every one of them failed on the code
before the fix (each commit that added one names the mutation that breaks it).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from asyncrecall import MemoryStoreError
from asyncrecall.memory import FolderStore, MemoryExtractor, Source, Store, TranscriptTurn
from asyncrecall.memory.extraction._backend import ExtractionBackend, extraction_backend
from asyncrecall.memory.extraction._consolidate import apply_plan, consolidate, validate_plan
from asyncrecall.memory.extraction._extract import ORPHAN_AGE_S
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

from .conftest import HANG_GUARD, SideModel, memory
from .test_consolidate import PlanSide, action, plan


class Crash(BaseException):
    """A process dying at this point (nothing after it runs; what is on disk stays)."""


@pytest.fixture(params=["folder", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "folder":
        store = FolderStore(tmp_path / "memory")
        store.ensure()
        yield store
    else:
        yield request.getfixturevalue("pg_store")


def turns(*texts: str, start: int = 0) -> list[TranscriptTurn]:
    return [
        TranscriptTurn(start + i, "user" if i % 2 == 0 else "assistant", text)
        for i, text in enumerate(texts)
    ]


def bodies(store: Store) -> dict[str, str]:
    return {doc.name: doc.body for doc in store.scan(limit=None)}


async def held_extraction(
    store: Store,
    side: SideModel,
    side_model: OpenAIModel,
    server: LocalServer,
    meanwhile: Callable[[], Awaitable[None]],
    proposal: dict[str, Any],
) -> None:
    """An extraction of session s1 proposing ``proposal``, whose side query is held
    until ``meanwhile`` (another writer at work while the model thinks) has run."""
    held = threading.Event()
    side.add(proposal, gate=held)
    running = asyncio.ensure_future(MemoryExtractor(store, side_model).extract("s1", turns("x")))
    await asyncio.to_thread(server.wait_for, lambda r: True, timeout=HANG_GUARD)
    await meanwhile()
    held.set()
    await running


# -- 1. a merge named like its second memory ----------------------------------------------


def test_a_merge_named_like_its_second_memory_keeps_the_merge(
    any_store: Store,
) -> None:
    """A merge whose name is the second memory's name lands in that memory and removes
    only the first: one memory after, holding the merged content, listed in the index
    (it used to save into the second file and then forget it: 2 memories, then 0)."""
    any_store.save_memory("Deploy steps", "how", "project", "Build, then push.", origin="user")
    any_store.save_memory(
        "Deployment procedure", "how", "project", "Push to staging first.", origin="user"
    )
    merged = "Build, push to staging first, then to production."
    raw = plan(action("merge", ["deploy-steps.md", "deployment-procedure.md"],
                      "Deployment procedure", merged))  # fmt: skip
    root = any_store.root if isinstance(any_store, FolderStore) else None
    actions = validate_plan(raw, root=root, docs=any_store.scan(limit=None))

    result = apply_plan(any_store, actions)

    assert bodies(any_store) == {"Deployment procedure": merged}
    assert result.removed == ("deploy-steps.md",)
    assert "deployment-procedure.md" in any_store.index_for_prompt()


# -- 2. a plan applied over a snapshot ------------------------------------------------------


async def test_a_plan_never_overwrites_or_removes_what_was_saved_while_it_was_made(
    any_store: Store, local_server: LocalServer, side_model: OpenAIModel
) -> None:
    """Memories saved while the side model plans are not overwritten by a rewrite or a
    merge nor removed by a delete: those actions are skipped (and said); the actions on
    memories nobody touched still apply."""
    any_store.save_memory("Staging host", "where", "project", "staging.example.com", origin="user")
    any_store.save_memory("Editor", "tools", "user", "The user uses vim.", origin="user")
    any_store.save_memory("Office", "where", "project", "Paris", origin="user")
    any_store.save_memory("Office location", "where", "project", "We work in Paris.", origin="user")
    held = threading.Event()
    PlanSide(local_server).replies.append(Reply(gate=held, json=plan(
        action("rewrite", ["staging-host.md"], "Staging host", "staging.internal"),
        action("delete", ["editor.md"]),
        action("merge", ["office.md", "office-location.md"], "Office", "The office is in Paris."),
    )))  # fmt: skip

    running = asyncio.ensure_future(consolidate(any_store, side_model))
    await asyncio.to_thread(local_server.wait_for, lambda r: True, timeout=HANG_GUARD)
    # Another process saves while the plan is being made.
    any_store.save_memory(
        "Staging host", "where", "project", "staging2.example.com (moved)", origin="user"
    )
    any_store.save_memory("Editor", "tools", "user", "The user moved to helix.", origin="user")
    held.set()
    result = await running

    now = bodies(any_store)
    assert now["Staging host"] == "staging2.example.com (moved)"
    assert now["Editor"] == "The user moved to helix."
    assert now["Office"] == "The office is in Paris." and "Office location" not in now
    assert len(result.notes) == 2 and all("skipped" in n for n in result.notes)


def test_a_merge_that_meets_a_changed_memory_is_skipped_whole(
    any_store: Store,
) -> None:
    """If any memory of a merge changed since the plan, nothing of the merge is
    written: the merged text would drop the change."""
    any_store.save_memory("A", "", "project", "alpha", origin="user")
    any_store.save_memory("B", "", "project", "beta", origin="user")
    root = any_store.root if isinstance(any_store, FolderStore) else None
    actions = validate_plan(plan(action("merge", ["a.md", "b.md"], "A", "alpha beta")),
                            root=root, docs=any_store.scan(limit=None))  # fmt: skip
    any_store.save_memory("B", "", "project", "beta, and gamma", origin="user")

    result = apply_plan(any_store, actions)

    assert bodies(any_store) == {"A": "alpha", "B": "beta, and gamma"}
    assert result.written == () and result.removed == () and len(result.notes) == 1


def test_a_delete_justified_by_a_memory_changed_since_is_skipped(
    any_store: Store,
) -> None:
    """A delete (or rewrite) rests on the other memories the model saw: "Editor" is
    superseded by "Tools". When "Tools" changed after the plan, the delete is skipped,
    though "Editor" itself is untouched; merges of unchanged memories still apply."""
    any_store.save_memory("Editor", "", "user", "The user uses vim.", origin="user")
    any_store.save_memory("Tools", "", "user", "The user uses vim and tmux.", origin="user")
    any_store.save_memory("X", "", "project", "x", origin="user")
    any_store.save_memory("Y", "", "project", "y", origin="user")
    root = any_store.root if isinstance(any_store, FolderStore) else None
    actions = validate_plan(plan(action("delete", ["editor.md"]),
                                 action("merge", ["x.md", "y.md"], "X", "x y")),
                            root=root, docs=any_store.scan(limit=None))  # fmt: skip
    any_store.save_memory("Tools", "", "user", "The user uses tmux.", origin="user")

    result = apply_plan(any_store, actions)

    now = bodies(any_store)
    assert now["Editor"] == "The user uses vim." and now["X"] == "x y" and "Y" not in now
    assert len(result.notes) == 1 and "Tools" in result.notes[0]


def test_consolidation_leaves_alone_a_memory_it_was_shown_cut(
    any_store: Store,
) -> None:
    """A memory whose body the consolidation prompt cut (over 1,500 characters) cannot
    be rewritten, merged or deleted: the model did not see all of it."""
    long = "\n".join(f"Rule {i}: {'keep this ' * 12}" for i in range(20))
    any_store.save_memory("Rules", "", "feedback", long, origin="user")
    any_store.save_memory("Rules too", "", "feedback", "Rule 0.", origin="user")
    root = any_store.root if isinstance(any_store, FolderStore) else None
    for bad in (
        action("rewrite", ["rules.md"], "Rules", "Rule 0."),
        action("merge", ["rules-too.md", "rules.md"], "Rules too", "Rule 0."),
        action("delete", ["rules.md"]),
    ):
        with pytest.raises(Exception, match="shown cut"):
            validate_plan(plan(bad), root=root, docs=any_store.scan(limit=None))
    assert bodies(any_store)["Rules"] == long


# -- 3. extraction truncating what it updates --------------------------------------------


RULES = "\n".join(
    f"{i}. Rule number {i}: always check the {w} before merging." for i, w in
    enumerate(["tests", "lint", "types", "docs", "changelog", "migrations", "benchmarks",
               "coverage", "licences", "secrets", "locks", "ports", "versions", "fixtures",
               "timeouts"], start=1)
)  # fmt: skip


async def test_an_update_of_a_memory_shown_cut_keeps_every_line(
    any_store: Store, side: SideModel, side_model: OpenAIModel
) -> None:
    """The model saw only the start of a long memory and wrote back what it saw plus one
    rule: the memory keeps all 15 rules and gains the new one (it used to become the
    ~260 characters the model wrote)."""
    assert len(RULES) > 800
    any_store.save_memory("Review rules", "what to check", "feedback", RULES, origin="user")
    shown = " ".join(RULES.split())[:240]
    added = "16. Rule number 16: check the changelog twice."
    side.add(memory("Review rules", [0], action="update", path="review-rules.md",
                    content=f"{shown}\n{added}"))  # fmt: skip

    await MemoryExtractor(any_store, side_model).extract("s1", turns("add a rule"))

    body = bodies(any_store)["Review rules"]
    assert all(line in body for line in RULES.splitlines())
    assert "Rule number 16" in body


async def test_a_create_named_like_a_memory_not_shown_adds_to_it(
    any_store: Store, side: SideModel, side_model: OpenAIModel
) -> None:
    """A memory beyond the 60 the prompt shows, "created" again by name, keeps its body
    and gains the new text."""
    any_store.save_memory("Old fact", "", "project", "The build uses make.", origin="user")
    for i in range(60):
        any_store.save_memory(f"Filler {i}", "", "project", f"filler {i}", origin="user")
    side.add(memory("Old fact", [0], content="The build also needs cmake."))

    await MemoryExtractor(any_store, side_model).extract("s1", turns("cmake too"))

    assert bodies(any_store)["Old fact"] == "The build uses make.\n\nThe build also needs cmake."


async def test_a_memory_shown_whole_and_unchanged_is_replaced(
    any_store: Store, side: SideModel, side_model: OpenAIModel
) -> None:
    """The other side of the rule: a short memory the model saw whole is replaced by its
    update (a stale fact can be corrected, not only appended to)."""
    any_store.save_memory("Home", "", "user", "User lives in Lyon.", origin="user")
    side.add(memory("Home", [0], action="update", path="home.md", content="User lives in Berlin."))

    await MemoryExtractor(any_store, side_model).extract("s1", turns("I moved to Berlin"))

    assert bodies(any_store)["Home"] == "User lives in Berlin."


async def test_concurrent_extractions_from_one_snapshot_both_keep_their_facts(
    any_store: Store,
    side: SideModel,
    side_model: OpenAIModel,
    local_server: LocalServer,
) -> None:
    """Two extractions (two sessions) that read the same memory and update it: the
    second write finds the memory changed (compare-and-swap) and adds to it instead of
    replacing it, so neither fact is lost."""
    any_store.save_memory("Pets", "", "user", "The user has a cat.", origin="user")

    async def second_extraction() -> None:
        side.add(memory("Pets", [0], action="update", path="pets.md",
                        content="The user has a cat and a dog."))  # fmt: skip
        await MemoryExtractor(any_store, side_model).extract("s2", turns("I got a dog"))

    await held_extraction(
        any_store, side, side_model, local_server, second_extraction,
        memory("Pets", [0], action="update", path="pets.md",
               content="The user has a cat named Tom."),
    )  # fmt: skip

    body = bodies(any_store)["Pets"]
    assert "a cat and a dog" in body and "named Tom" in body


async def test_an_update_planned_before_the_user_replaced_the_memory_brings_nothing_back(
    any_store: Store,
    side: SideModel,
    side_model: OpenAIModel,
    local_server: LocalServer,
) -> None:
    """The model copied the memory as it was shown and added a fact; meanwhile the user
    replaced the memory. Only the new fact is added: the copy of the replaced text does
    not come back."""
    any_store.save_memory("Home", "", "user", "User lives in Lyon.", origin="user")

    async def user_replaces() -> None:
        any_store.save_memory("Home", "", "user", "User moved to Berlin.", origin="user")

    await held_extraction(
        any_store, side, side_model, local_server, user_replaces,
        memory("Home", [0], action="update", path="home.md",
               content="User lives in Lyon. User has a garden."),
    )  # fmt: skip

    assert bodies(any_store)["Home"] == "User moved to Berlin.\n\nUser has a garden."


# -- 4. a crashed extraction's journal replayed blindly ---------------------------------


class _CrashingBackend:
    """The store's backend with a crash injected after ``saves`` memory writes (or, with
    ``at_commit``, at the cursor's commit)."""

    def __init__(self, inner: ExtractionBackend, *, saves: int = 0, at_commit: bool = False):
        self._inner = inner
        self._saves = saves
        self._at_commit = at_commit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def save(self, *args: Any, **kwargs: Any) -> Any:
        if not self._at_commit and self._saves == 0:
            raise Crash
        self._saves -= 1
        return self._inner.save(*args, **kwargs)

    def commit(self, journal: Any) -> None:
        if self._at_commit:
            raise Crash
        self._inner.commit(journal)


async def _crash(store: Store, side_model: OpenAIModel, session: str, text: str, **at: Any) -> None:
    backend = _CrashingBackend(extraction_backend(store), **at)
    with pytest.raises(Crash):
        await MemoryExtractor(store, side_model, backend=backend).extract(session, turns(text))  # type: ignore[arg-type]


def _age_journals(store: Store) -> None:
    """Make every pending journal look older than :data:`ORPHAN_AGE_S` (its writer died)."""
    old = time.time() - ORPHAN_AGE_S - 60
    if isinstance(store, FolderStore):
        for path in (store.root.parent / f"{store.root.name}.state" / "extract").glob(
            "*.pending.json"
        ):
            os.utime(path, (old, old))
        return
    import psycopg

    with psycopg.connect(store.url) as conn:  # type: ignore[attr-defined]
        conn.execute(
            "UPDATE asyncrecall_extraction SET updated_at = to_timestamp(%s) WHERE namespace = %s",
            (old, store.namespace),  # type: ignore[attr-defined]
        )


async def test_a_journal_rolled_forward_never_overwrites_a_newer_save(
    any_store: Store, side: SideModel, side_model: OpenAIModel
) -> None:
    """A crash after the journal, before the write; the user then saves the memory; the
    session's next extraction rolls the journal forward and leaves the newer save."""
    any_store.save_memory("Home", "", "user", "User lives in Paris.", origin="user")
    side.add(memory("Home", [0], action="update", path="home.md", content="User lives in Lyon."))
    await _crash(any_store, side_model, "s1", "I live in Lyon", saves=0)
    any_store.save_memory("Home", "", "user", "User moved to Berlin.", origin="user")

    await MemoryExtractor(any_store, side_model).extract("s1", turns("I live in Lyon", "ok"))

    assert bodies(any_store)["Home"] == "User moved to Berlin."


async def test_a_journal_rolled_forward_never_brings_back_a_forgotten_memory(
    any_store: Store, side: SideModel, side_model: OpenAIModel
) -> None:
    """A crash after the write, before the cursor; the user forgets the memory; another
    session's extraction rolls the orphaned journal forward: the memory stays forgotten
    (it used to be written again)."""
    side.add(memory("Health condition", [0], content="diabetes"))
    await _crash(any_store, side_model, "s1", "I have diabetes", at_commit=True)
    assert "Health condition" in bodies(any_store)
    any_store.forget("Health condition")
    _age_journals(any_store)

    await MemoryExtractor(any_store, side_model).extract("s2", turns("hello"))

    assert "Health condition" not in bodies(any_store)


async def test_a_journal_whose_write_never_happened_is_still_rolled_forward(
    any_store: Store, side: SideModel, side_model: OpenAIModel
) -> None:
    """The other side of the rule: nobody wrote the memory since the crash, so the
    journalled write is made (nothing the extraction decided is lost), once."""
    side.add(memory("Tea", [0], content="The user drinks green tea."))
    await _crash(any_store, side_model, "s1", "I drink green tea", saves=0)
    assert "Tea" not in bodies(any_store)

    await MemoryExtractor(any_store, side_model).extract("s1", turns("I drink green tea", "ok"))

    assert bodies(any_store)["Tea"] == "The user drinks green tea."


# -- 5. forget deleting the wrong memory ------------------------------------------------


@pytest.mark.parametrize(("kept", "asked"), [("C++ tips", "C# tips"), ("Q3 plan", "Q3/plan?")])
def test_forget_removes_what_was_named_or_nothing(any_store: Store, kept: str, asked: str) -> None:
    """A key that names no memory removes nothing and says so (it used to fall back to
    a file-name stem: ``C# tips`` removed ``C++ tips``)."""
    any_store.save_memory(kept, "", "project", "keep me", origin="user")

    with pytest.raises(MemoryStoreError, match="no memory named"):
        any_store.forget(asked)

    assert bodies(any_store) == {kept: "keep me"}


def test_forget_by_name_in_another_case_needs_one_match(any_store: Store) -> None:
    """A name in another letter case names a memory only when one memory fits."""
    any_store.save_memory("Tea", "", "user", "green", origin="user")
    assert any_store.forget("tea").name == "Tea"
    any_store.save_memory("Tea", "", "user", "green", origin="user")
    any_store.save_memory("TEA", "", "user", "black", origin="user")
    with pytest.raises(MemoryStoreError):
        any_store.forget("tea")
    assert sorted(bodies(any_store)) == ["TEA", "Tea"]


# -- the history every write leaves, on both stores ------------------------------------


def test_every_write_is_recorded_and_can_be_undone(any_store: Store) -> None:
    """Saves and forgets leave numbered records with the text before and after and who
    wrote; a revert brings back what the newest write replaced (a forgotten memory whole,
    provenance included) or a chosen version, and is recorded in turn."""
    backend = extraction_backend(any_store)
    backend.save("Tea", "drinks", "user", "green tea", {"s1": [0]}, origin="extraction")
    any_store.save_memory("Tea", "drinks", "user", "black tea", origin="user")
    any_store.forget("Tea", origin="user")
    keeper: Any = any_store
    records = keeper.history_of("Tea")
    assert [(r.seq, r.op, r.origin) for r in records] == [
        (1, "save", "extraction"), (2, "save", "user"), (3, "forget", "user"),
    ]  # fmt: skip
    assert records[0].before is None and "green tea" in (records[0].after or "")
    assert records[2].after is None and "black tea" in (records[2].before or "")

    back = keeper.revert("Tea")
    assert back is not None and back.body == "black tea"
    keeper.revert("Tea", to=1)
    assert any_store.get("Tea").body == "green tea"
    assert backend.source_offsets(any_store.get("Tea")) == {"s1": (0,)}
    assert [r.op for r in keeper.history_of("Tea")][-2:] == ["revert", "revert"]
    with pytest.raises(MemoryStoreError, match="no version 9"):
        keeper.revert("Tea", to=9)


def test_a_conditional_write_that_meets_a_change_writes_nothing(
    any_store: Store,
) -> None:
    """The backend's save and forget with ``expected`` (the memory as read; ``None``:
    absent) raise MemoryConflictError and write nothing when the memory changed."""
    from asyncrecall import MemoryConflictError

    backend = extraction_backend(any_store)
    read = any_store.save_memory("Tea", "", "user", "green", origin="user")
    any_store.save_memory("Tea", "", "user", "black", origin="user")
    with pytest.raises(MemoryConflictError):
        backend.save("Tea", "", "user", "oolong", None, expected=read)
    with pytest.raises(MemoryConflictError):
        backend.forget("Tea", expected=read)
    with pytest.raises(MemoryConflictError):
        backend.save("Tea", "", "user", "oolong", None, expected=None)
    assert bodies(any_store) == {"Tea": "black"}
    current = backend.get("Tea")
    assert current is not None
    # (a trusted source: a write with none is held, and would wait beside "black")
    trusted = (Source.now("extraction-user"),)
    saved = backend.save("Tea", "", "user", "oolong", None, expected=current, sources=trusted)
    assert saved.body == "oolong"

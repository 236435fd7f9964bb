"""The small rules of extraction and consolidation, without a model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from asyncrecall import MemoryStoreError, ModelProtocolError
from asyncrecall.memory import INDEX_MAX_LINES, FolderStore, TranscriptTurn
from asyncrecall.memory.extraction._consolidate import apply_plan, validate_plan
from asyncrecall.memory.extraction._extract import (
    _committed,
    confine_path,
    extraction_prompt,
    validate_proposals,
)
from asyncrecall.memory.extraction._state import (
    ExtractionState,
    Journal,
    JournalEntry,
    check_session_id,
)
from asyncrecall.memory.folder._extraction import read_source_offsets, trim_index

from .conftest import memory


@pytest.mark.parametrize(
    ("proposal", "reason"),
    [
        ("not an object", "must be an object"),
        ({**memory("X", [0]), "action": "delete"}, "create or update"),
        ({**memory("X", [0]), "name": "n" * 121}, "over 120"),
        ({**memory("X", [0]), "description": 5}, "description must be"),
        ({**memory("X", [0]), "content": "  "}, "non-empty string"),
        ({**memory("X", [0]), "source_offsets": ["0"]}, "list of integers"),
        ({**memory("X", [0]), "source_offsets": [True]}, "list of integers"),
        ({**memory("X", [0]), "path": 3}, "path must be a string"),
        (memory("X", [0], path="nope.md", action="update"), "not an existing memory"),
        (memory("X", [0], path="a\\b.md"), "plain relative path"),
    ],
)
def test_each_bad_proposal_is_refused_with_its_reason(
    store: FolderStore, proposal: Any, reason: str
) -> None:
    accepted, refused = validate_proposals(
        {"memories": [proposal]}, root=store.root, docs=[], offsets=[0]
    )
    assert accepted == [] and reason in refused[0].reason


def test_a_create_naming_an_existing_memory_updates_it(store: FolderStore) -> None:
    doc = store.save_memory("Office", "where", "project", "Paris", origin="user")
    answer = json.dumps({"memories": [memory("Office", [0])]})  # an answer left as JSON text
    (proposal,), _ = validate_proposals(answer, root=store.root, docs=[doc], offsets=[0])
    assert proposal.action == "update" and proposal.path == doc.rel_path
    with_path = memory("Other", [0], path="office.md", action="create")
    (proposal,), _ = validate_proposals(
        {"memories": [with_path]}, root=store.root, docs=[doc], offsets=[0]
    )
    assert proposal.action == "update" and proposal.name == "Office"  # the file keeps its name


def test_confine_path_accepts_memory_files_only(store: FolderStore) -> None:
    assert confine_path(store.root, "./sub/note.md") == "sub/note.md"
    for bad in ("", "  ", "../x.md", "sub/.x.md", "x.txt", "MEMORY.md"):
        with pytest.raises(ValueError):
            confine_path(store.root, bad)


def test_the_prompt_cuts_long_bodies_and_turns(store: FolderStore) -> None:
    doc = store.save_memory("Long", "d", "project", "word " * 200, origin="user")
    prompt = extraction_prompt([TranscriptTurn(3, "user", "x" * 5000)], [doc])
    assert "[3] user: " + "x" * 4000 + "…" in prompt and "long.md [project] Long" in prompt


def test_source_offsets_of_unreadable_or_plain_files_are_empty(tmp_path: Path) -> None:
    assert read_source_offsets(tmp_path / "missing.md") == {}
    plain = tmp_path / "plain.md"
    plain.write_text("no front matter")
    assert read_source_offsets(plain) == {}
    broken = tmp_path / "broken.md"
    broken.write_text("---\nsource_offsets: [unclosed\n---\n")
    assert read_source_offsets(broken) == {}
    unclosed = tmp_path / "unclosed.md"
    unclosed.write_text("---\nname: x\n")
    assert read_source_offsets(unclosed) == {}


def test_state_refuses_bad_session_ids_corrupt_files_and_a_cursor_moving_back(
    tmp_path: Path,
) -> None:
    state = ExtractionState(tmp_path / "state")
    for bad in ("", "../x", "a/b", ".hidden", "x" * 101):
        with pytest.raises(ValueError):
            check_session_id(bad)
    state.set_cursor("s", 4)
    with pytest.raises(MemoryStoreError, match="backwards"):
        state.set_cursor("s", 2)
    state.cursor_path("s").write_text('{"offset": -1}')
    with pytest.raises(MemoryStoreError, match="corrupt"):
        state.cursor("s")
    state.cursor_path("s").write_text("{not json")
    with pytest.raises(MemoryStoreError, match="not valid JSON"):
        state.cursor("s")
    state.journal_path("s").write_text('{"start": 0, "end": 1, "writes": [5]}')
    with pytest.raises(MemoryStoreError, match="journal"):
        state.journal("s")
    with pytest.raises(ValueError):
        JournalEntry.from_json({"name": "x"})
    entry = JournalEntry("n", "d", "user", "c", {"s": [1]}, "create")
    state.write_journal(Journal("s", 0, 1, (entry,)))
    assert state.journal("s") == Journal("s", 0, 1, (entry,))
    assert "ExtractionState" in repr(state)


async def test_a_committed_step_finishes_before_the_cancellation_propagates() -> None:
    """Cancelled while a file step runs: the step completes, then CancelledError."""
    started, release, finished = asyncio.Event(), asyncio.Event(), []

    async def step() -> str:
        started.set()
        await release.wait()
        finished.append(True)
        return "done"

    task = asyncio.create_task(_committed(step()))
    await started.wait()
    task.cancel()
    await asyncio.sleep(0)
    assert not task.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == [True]


def test_plan_rules(store: FolderStore) -> None:
    store.save_memory("A", "a", "project", "a", origin="user")
    store.save_memory("B", "b", "project", "b", origin="user")
    docs = store.scan()

    def refused(action: Any, match: str) -> None:
        with pytest.raises(ModelProtocolError, match=match):
            validate_plan({"actions": [action]}, root=store.root, docs=docs)

    base = {"op": "rewrite", "paths": ["a.md"], "name": "A", "description": "", "type": "user",
            "content": "x", "reason": ""}  # fmt: skip
    refused("x", "must be an object")
    refused({**base, "op": "explode"}, "merge, rewrite or delete")
    refused({**base, "paths": "a.md"}, "list of strings")
    refused({**base, "name": "n" * 121}, "over 120")
    refused({**base, "description": "d" * 301}, "over 300")
    refused({**base, "type": "secret"}, "invalid memory type")
    refused({**base, "content": "c" * 8001}, "over 8000")
    refused({**base, "name": "B"}, "belongs to another memory")
    refused({**base, "paths": ["a.md", "b.md"]}, "one path")
    with pytest.raises(ModelProtocolError, match="not JSON"):
        validate_plan("nope", root=store.root, docs=docs)
    with pytest.raises(ModelProtocolError, match="actions"):
        validate_plan({"plan": []}, root=store.root, docs=docs)
    with pytest.raises(ModelProtocolError, match="over 50"):
        validate_plan({"actions": [base] * 51}, root=store.root, docs=docs)


def test_a_merge_under_a_new_name_writes_the_new_file_first(store: FolderStore) -> None:
    store.save_memory("A", "a", "project", "a", extra={"source_offsets": {"s": [1]}}, origin="user")
    store.save_memory("B", "b", "project", "b", origin="user")
    actions = validate_plan(
        {"actions": [{"op": "merge", "paths": ["a.md", "b.md"], "name": "AB", "description": "ab",
                      "type": "project", "content": "a and b", "reason": "dup"}]},
        root=store.root, docs=store.scan(),
    )  # fmt: skip
    result = apply_plan(store, actions)
    assert result.written == ("ab.md",) and set(result.removed) == {"a.md", "b.md"}
    (doc,) = store.scan()
    assert read_source_offsets(doc.path) == {"s": (1,)}
    assert actions[0].to_dict()["name"] == "AB"


def test_an_index_over_its_limits_is_trimmed(store: FolderStore) -> None:
    assert not trim_index(store)  # within limits: untouched
    lines = [f"- [M{i}](m{i}.md) — " + "long description " * 10 for i in range(INDEX_MAX_LINES + 5)]
    for i in range(INDEX_MAX_LINES + 5):  # the files exist: a line to a missing one is dropped
        (store.root / f"m{i}.md").write_text(f"---\nname: M{i}\ntype: project\n---\nbody\n")
    store.index_path.write_text("\n".join(lines) + "\n")
    assert trim_index(store)
    assert all(len(line) < 120 for line in store.index_path.read_text().splitlines())

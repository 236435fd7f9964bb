"""The extraction core over real HTTP: one side query, validated writes, the cursor."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from asyncrecall import ModelError
from asyncrecall.memory import FolderStore, MemoryExtractor, TranscriptTurn, read_source_offsets
from asyncrecall.memory.extraction._extract import MAX_PROPOSALS, validate_proposals
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

from .conftest import HANG_GUARD, SideModel, is_extraction, memory, offsets_in_prompt


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def turns(*texts: str, start: int = 0) -> list[TranscriptTurn]:
    return [
        TranscriptTurn(start + i, "user" if (start + i) % 2 == 0 else "assistant", text)
        for i, text in enumerate(texts)
    ]


async def test_writes_proposals_with_their_source_offsets_and_moves_the_cursor(
    store: FolderStore, side_model: OpenAIModel, side: SideModel, local_server: LocalServer
) -> None:
    """An accepted proposal becomes a topic file the scan reads, with an index line and
    ``source_offsets`` front matter; the cursor moves to the end of the slice."""
    side.add(memory("Staging cluster", [0, 1], content="The staging cluster is called blue."))
    extractor = MemoryExtractor(store, side_model)

    result = await extractor.extract("s1", turns("staging is called blue", "noted"))

    assert result.created == ("staging-cluster.md",) and result.updated == ()
    (doc,) = store.scan()
    assert doc.name == "Staging cluster" and doc.body == "The staging cluster is called blue."
    assert read_source_offsets(doc.path) == {"s1": (0, 1)}
    assert "](staging-cluster.md)" in store.index_path.read_text()
    assert extractor.cursor("s1") == 2
    # The state lives beside the folder (its .cache/ holds only the folder's own caches).
    inside = [p for p in store.root.rglob("*") if ".cache" not in p.relative_to(store.root).parts]
    assert not any(p.suffix == ".json" for p in inside)
    (request,) = [r for r in local_server.requests if is_extraction(r)]
    assert offsets_in_prompt(request) == [0, 1]


async def test_a_second_extraction_sees_only_the_new_turns_and_updates_in_place(
    store: FolderStore, side_model: OpenAIModel, side: SideModel, local_server: LocalServer
) -> None:
    """Nothing twice: the next extraction starts at the cursor. An update keeps the file
    and merges the offsets it came from."""
    extractor = MemoryExtractor(store, side_model)
    side.add(memory("Staging cluster", [0]))
    await extractor.extract("s1", turns("staging is blue", "ok"))
    side.add(memory("Staging cluster", [2], content="Renamed to green.", path="staging-cluster.md",
                    action="update"))  # fmt: skip

    result = await extractor.extract("s1", turns("staging is blue", "ok", "now it is green", "ok"))

    assert result.updated == ("staging-cluster.md",) and result.created == ()
    second = [r for r in local_server.requests if is_extraction(r)][1]
    assert offsets_in_prompt(second) == [2, 3]
    (doc,) = store.scan()
    assert doc.body == "Renamed to green."
    assert read_source_offsets(doc.path) == {"s1": (0, 2)}
    assert extractor.cursor("s1") == 4


async def test_no_new_turn_asks_nobody(
    store: FolderStore, side_model: OpenAIModel, side: SideModel, local_server: LocalServer
) -> None:
    """A slice with nothing unprocessed sends no side query."""
    extractor = MemoryExtractor(store, side_model)
    await extractor.extract("s1", turns("hello", "hi"))
    result = await extractor.extract("s1", turns("hello", "hi"))
    assert not result.asked_model
    assert len([r for r in local_server.requests if is_extraction(r)]) == 1


@pytest.mark.parametrize(
    "path",
    [
        "../outside.md",
        "/tmp/outside.md",
        "sub/../../outside.md",
        "~/outside.md",
        ".hidden.md",
        "MEMORY.md",
        "notes.txt",
        "link/escape.md",
    ],
)
async def test_a_proposal_naming_a_path_outside_the_folder_is_refused(
    store: FolderStore,
    side_model: OpenAIModel,
    side: SideModel,
    tmp_path: Path,
    path: str,
) -> None:
    """Scoped writes: a proposal whose path is not a memory file inside the folder is
    refused and nothing is written there; the other proposals still are."""
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, store.root / "link")
    side.add(
        memory("Escape", [0], path=path, action="update"),
        memory("Escape too", [0], path=path, action="create"),
        memory("Fine", [1]),
    )
    before = files_under(tmp_path)

    result = await MemoryExtractor(store, side_model).extract("s1", turns("a", "b"))

    assert [r.index for r in result.refused] == [0, 1]
    assert result.created == ("fine.md",)
    after = files_under(tmp_path)
    new = {p for p in after if p not in before}
    assert all(p.is_relative_to(store.root) or ".state" in str(p) for p in new), new
    assert not list(outside.iterdir())
    assert [d.name for d in store.scan()] == ["Fine"]


def test_validation_applies_save_memory_rules_and_extraction_limits(store: FolderStore) -> None:
    """Unknown type, empty name, oversize content, offsets outside the slice, no offsets,
    a second write to one memory and proposals past the limit are each refused."""
    good = memory("Good", [0])
    answer = {
        "memories": [
            good,
            {**memory("Bad type", [0]), "type": "secret"},
            {**memory("", [0])},
            {**memory("Huge", [0]), "content": "x" * 9000},
            memory("Stray", [7]),
            memory("Uncited", []),
            memory("Good", [1]),
            *[memory(f"Extra {i}", [0]) for i in range(MAX_PROPOSALS)],
        ]
    }
    accepted, refused = validate_proposals(answer, root=store.root, docs=[], offsets=[0, 1])
    assert [p.name for p in accepted] == ["Good", *[f"Extra {i}" for i in range(7)]]
    reasons = [r.reason for r in refused]
    assert "invalid memory type" in reasons[0]
    assert "non-empty name" in reasons[1]
    assert "over 8000" in reasons[2]
    assert "not turns of this slice" in reasons[3]
    assert "no source_offsets" in reasons[4]
    assert "same memory" in reasons[5]
    assert "more than" in reasons[6]


def test_an_answer_that_is_not_the_shape_is_a_protocol_error(store: FolderStore) -> None:
    from asyncrecall import ModelProtocolError

    for answer in ({"selected_memories": []}, [], "not json", {"memories": "x"}):
        with pytest.raises(ModelProtocolError):
            validate_proposals(answer, root=store.root, docs=[], offsets=[0])


async def test_a_failing_side_model_raises_and_leaves_the_cursor(
    store: FolderStore, side_model: OpenAIModel, side: SideModel
) -> None:
    """An HTTP 500 propagates as a ModelError; nothing is written, the cursor stays."""
    side.add_reply(Reply(status=500, error_message="boom"))
    extractor = MemoryExtractor(store, side_model)
    with pytest.raises(ModelError):
        await extractor.extract("s1", turns("a", "b"))
    assert extractor.cursor("s1") == 0 and store.scan() == []


async def test_cancelling_during_the_side_query_hangs_it_up_and_leaves_the_cursor(
    store: FolderStore, side_model: OpenAIModel, side: SideModel, local_server: LocalServer
) -> None:
    """Cancelled mid-query: the HTTP connection closes, no file, cursor unchanged."""
    side.add(memory("Never", [0]), gate=threading.Event())
    extractor = MemoryExtractor(store, side_model)
    task = asyncio.create_task(extractor.extract("s1", turns("a", "b")))
    request = await local_server.await_for(is_extraction, timeout=HANG_GUARD)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await local_server.await_disconnected(request, timeout=HANG_GUARD)
    assert extractor.cursor("s1") == 0 and store.scan() == []


def test_the_scan_reads_files_with_source_offsets(store: FolderStore) -> None:
    """A topic file with the extra front matter key is a normal memory for the scan."""
    offsets = {"source_offsets": {"s": [1]}}
    doc = store.save_memory("With offsets", "d", "user", "body", extra=offsets, origin="user")
    text = doc.path.read_text()
    assert "source_offsets:" in text
    (scanned,) = store.scan()
    assert (scanned.name, scanned.type, scanned.body) == ("With offsets", "user", "body")
    assert read_source_offsets(scanned.path) == {"s": (1,)}


async def test_an_ended_sessions_cursor_file_is_removed_unless_a_journal_waits(
    store: FolderStore, side_model: OpenAIModel, side: SideModel
) -> None:
    """``end_session`` removes the session's cursor file (it will never extract again);
    a session whose journal still waits to be rolled forward keeps its cursor."""
    from asyncrecall.memory.extraction._state import ExtractionState, Journal

    side.add(memory("Staging cluster", [0, 1], content="The staging cluster is blue."))
    extractor = MemoryExtractor(store, side_model)
    await extractor.extract("s1", turns("the staging cluster is blue", "noted"))
    assert extractor.state_dir is not None
    state = ExtractionState(extractor.state_dir)
    state.set_cursor("s2", 2)
    state.write_journal(Journal("s2", 2, 4, ()))
    assert state.cursor_path("s1").is_file()

    assert extractor.end_session("s1") and not extractor.end_session("s2")

    assert not state.cursor_path("s1").exists() and extractor.cursor("s1") == 0
    assert state.cursor("s2") == 2 and state.journal("s2") is not None

"""The same store and recall behaviour on the folder and on PostgreSQL.

Every test here runs twice, on :class:`FolderStore` (a temporary folder) and on
:class:`PostgresStore` (a fresh namespace of the session's cluster), through
:class:`Store` only.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from asyncrecall import CancelSignal, MemoryStoreError
from asyncrecall.memory import (
    EMPTY_RECALL,
    INDEX_MAX_LINES,
    FolderStore,
    LexicalSelector,
    ModelSelector,
    Recaller,
    Store,
    format_memory_block,
)
from asyncrecall.testing import ScriptedModel

NOW = 1_750_000_000.0


@pytest.fixture(params=["folder", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "folder":
        return FolderStore(tmp_path / "memory")
    found: Store = request.getfixturevalue("pg_store")
    return found


@pytest.fixture
def filled(store: Store) -> Store:
    """Three memories, saved oldest first: Deploy, Style, Database."""
    store.save_memory("Deploy", "deploys", "project", "staging first", origin="user")
    store.save_memory("Style", "code style", "feedback", "ruff, mypy", origin="user")
    store.save_memory("Database", "testing the db", "project", "Use real Postgres.", origin="user")
    return store


def _manager(store: Store, model: ScriptedModel) -> Recaller:
    return Recaller(store, ModelSelector(model), clock=lambda: NOW)


def test_the_store_satisfies_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)


def test_save_get_scan_and_forget(filled: Store) -> None:
    """Newest first; a memory is found by rel path, name, name in any case, or stem."""
    assert [d.name for d in filled.scan()] == ["Database", "Style", "Deploy"]
    assert [d.rel_path for d in filled.scan(limit=2)] == ["database.md", "style.md"]
    for key in ("database.md", "Database", "DATABASE", " database "):
        doc = filled.get(key)
        assert (doc.name, doc.description, doc.type) == ("Database", "testing the db", "project")
        assert doc.body == "Use real Postgres."
    removed = filled.forget("Style")
    assert removed.rel_path == "style.md"
    assert [d.name for d in filled.scan(limit=None)] == ["Database", "Deploy"]
    with pytest.raises(MemoryStoreError, match="no memory named 'Style'"):
        filled.get("Style")
    with pytest.raises(MemoryStoreError, match="no memory named"):
        filled.forget("Style")


def test_an_update_keeps_the_file_name_and_becomes_newest(filled: Store) -> None:
    doc = filled.save_memory(
        "Deploy", "deploys, again", "reference", "prod on Fridays? no", origin="user"
    )
    assert doc.rel_path == "deploy.md"
    assert [d.name for d in filled.scan()] == ["Deploy", "Database", "Style"]
    assert filled.get("deploy.md").body == "prod on Fridays? no"
    assert len(filled.scan(limit=None)) == 3


def test_names_with_one_file_name_get_two_files(store: Store) -> None:
    first = store.save_memory("Foo bar", "", "user", "one", origin="user")
    second = store.save_memory("foo-bar", "", "user", "two", origin="user")
    assert first.rel_path == "foo-bar.md"
    assert second.rel_path != first.rel_path and second.rel_path.startswith("foo-bar-")
    assert store.get("Foo bar").body == "one" and store.get("foo-bar").body == "two"


def test_the_index_lists_every_memory_once(filled: Store) -> None:
    filled.save_memory("Style", "code style, updated", "feedback", "ruff", origin="user")
    assert filled.index_for_prompt().splitlines() == [
        "- [Deploy](deploy.md) — deploys",
        "- [Style](style.md) — code style, updated",
        "- [Database](database.md) — testing the db",
    ]
    filled.forget("deploy.md")
    assert "deploy.md" not in filled.index_for_prompt()


def test_a_long_index_is_cut_with_a_warning(store: Store) -> None:
    for number in range(INDEX_MAX_LINES + 5):
        store.save_memory(f"Note {number:03d}", "a note", "project", "x", origin="user")
    text = store.index_for_prompt()
    lines = text.splitlines()
    assert lines[0] == "- [Note 000](note-000.md) — a note"
    assert lines[INDEX_MAX_LINES - 1].startswith("- [Note 199]")
    assert f"MEMORY.md is {INDEX_MAX_LINES + 5} lines" in lines[-1]
    assert f"only the first {INDEX_MAX_LINES} lines" in lines[-1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("  ", "", "user", "x"), "non-empty name"),
        (("N", "", "opinion", "x"), "invalid memory type"),
        (("Big", "", "user", "x" * (1024 * 1024)), "over 1 MiB"),
        # 501 characters, 1,002 bytes: the limit is the database's unit, bytes.
        (("é" * 501, "", "user", "x"), "at most 1,000 bytes in UTF-8; this one is 1,002"),
        (("Half \ud83d pair", "", "user", "x"), "name holds a lone surrogate .U.D83D"),
        (("N", "half \udc00", "user", "x"), "description holds a lone surrogate .U.DC00"),
        (("N", "", "user", "body \udfff"), "'N' holds a lone surrogate .U.DFFF at character 5"),
    ],
)
def test_bad_input_is_rejected_and_nothing_is_written(
    store: Store, args: tuple[str, str, str, str], message: str
) -> None:
    with pytest.raises(MemoryStoreError, match=message):
        store.save_memory(*args)
    assert store.scan(limit=None) == []


async def test_an_empty_store_recalls_nothing_and_asks_nobody(
    store: Store,
) -> None:
    model = ScriptedModel()
    assert await _manager(store, model).recall("database") is EMPTY_RECALL
    assert model.json_started == 0


async def test_the_lexical_selector_finds_the_memory(filled: Store) -> None:
    manager = Recaller(filled, LexicalSelector(), clock=lambda: NOW)
    result = await manager.recall("which database do the tests use?")
    assert result.strategy == "lexical"
    assert result.paths[0] == "database.md"
    assert "Use real Postgres." in result.prompt


async def test_model_selection_builds_the_block(filled: Store) -> None:
    model = ScriptedModel(name="side")
    model.add_json({"selected_memories": ["deploy.md", "database.md"]})
    result = await _manager(filled, model).recall("how do we ship?")
    assert (result.strategy, result.paths) == ("model", ("deploy.md", "database.md"))
    assert result.prompt == format_memory_block(result.selected, now=NOW)


async def test_excluded_paths_are_never_offered(filled: Store) -> None:
    model = ScriptedModel()
    model.add_json({"selected_memories": []})
    await _manager(filled, model).recall("anything", excluded_paths={"database.md"})
    prompt = model.json_requests[0].prompt
    assert "deploy.md" in prompt and "style.md" in prompt and "database.md" not in prompt
    every = {"database.md", "style.md", "deploy.md"}
    assert await _manager(filled, model).recall("x", excluded_paths=every) is EMPTY_RECALL


async def test_an_invalid_answer_falls_back_to_lexical(
    filled: Store, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel()
    model.add_json({"selected_memories": ["invented.md"]})
    with caplog.at_level(logging.WARNING, logger="asyncrecall.memory"):
        result = await _manager(filled, model).recall("postgres database")
    assert result.strategy == "lexical" and result.paths[0] == "database.md"
    assert result.fallback_reason is not None and "not offered" in result.fallback_reason


async def test_our_cancel_returns_empty(filled: Store) -> None:
    model = ScriptedModel()
    model.add_json({"selected_memories": ["database.md"]}, gate=asyncio.Event())
    cancel = CancelSignal()
    task = asyncio.create_task(_manager(filled, model).recall("database", cancel=cancel))
    async with asyncio.timeout(10):
        await model.wait_until(lambda m: m.json_started == 1)
    cancel.cancel()
    async with asyncio.timeout(5):
        assert await task is EMPTY_RECALL
    assert model.json_cancelled == 1


async def test_a_cancellation_we_did_not_issue_propagates(filled: Store) -> None:
    model = ScriptedModel()
    model.add_json({"selected_memories": ["database.md"]}, gate=asyncio.Event())
    task = asyncio.create_task(_manager(filled, model).recall("database"))
    async with asyncio.timeout(10):
        await model.wait_until(lambda m: m.json_started == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.json_cancelled == 1


def test_a_name_of_the_largest_size_is_saved_found_and_forgotten(
    store: Store,
) -> None:
    """1,000 bytes of UTF-8 (500 two-byte letters) is a name every store takes whole."""
    name = "é" * 500
    doc = store.save_memory(name, "the longest name", "user", "body", origin="user")
    assert store.get(name).name == name == doc.name
    assert store.forget(name).name == name
    assert store.scan(limit=None) == []


def test_odd_characters_in_names_are_data(store: Store) -> None:
    name = "Robert'); DROP TABLE asyncrecall_memories; -- ünïcode"
    doc = store.save_memory(
        name, "quotes ' \" and \\ backslashes", "user", "body; --", origin="user"
    )
    assert store.get(name).description == "quotes ' \" and \\ backslashes"
    assert [d.rel_path for d in store.scan()] == [doc.rel_path]

"""Recall: when it asks nobody, what it offers, validation, fallback and cancellation.

The side model here is the in-process :class:`~asyncrecall.testing.ScriptedModel`;
``selectors/test_model_selector.py`` repeats the important cases over real HTTP.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import warnings
from pathlib import Path

import pytest

from asyncrecall import CancelSignal, ModelServerError
from asyncrecall.memory import (
    EMPTY_RECALL,
    FolderStore,
    LexicalSelector,
    MemoryDoc,
    ModelSelector,
    Recaller,
    format_memory_block,
)
from asyncrecall.testing import ScriptedModel

from .conftest import WriteFile, topic

NOW = 1_750_000_000.0


@pytest.fixture
def manager_parts(store: FolderStore, write: WriteFile) -> tuple[FolderStore, ScriptedModel]:
    write(
        "db.md",
        topic("Database", description="testing the db", body="Use real Postgres."),
        mtime=NOW - 10,
    )
    write("style.md", topic("Style", description="code style", body="ruff, mypy"), mtime=NOW - 20)
    write(
        "sub/deploy.md",
        topic("Deploy", description="deploys", body="staging first"),
        mtime=NOW - 30,
    )
    return store, ScriptedModel(name="side")


def _manager(store: FolderStore, model: ScriptedModel, **kw: object) -> Recaller:
    return Recaller(store, ModelSelector(model, **kw), clock=lambda: NOW)  # type: ignore[arg-type]


def _memory_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("asyncrecall.memory")]


@pytest.mark.parametrize(
    ("query", "kwargs"),
    [
        ("", {}),
        ("   \n", {}),
        ("database", {"limit": 0}),
        ("database", {"excluded_paths": ["db.md", "style.md", "sub/deploy.md"]}),
    ],
)
async def test_nothing_to_do_is_empty_and_asks_nobody(
    manager_parts: tuple[FolderStore, ScriptedModel], query: str, kwargs: dict[str, object]
) -> None:
    """Blank query, limit 0, or no document left: EMPTY_RECALL and no side query."""
    store, model = manager_parts
    result = await _manager(store, model).recall(query, **kwargs)  # type: ignore[arg-type]
    assert result is EMPTY_RECALL
    assert model.json_started == 0


async def test_an_empty_folder_is_empty_and_asks_nobody(tmp_path: Path) -> None:
    model = ScriptedModel()
    assert await _manager(FolderStore(tmp_path / "none"), model).recall("x") is EMPTY_RECALL
    assert model.json_started == 0


async def test_model_selection_builds_the_block(
    manager_parts: tuple[FolderStore, ScriptedModel],
) -> None:
    store, model = manager_parts
    model.add_json({"selected_memories": ["sub/deploy.md", "db.md"]})
    result = await _manager(store, model).recall("how do we ship?")
    assert result.strategy == "model" and result.fallback_reason is None
    assert result.paths == ("sub/deploy.md", "db.md")
    assert result.prompt == format_memory_block(result.selected, now=NOW)
    request = model.json_requests[0]
    assert request.schema_name == "memory_selection"
    assert request.schema["properties"]["selected_memories"]["maxItems"] == 5
    assert "how do we ship?" in request.prompt


async def test_an_empty_model_choice_is_an_empty_prompt(
    manager_parts: tuple[FolderStore, ScriptedModel],
) -> None:
    store, model = manager_parts
    model.add_json({"selected_memories": []})
    result = await _manager(store, model).recall("unrelated")
    assert (result.prompt, result.selected, result.strategy) == ("", (), "model")


async def test_excluded_paths_are_never_offered(
    manager_parts: tuple[FolderStore, ScriptedModel],
) -> None:
    """The manifest holds one line per offered file and none for excluded ones; no bodies."""
    store, model = manager_parts
    model.add_json({"selected_memories": []})
    await _manager(store, model).recall("anything", excluded_paths={"db.md"}, limit=2)
    prompt = model.json_requests[0].prompt
    assert "sub/deploy.md" in prompt and "style.md" in prompt
    assert "db.md" not in prompt
    assert "staging first" not in prompt  # bodies never go to the side query
    assert model.json_requests[0].schema["properties"]["selected_memories"]["maxItems"] == 2


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"selected_memories": ["invented.md"]}, "not offered"),
        ({"selected_memories": ["db.md", "style.md", "sub/deploy.md"]}, "limit is 2"),
        ({"selected_memories": "db.md"}, "malformed"),
        ({"selected_memories": [1]}, "malformed"),
        ({"wrong": []}, "malformed"),
        (["db.md"], "malformed"),
        ("not json", "malformed"),
    ],
)
async def test_an_invalid_answer_falls_back_to_lexical_with_one_warning(
    manager_parts: tuple[FolderStore, ScriptedModel],
    caplog: pytest.LogCaptureFixture,
    answer: object,
    reason: str,
) -> None:
    """Unknown path, too many paths, malformed: SelectorError, then the lexical fallback."""
    store, model = manager_parts
    model.add_json(answer)
    with caplog.at_level(logging.WARNING, logger="asyncrecall.memory"):
        result = await _manager(store, model).recall("testing the database", limit=2)
    assert result.strategy == "lexical"
    assert result.fallback_reason is not None and "SelectorError" in result.fallback_reason
    assert reason in result.fallback_reason
    assert result.paths[0] == "db.md"
    warnings = _memory_warnings(caplog)
    assert len(warnings) == 1 and "fell back to the lexical selector" in warnings[0]


async def test_a_model_error_falls_back_to_lexical(
    manager_parts: tuple[FolderStore, ScriptedModel], caplog: pytest.LogCaptureFixture
) -> None:
    store, model = manager_parts
    model.add_json(error=ModelServerError("HTTP 500 from the endpoint"))
    with caplog.at_level(logging.WARNING, logger="asyncrecall.memory"):
        result = await _manager(store, model).recall("code style")
    assert (result.strategy, result.paths) == ("lexical", ("style.md",))
    assert (
        result.fallback_reason
        == "model selector failed: ModelServerError: HTTP 500 from the endpoint"
    )
    assert len(_memory_warnings(caplog)) == 1


async def test_without_a_fallback_a_failure_is_an_empty_result(
    manager_parts: tuple[FolderStore, ScriptedModel], caplog: pytest.LogCaptureFixture
) -> None:
    store, model = manager_parts
    model.add_json(error=ModelServerError("down"))
    with caplog.at_level(logging.WARNING, logger="asyncrecall.memory"):
        result = await _manager(store, model, fallback=None).recall("code style")
    assert (result.prompt, result.selected, result.strategy) == ("", (), "none")
    assert result.fallback_reason is not None and "down" in result.fallback_reason
    assert len(_memory_warnings(caplog)) == 1


async def test_the_old_timeout_is_only_an_option(
    manager_parts: tuple[FolderStore, ScriptedModel],
) -> None:
    """No timeout by default; ``timeout=`` (the old baseline) turns a slow answer into a failure."""
    store, model = manager_parts
    assert ModelSelector(model).timeout is None
    model.add_json({"selected_memories": []}, gate=asyncio.Event())  # never released
    result = await _manager(store, model, timeout=0.01).recall("code style")
    assert result.strategy == "lexical"
    assert result.fallback_reason is not None and "timed out after 0.01 s" in result.fallback_reason
    assert model.json_cancelled == 1


async def test_our_cancel_stops_the_side_query_and_returns_empty_silently(
    manager_parts: tuple[FolderStore, ScriptedModel], caplog: pytest.LogCaptureFixture
) -> None:
    """The caller's signal cancels the selector's task (drained), EMPTY_RECALL, nothing logged."""
    store, model = manager_parts
    model.add_json({"selected_memories": ["db.md"]}, gate=asyncio.Event())
    cancel = CancelSignal()
    with caplog.at_level(logging.DEBUG, logger="asyncrecall"):
        task = asyncio.create_task(_manager(store, model).recall("database", cancel=cancel))
        async with asyncio.timeout(5):
            await model.wait_until(lambda m: m.json_started == 1)
        assert cancel.listener_count() == 1
        cancel.cancel()
        async with asyncio.timeout(5):
            result = await task
    assert result is EMPTY_RECALL
    assert model.json_cancelled == 1 and model.json_finished == 0
    assert cancel.listener_count() == 0
    assert _memory_warnings(caplog) == []


async def test_an_already_cancelled_signal_asks_nobody(
    manager_parts: tuple[FolderStore, ScriptedModel],
) -> None:
    store, model = manager_parts
    cancel = CancelSignal()
    cancel.cancel()
    assert await _manager(store, model).recall("database", cancel=cancel) is EMPTY_RECALL
    assert model.json_started == 0


async def test_a_signal_before_the_selector_s_task_first_runs_returns_empty(
    manager_parts: tuple[FolderStore, ScriptedModel],
) -> None:
    """A signal that fires after recall started the selector's task but before that task
    ran a step: recall still returns EMPTY_RECALL (it does not wait forever), the
    selector is never asked, and its never-started coroutine is closed (no "never
    awaited" warning)."""
    store, model = manager_parts
    store.scan()  # warm: recall reaches the selector's task without suspending
    cancel = CancelSignal()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = asyncio.create_task(_manager(store, model).recall("database", cancel=cancel))
        asyncio.get_running_loop().call_soon(cancel.cancel)  # right after recall's first step
        async with asyncio.timeout(10):
            assert await task is EMPTY_RECALL
        gc.collect()
    assert model.json_started == 0
    assert cancel.listener_count() == 0
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


async def test_the_bridge_is_removed_once_recall_settles(
    manager_parts: tuple[FolderStore, ScriptedModel],
) -> None:
    store, model = manager_parts
    model.add_json({"selected_memories": ["db.md"]})
    cancel = CancelSignal()
    result = await _manager(store, model).recall("database", cancel=cancel)
    assert result.paths == ("db.md",)
    assert cancel.listener_count() == 0
    cancel.cancel()  # too late to matter, and nothing breaks


async def test_a_cancellation_we_did_not_issue_propagates(
    manager_parts: tuple[FolderStore, ScriptedModel],
) -> None:
    """Cancelling the task running recall cancels and drains the side query, then re-raises."""
    store, model = manager_parts
    model.add_json({"selected_memories": ["db.md"]}, gate=asyncio.Event())
    cancel = CancelSignal()
    task = asyncio.create_task(_manager(store, model).recall("database", cancel=cancel))
    async with asyncio.timeout(5):
        await model.wait_until(lambda m: m.json_started == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert model.json_cancelled == 1
    assert cancel.listener_count() == 0


async def test_a_selector_can_be_chosen_per_call(
    manager_parts: tuple[FolderStore, ScriptedModel],
) -> None:
    store, model = manager_parts
    result = await _manager(store, model).recall("deploys", selector=LexicalSelector())
    assert (result.strategy, result.paths) == ("lexical", ("sub/deploy.md",))
    assert model.json_started == 0


async def test_a_lexical_manager_needs_no_model(store: FolderStore, write: WriteFile) -> None:
    write("a.md", topic("Tea", body="Alice drinks tea"), mtime=NOW - 3 * 86_400)
    manager = Recaller(store, LexicalSelector(), clock=lambda: NOW)
    result = await manager.recall("what does alice drink")
    assert (result.strategy, result.paths) == ("lexical", ("a.md",))
    assert "Saved 3 days ago" in result.prompt and "point-in-time" in result.prompt


async def test_a_cancel_during_the_scan_returns_at_once(
    manager_parts: tuple[FolderStore, ScriptedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow (cold) scan does not hold up a cancelled recall; no side query is sent."""
    store, model = manager_parts
    started, release = threading.Event(), threading.Event()
    real_scan = store.scan

    def slow_scan(**kwargs: object) -> list[MemoryDoc]:
        started.set()
        release.wait(10)
        return real_scan()

    monkeypatch.setattr(store, "scan", slow_scan)
    cancel = CancelSignal()
    try:
        task = asyncio.create_task(_manager(store, model).recall("database", cancel=cancel))
        assert await asyncio.to_thread(started.wait, 5)
        cancel.cancel()
        async with asyncio.timeout(5):
            assert await task is EMPTY_RECALL
        assert not release.is_set() and model.json_started == 0
    finally:
        release.set()

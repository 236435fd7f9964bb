"""Recall's budgets, one guarantee per test: files per user message, the
model's pick over the instant pass, bytes per session, the per-file cap, the model
selector's manifest, and no recall for a prompt with nothing to recall.

A real memory folder, the scripted side model; each budget's event is checked too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from asyncrecall.memory import (
    FolderStore,
    LexicalSelector,
    ModelSelector,
    Recaller,
    nothing_to_recall,
)
from asyncrecall.prefetch import (
    INSTANT_STRATEGY,
    MemoryBudgetEvent,
    MemoryInjectedEvent,
    MemoryInstantPreemptedEvent,
    MemoryRecallSkippedEvent,
    PrefetchEvent,
    RecallPrefetcher,
)
from asyncrecall.testing import ScriptedModel

from .conftest import pick_beside_instant_pass, selection, settle

KEY = "thread-1"

#: Memories beside the three shared ones, so a recall can pick more than a budget allows.
EXTRA = tuple(
    (f"staging-note-{i}", "project", f"staging cluster deploy note {i}", f"Deploy detail {i}.")
    for i in range(6)
)


@pytest.fixture
def big_store(store: FolderStore) -> FolderStore:
    for name, kind, description, body in EXTRA:
        store.save_memory(name, description, kind, body, origin="user")
    return store


def _of(events: list[PrefetchEvent], kind: type[PrefetchEvent]) -> list[PrefetchEvent]:
    return [e for e in events if isinstance(e, kind)]


async def test_one_message_gets_at_most_limit_files_across_instant_pass_and_model_pick(
    big_store: FolderStore, side: ScriptedModel
) -> None:
    """The instant pass and the model's pick together put at most ``limit`` files in
    front of the model for one user message; what the pick had beyond that is left out
    (``memory_budget``, ``message_files``) and may come with a later message."""
    query = "how do deploys reach the staging cluster?"
    scanned = big_store.scan()
    instant = {d.rel_path for d in LexicalSelector().rank(query, scanned, limit=2)}
    picked = [d.rel_path for d in scanned if d.rel_path not in instant][:3]
    events: list[PrefetchEvent] = []
    gate = asyncio.Event()
    side.add_json(selection(*picked), gate=gate)
    async with RecallPrefetcher(
        Recaller(big_store, ModelSelector(side)),
        limit=3,
        instant_selector=LexicalSelector(),
        instant_limit=2,
        on_event=events.append,
    ) as prefetcher:
        await prefetcher.warm()
        prefetcher.start(KEY, query)
        first = prefetcher.take(KEY, "user_query")
        gate.set()
        await settle(prefetcher, KEY)
        later = prefetcher.take(KEY, "tool_result")

    assert first is not None and first.strategy == INSTANT_STRATEGY
    assert set(first.paths) == instant
    assert later is not None and later.paths == tuple(picked[:1])
    (budget,) = _of(events, MemoryBudgetEvent)
    assert isinstance(budget, MemoryBudgetEvent)
    assert budget.budget == "message_files" and budget.limit == 3
    assert budget.paths == tuple(picked[1:]) and budget.count == 2
    assert budget.to_dict()["type"] == "memory_budget"


async def test_a_settled_model_pick_wins_over_the_instant_pass(
    store: FolderStore, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """When both are ready at the user-query point, the model's pick goes in and the
    instant pass's files do not (``memory_instant_preempted``): a pick that settled
    in time is never thrown away for the pass."""
    events: list[PrefetchEvent] = []
    side.add_json(selection(paths["user-role"]))
    async with pick_beside_instant_pass(store, side, events) as prefetcher:
        await prefetcher.warm()
        prefetcher.start(KEY, "how do deploys reach the staging cluster?")
        await settle(prefetcher, KEY)  # the pick settles a few ms after the pass
        block = prefetcher.take(KEY, "user_query")

    assert block is not None and block.strategy == "model"
    assert block.paths == (paths["user-role"],)
    preempted = _of(events, MemoryInstantPreemptedEvent)
    assert len(preempted) == 1 and isinstance(preempted[0], MemoryInstantPreemptedEvent)
    assert paths["deploy-flow"] in preempted[0].paths and preempted[0].strategy == "model"
    assert paths["deploy-flow"] not in block.text


async def test_recall_stops_once_the_session_byte_budget_is_spent(
    big_store: FolderStore, side: ScriptedModel
) -> None:
    """Blocks count against the conversation's ``session_bytes``; a file that does not
    fit is left out (``memory_budget``, ``session_bytes``), and from then on no recall
    starts (``memory_recall_skipped``, ``session_budget``: no side query) until reset."""
    docs = {d.name: d.rel_path for d in big_store.scan()}
    events: list[PrefetchEvent] = []
    manager = Recaller(big_store, ModelSelector(side))
    one = len(manager.format_block([d for d in big_store.scan() if d.name == "user-role"]))
    async with RecallPrefetcher(
        manager, session_bytes=one + 200, on_event=events.append
    ) as prefetcher:
        side.add_json(selection(docs["user-role"]))
        prefetcher.start(KEY, "what is my role here?")
        await settle(prefetcher, KEY)
        first = prefetcher.take(KEY, "user_query")
        side.add_json(selection(docs["deploy-flow"], docs["db-testing"]))
        prefetcher.start(KEY, "how do deploys and tests work?")
        await settle(prefetcher, KEY)
        second = prefetcher.take(KEY, "user_query")
        started = side.json_started
        assert prefetcher.start(KEY, "and the staging cluster?") is False
        assert side.json_started == started and prefetcher.pending(KEY) is None
        prefetcher.reset(KEY)
        side.add_json(selection(docs["deploy-flow"]))
        assert prefetcher.start(KEY, "how do deploys work?")  # a new conversation
        await settle(prefetcher, KEY)
        again = prefetcher.take(KEY, "user_query")

    assert first is not None and first.paths == (docs["user-role"],)
    assert second is None
    (budget,) = _of(events, MemoryBudgetEvent)
    assert isinstance(budget, MemoryBudgetEvent) and budget.budget == "session_bytes"
    assert budget.paths == (docs["deploy-flow"], docs["db-testing"])
    assert budget.limit == one + 200
    skipped = _of(events, MemoryRecallSkippedEvent)
    assert [e.to_dict()["reason"] for e in skipped] == ["session_budget"]
    assert again is not None and again.paths == (docs["deploy-flow"],)


async def test_a_long_file_is_cut_with_a_note_naming_it(tmp_path: Path) -> None:
    """A body longer than the file cap (characters or lines) goes in cut, with a note
    naming the file so the model can read the rest (``memory_budget``, ``file``)."""
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    store.save_memory("runbook", "the release runbook", "project", "step\n" * 50, origin="user")
    store.save_memory("glossary", "terms of the release", "project", "r" * 900, origin="user")
    docs = {d.name: d for d in store.scan()}
    events: list[PrefetchEvent] = []
    manager = Recaller(store, LexicalSelector(), file_chars=500, file_lines=10)
    async with RecallPrefetcher(manager, on_event=events.append) as prefetcher:
        await prefetcher.warm()
        prefetcher.start(KEY, "what does the release runbook and glossary say?")
        block = prefetcher.take(KEY, "user_query")

    assert block is not None and set(block.paths) == {"runbook.md", "glossary.md"}
    runbook, glossary = docs["runbook"], docs["glossary"]
    assert f"[Cut at 10 of 50 lines; the full memory is in {runbook.path}]" in block.text
    assert "step\n" * 10 in block.text and "step\n" * 11 not in block.text
    assert f"[Cut at 500 of 900 characters; the full memory is in {glossary.path}]" in block.text
    assert "r" * 501 not in block.text
    (budget,) = _of(events, MemoryBudgetEvent)
    assert isinstance(budget, MemoryBudgetEvent) and budget.budget == "file"
    assert set(budget.paths) == {"runbook.md", "glossary.md"} and budget.limit == 500


async def test_the_model_selectors_manifest_is_bounded(
    big_store: FolderStore, side: ScriptedModel
) -> None:
    """The side query lists at most ``manifest_files`` candidates within
    ``manifest_bytes``; the rest are counted (``memory_budget``, ``manifest``)."""
    events: list[PrefetchEvent] = []
    offered = big_store.scan()
    side.add_json(selection())
    side.add_json(selection())
    selector = ModelSelector(side, manifest_files=4)
    async with RecallPrefetcher(
        Recaller(big_store, selector), on_event=events.append
    ) as prefetcher:
        prefetcher.start(KEY, "how do deploys reach the staging cluster?")
        await settle(prefetcher, KEY)
        prefetcher.take(KEY, "user_query")
        selector.manifest_files, selector.manifest_bytes = 200, 160
        prefetcher.start(KEY, "how do deploys reach the staging cluster now?")
        await settle(prefetcher, KEY)
        prefetcher.take(KEY, "user_query")

    first, second = (r.prompt for r in side.json_requests)
    listed = [d.rel_path for d in offered if d.rel_path in first]
    assert listed == [d.rel_path for d in offered[:4]]
    manifest = second.split("\n\nQuery:")[0].split(":\n", 1)[1]
    assert 0 < len(manifest.encode()) <= 160
    counts = [e.count for e in _of(events, MemoryBudgetEvent) if isinstance(e, MemoryBudgetEvent)]
    assert counts == [len(offered) - 4, len(offered) - manifest.count("\n") - 1]
    assert [e.to_dict()["budget"] for e in _of(events, MemoryBudgetEvent)] == ["manifest"] * 2
    assert [e.to_dict()["limit"] for e in _of(events, MemoryBudgetEvent)] == [4, 200]


@pytest.mark.parametrize(
    "prompt",
    [
        "ok",
        "OK!",
        "yes",
        "Ｏｋ",
        "thanks.",
        "ok thanks",
        "deploy?",
        "好的",
        "はい",
        "数",
        "да",
        "ขอบคุณครับ",
        "โอเค",
    ],
)
def test_prompts_with_nothing_to_recall(prompt: str) -> None:
    """One word, or a bare acknowledgement, has nothing to recall."""
    assert nothing_to_recall(prompt)


@pytest.mark.parametrize(
    "prompt",
    [
        "how do I deploy?",
        "数据库",
        "数据库在哪里",
        "データベース",
        "staging deploys",
        "是什么数据库",
        "ผมใช้ตัวแก้ไขอะไร",  # Thai: "which editor do I use"
        "ເຄື່ອງແມ່ຂ່າຢູ່ໃສ",  # Lao: "where is the server"
        "ဆာဗာဘယ်မှာလဲ",  # Burmese: "where is the server"
        "ម៉ាស៊ីនមេនៅឯណា",  # Khmer: "where is the server"
    ],
)
def test_prompts_with_something_to_recall(prompt: str) -> None:
    """Two words or more, where each letter of a script without spaces between words
    (CJK, Thai, Lao, Burmese, Khmer) counts as one."""
    assert not nothing_to_recall(prompt)


async def test_a_prompt_with_nothing_to_recall_starts_no_recall(
    store: FolderStore, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """With ``skip_trivial``, a bare "ok" starts no recall (no side query,
    ``memory_recall_skipped``, ``nothing_to_recall``); a CJK question of one
    space-free run does start one."""
    events: list[PrefetchEvent] = []
    manager = Recaller(store, ModelSelector(side), skip_trivial=True)
    async with RecallPrefetcher(manager, on_event=events.append) as prefetcher:
        assert prefetcher.start(KEY, "ok", prompt_id="p1") is False
        assert side.json_started == 0 and prefetcher.pending(KEY) is None
        side.add_json(selection(paths["db-testing"]))
        assert prefetcher.start(KEY, "数据库测试怎么做", prompt_id="p2")
        await settle(prefetcher, KEY)
        assert prefetcher.take(KEY, "user_query") is not None
    assert events[0].to_dict() == {
        "type": "memory_recall_skipped",
        "prompt_id": "p1",
        "reason": "nothing_to_recall",
        "detail": "too_short",
    }
    assert side.json_started == 1
    assert any(isinstance(e, MemoryInjectedEvent) for e in events)
    skipped = await manager.recall("ok")
    assert (skipped.selected, skipped.reason) == ((), "too_short")

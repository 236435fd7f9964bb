"""The guarantees of :class:`asyncrecall.prefetch.RecallPrefetcher`, one test each.

The side model is scripted in process (gates decide when a recall settles); the
hang-up over real HTTP is in ``test_http.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Collection

import pytest

from asyncrecall import CancelSignal, SelectorError
from asyncrecall.memory import FolderStore, LexicalSelector, MemoryDoc, ModelSelector, Recaller
from asyncrecall.prefetch import (
    INSTANT_STRATEGY,
    MemoryBlock,
    MemoryRecallEmptyEvent,
    PrefetchEvent,
    RecallNotReady,
    RecallPrefetcher,
    _prefetcher,
)
from asyncrecall.testing import ScriptedModel

from .conftest import EAGER_FACTORY, pick_beside_instant_pass, selection, settle

KEY = "thread-1"


async def test_take_never_waits_for_a_running_recall(
    prefetcher: RecallPrefetcher, side: ScriptedModel
) -> None:
    """take() returns None at once while the side query runs, and leaves the recall
    running: it is a plain function, never a coroutine, and never cancels."""
    side.add_json(selection(), gate=asyncio.Event())
    assert prefetcher.start(KEY, "how do I deploy?")
    await side.wait_until(lambda m: m.json_started == 1)

    assert not inspect.iscoroutinefunction(RecallPrefetcher.take)
    assert prefetcher.take(KEY, "user_query") is None
    handle = prefetcher.pending(KEY)
    assert handle is not None and not handle.settled and not handle.control.cancelled
    with pytest.raises(RecallNotReady):
        handle.result_nowait()


async def test_settled_recall_is_taken_once(
    prefetcher: RecallPrefetcher, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """A settled recall's block is returned by the first take, never by a later one."""
    side.add_json(selection(paths["db-testing"]))
    prefetcher.start(KEY, "how do I test the db layer?")
    await settle(prefetcher, KEY)

    block = prefetcher.take(KEY, "user_query")
    assert isinstance(block, MemoryBlock)
    assert block.point == "user_query" and block.paths == (paths["db-testing"],)
    assert "## Relevant memory" in block.text and block.strategy == "model"
    assert prefetcher.take(KEY, "tool_result") is None
    assert prefetcher.take(KEY, "user_query") is None
    assert prefetcher.pending(KEY) is None


async def test_a_recall_settling_late_is_taken_at_the_tool_result(
    prefetcher: RecallPrefetcher, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """Missed at the user query, the recall is still taken at the next tool result."""
    gate = asyncio.Event()
    side.add_json(selection(paths["deploy-flow"]), gate=gate)
    prefetcher.start(KEY, "deploy it")
    assert prefetcher.take(KEY, "user_query") is None
    gate.set()
    await settle(prefetcher, KEY)

    block = prefetcher.take(KEY, "tool_result")
    assert block is not None and block.point == "tool_result"
    assert block.paths == (paths["deploy-flow"],)


async def test_new_message_supersedes_the_previous_recall_of_the_key(
    prefetcher: RecallPrefetcher, side: ScriptedModel, events: list[PrefetchEvent]
) -> None:
    """start() on a key cancels that key's running recall (reason ``superseded``)."""
    side.add_json(selection(), gate=asyncio.Event())
    side.add_json(selection())
    prefetcher.start(KEY, "first question")
    await side.wait_until(lambda m: m.json_started == 1)
    first = prefetcher.pending(KEY)
    assert first is not None

    prefetcher.start(KEY, "second question")
    await side.wait_until(lambda m: m.json_cancelled == 1)
    await asyncio.wait({first.task})
    assert first.control.cancelled and first.task.cancelled()
    assert prefetcher.pending(KEY) is not first
    discarded = [e.to_dict() for e in events if e.type == "memory_discarded"]
    assert discarded == [{"type": "memory_discarded", "reason": "superseded", "settled": False}]


async def test_conversations_are_independent(
    prefetcher: RecallPrefetcher, side: ScriptedModel
) -> None:
    """Starting, taking or cancelling one key never touches another key's recall."""
    side.add_json(selection(), gate=asyncio.Event())
    side.add_json(selection(), gate=asyncio.Event())
    prefetcher.start("a", "question a")
    prefetcher.start("b", "question b")
    await side.wait_until(lambda m: m.json_started == 2)
    prefetcher.cancel("b")
    prefetcher.take("b", "user_query")
    prefetcher.start("b", "question b again")

    handle = prefetcher.pending("a")
    assert handle is not None and not handle.control.cancelled and not handle.task.done()


async def test_surfaced_files_are_not_offered_again_in_the_conversation(
    prefetcher: RecallPrefetcher, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """A file taken in a conversation is in its surfaced set and never offered to the
    selector again for that key; other keys still get it."""
    side.add_json(selection(paths["db-testing"]))
    side.add_json(selection())
    side.add_json(selection())
    prefetcher.start(KEY, "db tests?")
    await settle(prefetcher, KEY)
    assert prefetcher.take(KEY, "user_query") is not None
    assert prefetcher.surfaced(KEY) == {paths["db-testing"]}

    prefetcher.start(KEY, "db tests again?")
    prefetcher.start("other", "db tests elsewhere?")
    await side.wait_until(lambda m: m.json_started == 3)
    assert paths["db-testing"] not in side.json_requests[1].prompt
    assert paths["deploy-flow"] in side.json_requests[1].prompt
    assert paths["db-testing"] in side.json_requests[2].prompt


async def test_reset_cancels_and_forgets_the_surfaced_files(
    prefetcher: RecallPrefetcher, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """reset() cancels the key's recall (``reset``) and empties its surfaced set."""
    side.add_json(selection(paths["db-testing"]))
    side.add_json(selection(), gate=asyncio.Event())
    prefetcher.start(KEY, "db tests?")
    await settle(prefetcher, KEY)
    prefetcher.take(KEY, "user_query")
    prefetcher.start(KEY, "more")
    await side.wait_until(lambda m: m.json_started == 2)

    prefetcher.reset(KEY)
    await side.wait_until(lambda m: m.json_cancelled == 1)
    assert prefetcher.surfaced(KEY) == frozenset()
    assert prefetcher.pending(KEY) is None


async def test_unsurface_gives_files_back(
    prefetcher: RecallPrefetcher, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """unsurface() takes files back out of the surfaced set (their request never went)."""
    side.add_json(selection(paths["db-testing"], paths["user-role"]))
    prefetcher.start(KEY, "db tests?")
    await settle(prefetcher, KEY)
    prefetcher.take(KEY, "user_query")

    prefetcher.unsurface(KEY, [paths["db-testing"]])
    assert prefetcher.surfaced(KEY) == {paths["user-role"]}


async def test_cancel_stops_the_side_query(
    prefetcher: RecallPrefetcher, side: ScriptedModel, events: list[PrefetchEvent]
) -> None:
    """cancel() cancels the running side query and reports why; a later take is None."""
    side.add_json(selection(), gate=asyncio.Event())
    prefetcher.start(KEY, "question")
    await side.wait_until(lambda m: m.json_started == 1)

    prefetcher.cancel(KEY, "turn_ended")
    await side.wait_until(lambda m: m.json_cancelled == 1)
    assert prefetcher.take(KEY, "tool_result") is None
    assert events[-1].to_dict() == {
        "type": "memory_discarded",
        "reason": "turn_ended",
        "settled": False,
    }


async def test_caller_cancel_signal_stops_the_side_query(
    prefetcher: RecallPrefetcher, side: ScriptedModel
) -> None:
    """The caller's CancelSignal passed to start() stops the side query too."""
    side.add_json(selection(), gate=asyncio.Event())
    signal = CancelSignal()
    prefetcher.start(KEY, "question", cancel=signal)
    await side.wait_until(lambda m: m.json_started == 1)

    signal.cancel()
    await side.wait_until(lambda m: m.json_cancelled == 1)
    await settle(prefetcher, KEY)
    assert prefetcher.take(KEY, "user_query") is None
    assert signal.listener_count() == 0  # the bridge is gone with the recall


async def test_wait_settled_waits_with_a_budget_and_never_cancels(
    prefetcher: RecallPrefetcher, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """wait_settled() returns False when its budget runs out and leaves the recall
    running, so its late result still lands at a tool result."""
    gate = asyncio.Event()
    side.add_json(selection(paths["deploy-flow"]), gate=gate)
    prefetcher.start(KEY, "deploy it")
    await side.wait_until(lambda m: m.json_started == 1)

    assert await prefetcher.wait_settled(KEY, 0.01) is False
    handle = prefetcher.pending(KEY)
    assert handle is not None and not handle.control.cancelled and not handle.task.done()
    gate.set()
    async with asyncio.timeout(5):
        assert await prefetcher.wait_settled(KEY, 60) is True
    block = prefetcher.take(KEY, "tool_result")
    assert block is not None and block.paths == (paths["deploy-flow"],)


async def test_a_cancelled_waiter_leaves_the_recall_alone(
    prefetcher: RecallPrefetcher, side: ScriptedModel
) -> None:
    """Cancelling a task blocked in wait_settled() propagates to that task only."""
    side.add_json(selection(), gate=asyncio.Event())
    prefetcher.start(KEY, "question")
    await side.wait_until(lambda m: m.json_started == 1)
    waiter = asyncio.create_task(prefetcher.wait_settled(KEY, 60))
    await asyncio.sleep(0)

    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    handle = prefetcher.pending(KEY)
    assert handle is not None and not handle.task.done()


async def test_aclose_cancels_and_drains_every_recall(
    store: FolderStore, side: ScriptedModel
) -> None:
    """Leaving the context manager cancels every conversation's recall and waits until
    each task has ended; start() is refused afterwards."""
    side.add_json(selection(), gate=asyncio.Event())
    side.add_json(selection(), gate=asyncio.Event())
    with pytest.raises(ZeroDivisionError):
        async with RecallPrefetcher(Recaller(store, ModelSelector(side))) as prefetcher:
            prefetcher.start("a", "question a")
            prefetcher.start("b", "question b")
            await side.wait_until(lambda m: m.json_started == 2)
            tasks = prefetcher.tasks
            assert len(tasks) == 2
            1 / 0  # noqa: B018 - the body fails: exit must still cancel and drain

    assert all(task.cancelled() for task in tasks)
    assert prefetcher.tasks == frozenset()
    assert side.json_cancelled == 2
    with pytest.raises(RuntimeError, match="closed"):
        prefetcher.start("a", "again")


async def test_a_warm_lexical_recall_is_settled_when_start_returns(store: FolderStore) -> None:
    """A warm recall with no I/O (the lexical selector, and the instant pass) is
    computed inside start(): the take() right after it, with no loop tick in between,
    gets its block, and nothing was left for the loop to run first."""
    instant = LexicalSelector()
    async with RecallPrefetcher(
        Recaller(store, LexicalSelector()), instant_selector=instant
    ) as prefetcher:
        await prefetcher.warm()  # warm: a lexical recall then settles inline
        prefetcher.start(KEY, "how do deploys reach the staging cluster?")
        handle = prefetcher.pending(KEY)
        assert handle is not None and handle.settled and prefetcher.tasks == frozenset()
        block = prefetcher.take(KEY, "user_query")

    assert block is not None and block.strategy == "lexical"


async def test_start_warming_needs_no_loop_and_makes_the_first_start_settle(
    store: FolderStore,
) -> None:
    """start_warming() reads the folder and prepares the instant selector in a thread,
    from outside any event loop; once it is done, the first start() is settled at once."""
    instant = LexicalSelector()
    prefetcher = RecallPrefetcher(
        Recaller(store, ModelSelector(ScriptedModel(name="side"))), instant_selector=instant
    )
    thread = await asyncio.to_thread(_warm_from_a_thread_without_a_loop, prefetcher)
    await asyncio.to_thread(thread.join, 30)
    assert not thread.is_alive()
    async with prefetcher:
        prefetcher.start(KEY, "how do deploys reach the staging cluster?")
        block = prefetcher.take(KEY, "user_query")
    assert block is not None and block.strategy == "instant-lexical"


def _warm_from_a_thread_without_a_loop(prefetcher: RecallPrefetcher) -> threading.Thread:
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()  # truly no loop here
    return prefetcher.start_warming()


async def test_start_is_safe_under_the_eager_task_factory(store: FolderStore) -> None:
    """Under eager task execution (the recall's body runs inside create_task) start()
    works, and a lexical recall has settled when start() returns: no tick needed."""
    loop = asyncio.get_running_loop()
    loop.set_task_factory(EAGER_FACTORY)
    try:
        async with RecallPrefetcher(Recaller(store, LexicalSelector())) as prefetcher:
            await prefetcher.warm()  # warm: a lexical recall then settles inline
            prefetcher.start(KEY, "how do deploys reach the staging cluster?")
            block = prefetcher.take(KEY, "user_query")
    finally:
        loop.set_task_factory(None)

    assert block is not None and block.strategy == "lexical"


async def test_instant_pass_fills_the_user_query_and_the_main_recall_adds_the_rest(
    store: FolderStore, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """With an instant selector, a main recall still running at the user query leaves
    the point to the instant pass; when it lands at a tool result it carries only the
    files the instant pass did not show."""
    gate = asyncio.Event()
    side.add_json(selection(paths["deploy-flow"], paths["user-role"]), gate=gate)
    async with RecallPrefetcher(
        Recaller(store, ModelSelector(side)), instant_selector=LexicalSelector()
    ) as prefetcher:
        await prefetcher.warm()  # warm: a lexical recall then settles inline
        prefetcher.start(KEY, "how do deploys reach the staging cluster?")
        await asyncio.sleep(0)
        first = prefetcher.take(KEY, "user_query")
        gate.set()
        await settle(prefetcher, KEY)
        later = prefetcher.take(KEY, "tool_result")

    assert first is not None and first.strategy == INSTANT_STRATEGY
    assert paths["deploy-flow"] in first.paths
    assert later is not None and later.point == "tool_result"
    assert later.paths == (paths["user-role"],)
    assert paths["deploy-flow"] not in later.text


async def test_a_failing_recall_gives_no_memory_and_never_raises(
    store: FolderStore, side: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    """A selector that fails with no fallback: take() returns None and raises nothing."""
    side.add_json(error=SelectorError("boom"))
    caplog.set_level(logging.WARNING)
    async with RecallPrefetcher(Recaller(store, ModelSelector(side, fallback=None))) as p:
        p.start(KEY, "question")
        await settle(p, KEY)
        assert p.take(KEY, "user_query") is None
    assert "boom" in caplog.text


async def test_blank_message_starts_nothing_but_still_supersedes(
    prefetcher: RecallPrefetcher, side: ScriptedModel
) -> None:
    """A blank message starts no recall, and still cancels the key's previous one."""
    side.add_json(selection(), gate=asyncio.Event())
    prefetcher.start(KEY, "question")
    await side.wait_until(lambda m: m.json_started == 1)

    assert prefetcher.start(KEY, "   ") is False
    await side.wait_until(lambda m: m.json_cancelled == 1)
    assert prefetcher.pending(KEY) is None


def test_start_outside_an_event_loop_is_a_clear_error(store: FolderStore) -> None:
    """start() needs a running loop: without one it raises RuntimeError, starting nothing."""
    prefetcher = RecallPrefetcher(Recaller(store, LexicalSelector()))
    with pytest.raises(RuntimeError, match="no running event loop"):
        prefetcher.start(KEY, "question")
    assert prefetcher.pending(KEY) is None


async def test_events_in_order_with_the_agent_json_shape(
    prefetcher: RecallPrefetcher,
    side: ScriptedModel,
    paths: dict[str, str],
    events: list[PrefetchEvent],
) -> None:
    """on_event sees started, then injected, with the JSON objects of stream-json."""
    side.add_json(selection(paths["db-testing"]))
    prefetcher.start(KEY, "db?", prompt_id="p1")
    await settle(prefetcher, KEY)
    block = prefetcher.take(KEY, "user_query")
    assert block is not None

    dicts = [e.to_dict() for e in events]
    assert dicts == [
        {"type": "memory_recall_started", "prompt_id": "p1"},
        {
            "type": "memory_injected",
            "point": "user_query",
            "paths": [paths["db-testing"]],
            "recall_ms": block.recall_ms,
            "strategy": "model",
        },
    ]
    assert all(not e.terminal for e in events)


async def test_conversations_are_bounded_by_count_and_idle_time(
    store: FolderStore, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """A long-lived prefetcher whose framework makes a new key per run does not grow
    without bound: beyond ``max_conversations`` the least recently used idle one is
    forgotten, and one unused for ``idle_seconds`` goes at the next start; a forgotten
    conversation's files can be offered again. The one just started always stays."""
    now = [0.0]
    async with RecallPrefetcher(
        Recaller(store, LexicalSelector()),
        clock=lambda: now[0],
        max_conversations=3,
        idle_seconds=100.0,
    ) as prefetcher:
        for i in range(5):
            now[0] += 1
            prefetcher.start(f"run-{i}", "how do I test the db layer?")
            await settle(prefetcher, f"run-{i}")
            prefetcher.take(f"run-{i}", "user_query")
        assert not prefetcher.surfaced("run-0") and not prefetcher.surfaced("run-1")
        assert all(prefetcher.surfaced(f"run-{i}") for i in (2, 3, 4))
        assert "conversations=3" in repr(prefetcher)

        now[0] += 101  # every conversation idle: the next start forgets them
        prefetcher.start("fresh", "how do I test the db layer?")
        assert not any(prefetcher.surfaced(f"run-{i}") for i in (2, 3, 4))
        assert "conversations=1" in repr(prefetcher)


async def test_an_idle_recall_never_taken_does_not_hold_the_others_back(
    store: FolderStore, paths: dict[str, str]
) -> None:
    """A run that ended without cancelling its recall (no wrapper, a crash) leaves a
    settled recall nobody takes: once idle it goes with its conversation, and the ones
    behind it go too (it stopped every eviction before)."""
    now = [0.0]
    async with RecallPrefetcher(
        Recaller(store, LexicalSelector()),
        clock=lambda: now[0],
        idle_seconds=100.0,
    ) as prefetcher:
        prefetcher.start("abandoned", "how do I test the db layer?")
        await settle(prefetcher, "abandoned")
        for i in range(5):
            now[0] += 1
            prefetcher.start(f"run-{i}", "how do I test the db layer?")
            await settle(prefetcher, f"run-{i}")
            prefetcher.take(f"run-{i}", "user_query")
        assert "conversations=6" in repr(prefetcher)

        now[0] += 101
        prefetcher.start("fresh", "how do I test the db layer?")
        assert prefetcher.pending("abandoned") is None
        assert "conversations=1" in repr(prefetcher)


async def test_a_conversation_with_a_pending_recall_is_never_evicted(
    store: FolderStore, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """The bound is soft: a conversation whose recall is still running stays, however
    idle, so its recall can still be taken."""
    now = [0.0]
    gate = asyncio.Event()
    side.add_json(selection(paths["db-testing"]), gate=gate)
    async with RecallPrefetcher(
        Recaller(store, ModelSelector(side)),
        clock=lambda: now[0],
        max_conversations=1,
        idle_seconds=1.0,
    ) as prefetcher:
        prefetcher.start("slow", "how do I test the db layer?")
        now[0] += 10
        side.add_json(selection())
        prefetcher.start("other", "anything else?")
        gate.set()
        await settle(prefetcher, "slow")
        block = prefetcher.take("slow", "tool_result")
        assert block is not None and block.paths == (paths["db-testing"],)


# -- until_request: the side query waits for the first request ---------------------------


async def _ticks(count: int = 20) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_a_recall_held_until_the_request_asks_its_side_model_after_take(
    store: FolderStore, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """``until_request``: the side query is not even prepared before the key's next
    take (the request it could not reach anyway is built first), while the instant pass
    is there at once; the main recall then runs and lands at the tool result."""
    side.add_json(selection(paths["user-role"]))
    async with RecallPrefetcher(
        Recaller(store, ModelSelector(side)), instant_selector=LexicalSelector()
    ) as prefetcher:
        await prefetcher.warm()
        prefetcher.start(KEY, "how do deploys reach the staging cluster?", until_request=30)
        await _ticks()
        asked_before = side.json_started
        first = prefetcher.take(KEY, "user_query")
        await _ticks(5)  # the framework's own steps to the send (AFTER_TAKE_S: 100 ms)
        asked_at_send = side.json_started
        async with asyncio.timeout(5):
            await side.wait_until(lambda m: m.json_started == 1)
        await settle(prefetcher, KEY)
        later = prefetcher.take(KEY, "tool_result")

    assert asked_before == 0
    assert asked_at_send == 0
    assert first is not None and first.strategy == INSTANT_STRATEGY
    assert later is not None and later.paths == (paths["user-role"],)


async def test_a_held_recall_goes_on_when_its_request_is_written(
    prefetcher: RecallPrefetcher,
    side: ScriptedModel,
    paths: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``request_sent`` after the take lets the held recall go on at once: the wait after
    the take (made long here) is only for a caller that never says its request is out.
    Before the take it opens nothing (the take's request is the one that counts)."""
    monkeypatch.setattr(_prefetcher, "AFTER_TAKE_S", 30.0)
    side.add_json(selection(paths["deploy-flow"]))
    prefetcher.start(KEY, "how do I deploy?", until_request=30)
    prefetcher.request_sent(KEY)  # no take yet: nothing to open
    await _ticks()
    assert side.json_started == 0
    prefetcher.take(KEY, "user_query")
    await _ticks()
    assert side.json_started == 0
    prefetcher.request_sent(KEY)
    async with asyncio.timeout(5):
        await side.wait_until(lambda m: m.json_started == 1)
    await settle(prefetcher, KEY)
    block = prefetcher.take(KEY, "tool_result")
    assert block is not None and block.paths == (paths["deploy-flow"],)


async def test_a_held_recall_goes_on_after_its_bound_without_a_take(
    prefetcher: RecallPrefetcher, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """A run that never reaches its request does not keep the recall from running: it
    starts after ``until_request`` seconds."""
    side.add_json(selection(paths["deploy-flow"]))
    prefetcher.start(KEY, "how do I deploy?", until_request=0.05)
    await _ticks()
    assert side.json_started == 0
    await settle(prefetcher, KEY)
    block = prefetcher.take(KEY, "user_query")
    assert block is not None and block.paths == (paths["deploy-flow"],)


async def test_a_held_recall_cancelled_before_its_request_never_asks(
    prefetcher: RecallPrefetcher, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """Cancelled while held (the run failed before its first request; a new message
    superseded it): the side model is never asked."""
    side.add_json(selection(paths["deploy-flow"]))
    prefetcher.start(KEY, "how do I deploy?", until_request=0.05)
    handle = prefetcher.pending(KEY)
    await _ticks()  # the recall's task is running, held
    prefetcher.cancel(KEY)
    assert handle is not None
    async with asyncio.timeout(5):
        await asyncio.wait({handle.task})
    await asyncio.sleep(0.1)  # past the bound
    assert side.json_started == 0


async def test_a_held_instant_pass_that_must_read_waits_for_the_take_too(
    store: FolderStore, side: ScriptedModel
) -> None:
    """``until_request``: an instant pass that cannot be computed inline (a cold folder
    with more to read than the inline budget) runs in a task held like the main recall,
    so nothing reads the folder for this message before the key's take (the request
    being built); it could not reach that request anyway."""
    store.save_memory(
        "long note", "a long note", "project", "staging cluster " * 600, origin="user"
    )
    cold = FolderStore(store.root)
    read: list[str] = []
    real = cold.candidates

    async def candidates(query: str, *, exclude: Collection[str] = ()) -> list[MemoryDoc]:
        read.append(query)
        return await real(query, exclude=exclude)

    cold.candidates = candidates  # type: ignore[method-assign]
    async with RecallPrefetcher(
        Recaller(cold, ModelSelector(side)), instant_selector=LexicalSelector()
    ) as prefetcher:
        prefetcher.start(KEY, "how do deploys reach the staging cluster?", until_request=30)
        instant = prefetcher._conversations[KEY].instant
        assert instant is not None and not instant.settled  # in a task: not inline
        await _ticks()
        assert read == []
        assert prefetcher.take(KEY, "user_query") is None


async def test_hold_and_until_request_are_exclusive(prefetcher: RecallPrefetcher) -> None:
    with pytest.raises(ValueError, match="hold or until_request"):
        prefetcher.start(KEY, "how do I deploy?", hold=asyncio.Event().wait, until_request=1)


async def test_a_caller_cancel_after_the_instant_pass_settled_keeps_it_out(
    store: FolderStore, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """Once the caller's cancel signal fires, nothing of that message is injected: not
    the instant pass computed inline (settled when start returned), nor a main recall
    that settled before the cancel; a signal already cancelled at start injects nothing."""
    side.add_json(selection(paths["deploy-flow"]))
    async with RecallPrefetcher(
        Recaller(store, ModelSelector(side)), instant_selector=LexicalSelector()
    ) as prefetcher:
        await prefetcher.warm()
        signal = CancelSignal()
        prefetcher.start(KEY, "how do deploys reach the staging cluster?", cancel=signal)
        await settle(prefetcher, KEY)  # both the main recall and the instant pass settled
        signal.cancel()
        assert prefetcher.take(KEY, "user_query") is None
        assert prefetcher.take(KEY, "tool_result") is None

        gone = CancelSignal()
        gone.cancel()
        prefetcher.start(KEY, "how do deploys reach the staging cluster?", cancel=gone)
        assert prefetcher.take(KEY, "user_query") is None


class _Inventing:
    """A custom selector that answers a document it was never offered."""

    name = "inventing"

    def __init__(self, invented: object) -> None:
        self.invented = invented

    async def select(self, query: str, docs: object, *, limit: int) -> list[object]:
        return [self.invented]


async def test_a_custom_selectors_invented_file_is_never_injected(
    store: FolderStore, paths: dict[str, str], tmp_path: object
) -> None:
    """A selector's answer is checked against what it was offered, whoever wrote the
    selector: a document it was not offered (an invented path, a file outside the folder,
    a quarantined or excluded one) is an error, and recall falls back or gives nothing."""
    import dataclasses

    real = next(d for d in store.scan() if d.rel_path == paths["deploy-flow"])
    invented = dataclasses.replace(real, rel_path="../../etc/passwd.md", body="ZQ-invented")
    manager = Recaller(store, _Inventing(invented))  # type: ignore[arg-type]
    result = await manager.recall("how do deploys reach the staging cluster?")
    assert "ZQ-invented" not in result.prompt
    assert "../../etc/passwd.md" not in result.paths
    assert result.fallback_reason is not None and "not offered" in result.fallback_reason


class _InventingInstant(_Inventing):
    """The same, as an instant selector run inline."""

    inline = True

    def ready(self, docs: object) -> bool:
        return True

    def prepare(self, docs: object) -> None:
        return None

    def rank(self, query: str, docs: object, *, limit: int) -> list[object]:
        return [self.invented]


async def test_an_instant_selectors_invented_file_is_never_injected(
    store: FolderStore, paths: dict[str, str]
) -> None:
    """The instant pass's ranking is checked against what it was offered as well: a
    document it invents gives no memory, and a copy of an offered file with other text
    brings the store's text, not the selector's."""
    import dataclasses

    real = next(d for d in store.scan() if d.rel_path == paths["deploy-flow"])
    manager = Recaller(store, LexicalSelector())
    await manager.warm()
    invented = dataclasses.replace(real, rel_path="elsewhere.md", body="ZQ-invented")
    result = manager.recall_instant("deploys", selector=_InventingInstant(invented))  # type: ignore[arg-type]
    assert result is not None and result.paths == () and "ZQ-invented" not in result.prompt
    altered = dataclasses.replace(real, body="ZQ-altered")
    result = manager.recall_instant("deploys", selector=_InventingInstant(altered))  # type: ignore[arg-type]
    assert result is not None and result.paths == (real.rel_path,)
    assert "ZQ-altered" not in result.prompt and real.body.strip()[:40] in result.prompt


async def test_every_empty_recall_says_why(
    store: FolderStore, side: ScriptedModel, paths: dict[str, str]
) -> None:
    """A recall taken with no file for the request says why (``memory_recall_empty``):
    the main recall and the instant pass each with the selector's code, and a model
    pick whose files the instant pass had already shown with ``already_shown``."""
    events: list[PrefetchEvent] = []
    async with RecallPrefetcher(
        Recaller(store, LexicalSelector()),
        instant_selector=LexicalSelector(),
        on_event=events.append,
    ) as prefetcher:
        await prefetcher.warm()
        prefetcher.start(KEY, "which colour should the office kitchen be painted?")
        assert prefetcher.take(KEY, "user_query") is None
    prompt_id = events[0].to_dict()["prompt_id"]
    assert [e.to_dict() for e in events if isinstance(e, MemoryRecallEmptyEvent)] == [
        {"type": "memory_recall_empty", "prompt_id": prompt_id, "reason": "no_match",
         "strategy": "lexical"},
        {"type": "memory_recall_empty", "prompt_id": prompt_id, "reason": "no_match",
         "strategy": "instant-lexical"},
    ]  # fmt: skip

    events.clear()
    gate = asyncio.Event()
    side.add_json(selection(paths["deploy-flow"]), gate=gate)
    async with pick_beside_instant_pass(store, side, events) as prefetcher:
        await prefetcher.warm()
        prefetcher.start(KEY, "how do deploys reach the staging cluster?")
        shown = prefetcher.take(KEY, "user_query")
        gate.set()
        await settle(prefetcher, KEY)
        later = prefetcher.take(KEY, "tool_result")
    assert shown is not None and shown.paths == (paths["deploy-flow"],) and later is None
    (empty,) = [e for e in events if isinstance(e, MemoryRecallEmptyEvent)]
    assert (empty.reason, empty.strategy) == ("already_shown", "model")

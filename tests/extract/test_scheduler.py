"""The session's background extraction, over real HTTP: skip rules, single flight,
superseding, never on the user's path, cancel and drain."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from asyncrecall import CancelSignal
from asyncrecall.agent import ExtractionEvent, ExtractionScheduler
from asyncrecall.cli._session import Session, open_session
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import FolderStore, MemoryExtractor
from asyncrecall.memory.extraction._state import ExtractionState, default_state_dir
from asyncrecall.models import FunctionCall
from asyncrecall.testing import LocalServer, Reply

from .conftest import HANG_GUARD, SideModel, is_extraction, memory, offsets_in_prompt


class Recorder:
    """Collects a scheduler's events; :meth:`wait_for` waits for one of a type."""

    def __init__(self, scheduler: ExtractionScheduler) -> None:
        self.events: list[ExtractionEvent] = []
        self._changed = asyncio.Event()
        scheduler.add_listener(self._on)

    def _on(self, event: ExtractionEvent) -> None:
        self.events.append(event)
        self._changed.set()

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    async def wait_for(self, kind: str, count: int = 1) -> None:
        try:
            async with asyncio.timeout(HANG_GUARD):
                while self.types.count(kind) < count:
                    self._changed.clear()
                    await self._changed.wait()
        except TimeoutError:
            seen = [
                (e.type, getattr(e, "reason", ""), getattr(e, "detail", "")) for e in self.events
            ]
            raise AssertionError(
                f"no {count} x {kind} in {HANG_GUARD:.0f} s; events: {seen}"
            ) from None


def scheduler_of(session: Session) -> ExtractionScheduler:
    assert session.extraction is not None
    return session.extraction


def extraction_requests(server: LocalServer) -> list[object]:
    return [r for r in server.requests if is_extraction(r)]


async def test_a_completed_query_extracts_in_the_background(
    session: Session, side: SideModel, local_server: LocalServer, memory_dir: object
) -> None:
    """After a completed query an extraction runs (started, then extracted) and writes
    a memory citing the query's turns; the query itself never waited for it."""
    scheduler = scheduler_of(session)
    events = Recorder(scheduler)
    side.add(memory("Deploys", [0, 1]))
    local_server.script("main", "noted")

    result = await session.agent.ask("we deploy on fridays")
    assert result.text == "noted"
    await events.wait_for("memory_extracted")

    assert events.types == ["memory_extraction_started", "memory_extracted"]
    extracted = events.events[1].to_dict()
    assert extracted["created"] == ["deploys.md"] and extracted["paths"] == ["deploys.md"]
    (request,) = extraction_requests(local_server)
    assert offsets_in_prompt(request) == [0, 1]
    assert "we deploy on fridays" in request.messages[-1]["content"]  # type: ignore[attr-defined]


async def test_skipped_when_the_main_agent_saved_a_memory_in_that_query(
    session: Session, side: SideModel, local_server: LocalServer
) -> None:
    """A query where save_memory ran is not extracted (reason saved_memory), and its
    turns are left out of the next extraction."""
    scheduler = scheduler_of(session)
    events = Recorder(scheduler)
    args = {"name": "Fridays", "description": "deploy day", "type": "project", "content": "Fri"}
    local_server.script("main", Reply(tool_calls=[FunctionCall("c1", "save_memory", args)]), "ok")

    await session.agent.ask("remember: we deploy on fridays")

    assert events.types == ["memory_extraction_skipped"]
    assert events.events[0].to_dict()["reason"] == "saved_memory"
    assert not scheduler.running and extraction_requests(local_server) == []

    local_server.script("main", "sure")
    await session.agent.ask("the office is in Lyon")
    await events.wait_for("memory_extracted")
    (request,) = extraction_requests(local_server)
    assert offsets_in_prompt(request) == [2, 3]


class _SlowGate:
    """A consolidation gate whose session count waits for the test: it holds the
    extraction task after its last extraction, before it ends."""

    def __init__(self) -> None:
        self.noting = threading.Event()
        self.go_on = threading.Event()

    def note_session(self) -> None:
        self.noting.set()
        self.go_on.wait(HANG_GUARD)

    def due(self) -> bool:
        return False

    def acquire(self) -> bool:
        return False

    def release(self, *, completed: bool) -> None:
        del completed


async def test_a_query_completed_while_the_task_ends_is_still_extracted(
    session: Session, side: SideModel, local_server: LocalServer
) -> None:
    """A query completed after the extraction task's last extraction but before the
    task ended (it was counting the session for consolidation) is extracted all the
    same: its request is not dropped with the ending task."""
    scheduler = scheduler_of(session)
    events = Recorder(scheduler)
    gate = _SlowGate()
    scheduler.consolidation = gate  # type: ignore[assignment]
    side.add(memory("One", [0]), memory("Two", [2]))
    local_server.script("main", "a", "b")

    await session.agent.ask("first fact")
    await events.wait_for("memory_extracted")
    assert await asyncio.to_thread(gate.noting.wait, HANG_GUARD)
    await session.agent.ask("second fact")
    gate.go_on.set()
    await events.wait_for("memory_extracted", 2)
    second = extraction_requests(local_server)[1]
    assert offsets_in_prompt(second) == [2, 3]


async def test_an_unfinished_query_schedules_nothing(
    session: Session, side: SideModel, local_server: LocalServer
) -> None:
    """A query that ends in an error is not a completed query: no extraction."""
    local_server.script("main", Reply(status=400, error_message="bad request"))
    result = await session.agent.ask("hello")
    assert result.finish_reason == "error"
    assert not scheduler_of(session).running and scheduler_of(session).transcript == []


async def test_single_flight_with_one_superseding_trailing_request(
    session: Session, side: SideModel, local_server: LocalServer
) -> None:
    """While an extraction runs, a second request waits as the trailing one, a third
    supersedes it; when the first ends, one more extraction covers every turn since.
    The two extraction requests never overlap on the server."""
    scheduler = scheduler_of(session)
    events = Recorder(scheduler)
    held = threading.Event()
    side.add(memory("One", [0]), gate=held)
    side.add(memory("Two", [2]), memory("Three", [4]))
    local_server.script("main", "a", "b", "c")

    await session.agent.ask("first fact")
    first = await local_server.await_for(is_extraction, timeout=HANG_GUARD)
    await session.agent.ask("second fact")
    assert scheduler.trailing
    await session.agent.ask("third fact")
    assert events.types == [
        "memory_extraction_started",
        "memory_extraction_skipped",  # the second request, superseded by the third
    ]
    assert events.events[1].to_dict()["reason"] == "superseded"
    assert len(extraction_requests(local_server)) == 1

    held.set()
    await events.wait_for("memory_extracted", 2)
    await scheduler.wait_idle()

    one, two = extraction_requests(local_server)  # type: ignore[misc]
    assert one is first and one.finished_at is not None  # type: ignore[attr-defined]
    assert two.arrived_at > one.finished_at  # type: ignore[attr-defined]
    assert offsets_in_prompt(one) == [0, 1]
    assert offsets_in_prompt(two) == [2, 3, 4, 5]
    assert (
        ExtractionState(default_state_dir(session.memory.store.root)).cursor(  # type: ignore[union-attr]
            scheduler.session_id
        )
        == 6
    )


async def test_the_next_query_is_not_delayed_and_does_not_cancel_a_running_extraction(
    session: Session, side: SideModel, local_server: LocalServer
) -> None:
    """With an extraction held on the server, the next user query's main request goes
    out and the whole query completes while the extraction is still unanswered; the
    extraction is not cancelled by it and commits afterwards."""
    scheduler = scheduler_of(session)
    events = Recorder(scheduler)
    held = threading.Event()
    side.add(memory("Held", [0]), gate=held)
    local_server.script("main", "one", "two")

    await session.agent.ask("first")
    extraction = await local_server.await_for(is_extraction, timeout=HANG_GUARD)
    result = await session.agent.ask("second")

    assert result.text == "two"
    main_requests = [r for r in local_server.requests if r.model == "main"]
    assert main_requests[1].arrived_at > extraction.arrived_at
    assert main_requests[1].settled and not extraction.settled  # answered while held
    assert scheduler.running and not extraction.disconnected

    held.set()
    await events.wait_for("memory_extracted")
    assert extraction.finished_at is not None and not extraction.disconnected


@pytest.mark.parametrize("how", ["reset", "control"])
async def test_reset_and_the_sessions_cancel_stop_it_and_leave_the_cursor(
    settings: Settings, side: SideModel, local_server: LocalServer, how: str
) -> None:
    """reset_chat and the session's control signal cancel a running extraction: its
    side query is hung up, the cursor stays at the last commit (0) so the turns are
    extracted later, not skipped."""
    control = CancelSignal()
    session = open_session(settings, control=control)
    try:
        scheduler = scheduler_of(session)
        events = Recorder(scheduler)
        side.add(memory("Lost?", [0]), gate=threading.Event())
        local_server.script("main", "one")
        await session.agent.ask("first")
        request = await local_server.await_for(is_extraction, timeout=HANG_GUARD)

        if how == "reset":
            session.client.reset_chat()
        else:
            control.cancel("stop")
        await scheduler.wait_idle()

        await local_server.await_disconnected(request, timeout=HANG_GUARD)
        assert events.types[-1] == "memory_extraction_skipped"
        assert events.events[-1].to_dict()["reason"] == "cancelled"
        state = ExtractionState(default_state_dir(settings.memory_dir))  # type: ignore[arg-type]
        assert state.cursor(scheduler.session_id) == 0
        if how == "reset":  # the session goes on: the next extraction starts at 0
            side.add(memory("Kept", [0]))
            local_server.script("main", "two")
            await session.agent.ask("second")
            await events.wait_for("memory_extracted")
            assert offsets_in_prompt(extraction_requests(local_server)[-1]) == [0, 1, 2, 3]
    finally:
        await session.aclose()


async def test_exit_drains_a_running_extraction(
    settings: Settings, side: SideModel, local_server: LocalServer
) -> None:
    """aclose lets a running extraction finish within the drain time: it commits."""
    session = open_session(settings)
    scheduler = scheduler_of(session)
    events = Recorder(scheduler)
    held = threading.Event()
    side.add(memory("Drained", [0]), gate=held)
    local_server.script("main", "one")
    await session.agent.ask("first")
    await local_server.await_for(is_extraction, timeout=HANG_GUARD)

    closing = asyncio.create_task(session.aclose())
    await asyncio.sleep(0)
    assert not closing.done()
    held.set()
    await closing
    assert events.types[-1] == "memory_extracted"
    assert [d.name for d in session.memory.store.scan()] == ["Drained"]  # type: ignore[union-attr]


async def test_exit_cancels_an_extraction_that_outlives_the_drain_time(
    store: FolderStore, side: SideModel, local_server: LocalServer, side_model: object
) -> None:
    """Past the drain time, aclose cancels: the side query is hung up, nothing written."""
    scheduler = ExtractionScheduler(MemoryExtractor(store, side_model), drain_timeout=0.01)  # type: ignore[arg-type]
    events = Recorder(scheduler)
    side.add(memory("Late", [0]), gate=threading.Event())
    scheduler.query_completed("a fact", "ok", saved_memory=False)
    request = await local_server.await_for(is_extraction, timeout=HANG_GUARD)

    await scheduler.aclose()

    await local_server.await_disconnected(request, timeout=HANG_GUARD)
    assert events.types == ["memory_extraction_started", "memory_extraction_skipped"]
    assert store.scan() == [] and not scheduler.background_tasks
    scheduler.query_completed("after exit", "ok", saved_memory=False)
    assert not scheduler.running  # closed: no new extraction


async def test_a_failing_extraction_is_a_warning_and_an_event_never_the_users_error(
    session: Session, side: SideModel, local_server: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A side model answering something that is not JSON gives a warning on
    asyncrecall.agent and a skipped event with reason error; the user's query result is
    untouched."""
    events = Recorder(scheduler_of(session))
    side.add_reply(Reply(raw_content="this is not json"))
    local_server.script("main", "fine")
    with caplog.at_level(logging.WARNING, logger="asyncrecall.agent"):
        result = await session.agent.ask("a fact")
        await events.wait_for("memory_extraction_skipped")
    assert result.text == "fine" and result.error is None
    assert events.events[-1].to_dict()["reason"] == "error"
    assert any("memory extraction failed" in r.getMessage() for r in caplog.records)

"""Exit never waits for extraction: what ``run`` and ``chat`` owe is handed to a detached
worker process, and a worker killed half-way is finished by the next session (the real
CLI in subprocesses against the local server, whose extraction answers are held)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from asyncrecall.memory import FolderStore, read_source_offsets
from asyncrecall.memory.extraction._state import ExtractionState, default_state_dir
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from conftest import handoff_workers

from .conftest import (
    HANG_GUARD,
    SideModel,
    handoff_dir,
    handoffs,
    is_extraction,
    memory,
    wait_until_handed_off_work_is_done,
)


def cli(
    server: LocalServer, tmp_path: Path, command: str, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    return subprocess.run(
        [sys.executable, "-m", "asyncrecall", command, *args, "--base-url", server.base_url,
         "--api-key", "t", "--model", "main", "--side-model", "side",
         "--project", str(project), "--memory-dir", str(tmp_path / "memory")],
        input=stdin, capture_output=True, text=True, env=env, timeout=HANG_GUARD,
    )  # fmt: skip


def answered(server: LocalServer, words: str) -> list[RecordedRequest]:
    """Extraction requests whose transcript shows ``words`` and that got their answer."""
    return [
        r
        for r in server.requests
        if is_extraction(r)
        and words in str(r.messages[-1]["content"])
        and r.finished_at is not None
        and not r.disconnected
    ]


def test_run_ends_before_its_extraction_is_answered_and_the_extraction_still_happens(
    local_server: LocalServer, side: SideModel, tmp_path: Path, memory_dir: Path
) -> None:
    """``run`` does not wait for its extraction: it exits 0 while the server still holds
    the extraction's answer, and after it has exited the extraction completes anyway
    (the detached worker writes the memory; then, the session having ended with it,
    drops the session's cursor)."""
    held = threading.Event()
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."), gate=held)
    local_server.script("main", "noted")

    done = cli(local_server, tmp_path, "run", "we deploy on fridays")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "noted\n"
    assert answered(local_server, "we deploy on fridays") == []  # held: nothing answered
    assert not (memory_dir / "deploy-day.md").exists()
    [session] = handoffs(memory_dir)
    held.set()  # the server answers now, long after run ended
    wait_until_handed_off_work_is_done(memory_dir)
    assert (memory_dir / "deploy-day.md").is_file()
    assert read_source_offsets(memory_dir / "deploy-day.md") == {session: (0, 1)}
    assert not ExtractionState(default_state_dir(memory_dir)).cursor_path(session).exists()
    assert len(answered(local_server, "we deploy on fridays")) == 1


def test_chat_hands_on_the_extraction_its_exit_interrupts(
    local_server: LocalServer, side: SideModel, tmp_path: Path, memory_dir: Path
) -> None:
    """``chat`` at end of input does not wait for the extraction of its last query:
    it exits, and the worker finishes it (reason ``handed_off`` in stream-json)."""
    held = threading.Event()
    side.add(memory("Office", [0, 1], content="The office is in Leeds."), gate=held)
    local_server.script("main", "noted")

    done = cli(local_server, tmp_path, "chat", "--output-format", "stream-json",
               stdin="the office is in leeds\n")  # fmt: skip

    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    skipped = [e for e in events if e["type"] == "memory_extraction_skipped"]
    assert [e["reason"] for e in skipped] == ["handed_off"]
    assert not (memory_dir / "office.md").exists()
    held.set()
    wait_until_handed_off_work_is_done(memory_dir)
    assert (memory_dir / "office.md").is_file()
    assert len(answered(local_server, "the office is in leeds")) == 1


def test_a_worker_killed_mid_extraction_is_finished_by_the_next_session_once(
    local_server: LocalServer, side: SideModel, tmp_path: Path, memory_dir: Path
) -> None:
    """``kill -9`` of the worker while its side query is out leaves the hand-off (its
    lock dies with it) and the cursor where it was; the next session, which owes
    nothing itself, starts a worker for it at exit: the memory is written once, the
    slice was answered once, and the ended session's cursor is dropped after."""
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."), gate=threading.Event())
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."))
    local_server.script("main", "noted")
    done = cli(local_server, tmp_path, "run", "we deploy on fridays")
    assert done.returncode == 0, done.stderr
    [session] = handoffs(memory_dir)

    request = local_server.wait_for(is_extraction, timeout=HANG_GUARD)  # the worker's
    [worker] = handoff_workers(str(memory_dir))
    os.kill(worker, signal.SIGKILL)
    local_server.wait_disconnected(request, timeout=HANG_GUARD)
    state = ExtractionState(default_state_dir(memory_dir))
    assert handoffs(memory_dir) == [session] and state.cursor(session) == 0
    assert not (memory_dir / "deploy-day.md").exists()

    nothing = cli(local_server, tmp_path, "chat", stdin="")  # the next session
    assert nothing.returncode == 0, nothing.stderr
    wait_until_handed_off_work_is_done(memory_dir)

    assert not state.cursor_path(session).exists() and state.journal(session) is None
    store = FolderStore(memory_dir)
    assert [doc.name for doc in store.scan(limit=None)] == ["Deploy day"]
    assert store.index_path.read_text().count("](deploy-day.md)") == 1
    assert read_source_offsets(memory_dir / "deploy-day.md") == {session: (0, 1)}
    extractions = [r for r in local_server.requests if is_extraction(r)]
    assert [r.disconnected for r in extractions] == [True, False]


def test_a_failing_extraction_is_kept_for_a_later_worker_then_given_up(
    local_server: LocalServer, side: SideModel, tmp_path: Path, memory_dir: Path
) -> None:
    """A worker whose extraction fails (the endpoint answers 500) keeps the hand-off for
    the next session, with the failure counted and logged; after three failures it is
    given up with a warning, so a broken endpoint does not pile up work forever."""
    for _ in range(3):
        side.add_reply(Reply(status=500, error_message="the side model is down"))
    local_server.script("main", "noted")
    done = cli(local_server, tmp_path, "run", "we deploy on fridays")
    assert done.returncode == 0, done.stderr
    [session] = handoffs(memory_dir)
    wait_until_worker_ended(memory_dir)
    assert handoffs(memory_dir) == [session]
    file = handoff_dir(memory_dir) / f"{session}.json"
    assert json.loads(file.read_text())["attempts"] == 1

    for attempt in (2, 3):
        assert cli(local_server, tmp_path, "chat", stdin="").returncode == 0
        wait_until_worker_ended(memory_dir)
        if attempt == 2:
            assert json.loads(file.read_text())["attempts"] == 2
    assert handoffs(memory_dir) == []
    log = (handoff_dir(memory_dir) / "worker.log").read_text()
    assert "kept for later" in log and "given up after 3 attempts" in log
    assert len([r for r in local_server.requests if is_extraction(r)]) == 3


def wait_until_worker_ended(memory_dir: Path) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while not (handoff_dir(memory_dir) / "worker.log").exists() or handoff_workers(str(memory_dir)):
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not end")
        time.sleep(0.02)


async def test_a_hand_off_queued_while_the_worker_finishes_is_not_stranded(
    local_server: LocalServer,
    side: SideModel,
    memory_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A command that queues its hand-off just as the draining worker found its queue
    empty (the drain lock still held, so the command starts no worker) does not strand
    it: the worker looks once more after letting the lock go and runs it."""
    from asyncrecall.agent._handoff import Handoff, HandoffDir
    from asyncrecall.cli import _handoff_worker as worker
    from asyncrecall.memory import TranscriptTurn

    side.add(memory("Office", [0, 1], content="The office is in Leeds."))
    FolderStore(memory_dir).ensure()
    directory = HandoffDir(handoff_dir(memory_dir))
    drain = directory.take_drain()
    assert drain is not None  # this worker's, as a command passes it on
    turns = (
        TranscriptTurn(0, "user", "the office is in leeds"),
        TranscriptTurn(1, "assistant", "ok"),
    )
    config = worker.WorkerConfig(
        store={"folder": str(memory_dir)},
        side={"base_url": local_server.base_url, "model": "side", "api_key": "t"},
    )
    next_stale = worker._next_stale
    queued: list[bool] = []

    def queue_empty_then_a_command_queues(
        directory: HandoffDir, tried: set[str]
    ) -> tuple[str, int] | None:
        found = next_stale(directory, tried)
        if found is None and not queued:  # the worker is about to let the lock go
            queued.append(worker.hand_off(directory, Handoff("s-late", 2, turns), config))
        return found

    monkeypatch.setattr(worker, "_next_stale", queue_empty_then_a_command_queues)
    assert await worker._work(directory, config, drain) == 0

    assert queued == [False]  # the lock was held: the command started no worker
    assert handoffs(memory_dir) == []
    assert (memory_dir / "office.md").is_file()

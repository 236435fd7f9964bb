"""What ``run`` and ``chat`` owe survives the ways people end them: the terminal closed
(``SIGHUP``), a polite kill (``SIGTERM``), a reader that stops reading (``| head``);
however many end at once, one extraction worker per store runs (the real CLI in
subprocesses against the local server; extraction answers held where the test says)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from asyncrecall.memory.extraction._state import ExtractionState, default_state_dir
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from conftest import handoff_workers

from .conftest import (
    HANG_GUARD,
    SideModel,
    handoffs,
    is_extraction,
    memory,
    wait_until_handed_off_work_is_done,
)


def ask_and_read_the_answer(process: subprocess.Popen[str], line: str) -> None:
    """Send ``line`` to a stream-json ``chat`` and read its events up to ``finished``."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()
    for event in process.stdout:
        if json.loads(event)["type"] == "finished":
            return
    raise AssertionError("chat ended before its answer")


def command(server: LocalServer, tmp_path: Path, *args: str) -> list[str]:
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    return [
        sys.executable, "-m", "asyncrecall", *args, "--base-url", server.base_url,
        "--api-key", "t", "--model", "main", "--side-model", "side",
        "--project", str(project), "--memory-dir", str(tmp_path / "memory"),
    ]  # fmt: skip


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    return env


def ended(process: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return process.communicate(timeout=HANG_GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


HANGUPS = [signal.SIGHUP, signal.SIGTERM]


@pytest.mark.parametrize("signum", HANGUPS, ids=lambda s: signal.Signals(s).name)
def test_chat_ended_by_a_signal_hands_on_the_extraction_it_had_out(
    local_server: LocalServer,
    side: SideModel,
    tmp_path: Path,
    memory_dir: Path,
    signum: signal.Signals,
) -> None:
    """``chat`` closed by the terminal (``SIGHUP``) or ``SIGTERM`` right after its answer,
    while the answer's extraction is out (held by the server), hands that extraction on
    and exits 128 + the signal's number: the memory is saved afterwards, once."""
    side.add(memory("Office", [0, 1], content="The office is in Leeds."), gate=threading.Event())
    side.add(memory("Office", [0, 1], content="The office is in Leeds."))
    local_server.script("main", "noted")
    process = subprocess.Popen(
        command(local_server, tmp_path, "chat", "--output-format", "stream-json"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env(tmp_path),
    )  # fmt: skip
    try:
        ask_and_read_the_answer(process, "the office is in leeds")
        held = local_server.wait_for(is_extraction, timeout=HANG_GUARD)  # chat's own
        process.send_signal(signum)
        _out, err = ended(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signum, err
    assert local_server.wait_disconnected(held, timeout=HANG_GUARD).disconnected
    wait_until_handed_off_work_is_done(memory_dir)
    assert (memory_dir / "office.md").is_file()
    assert (memory_dir / "MEMORY.md").read_text().count("](office.md)") == 1


@pytest.mark.parametrize("signum", HANGUPS, ids=lambda s: signal.Signals(s).name)
def test_run_ended_by_a_signal_right_after_its_answer_still_hands_on_its_extraction(
    local_server: LocalServer,
    side: SideModel,
    tmp_path: Path,
    memory_dir: Path,
    signum: signal.Signals,
) -> None:
    """A signal sent the moment ``run``'s answer is read (its extraction not handed on
    yet) does not lose the extraction: it is handed on and the memory is saved."""
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."))
    local_server.script("main", "noted")
    process = subprocess.Popen(
        command(local_server, tmp_path, "run", "we deploy on fridays"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(tmp_path),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "noted\n"
        process.send_signal(signum)
        _out, err = ended(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # Before its loop bridged the signal, or after: handled (128 + N) or its default
    # action once the hand-off was made (-N); an answer complete before it came: 0.
    assert process.returncode in (0, 128 + signum, -signum), err
    wait_until_handed_off_work_is_done(memory_dir)
    assert (memory_dir / "deploy-day.md").is_file()


def test_run_whose_reader_stops_reading_exits_quietly_and_hands_on_its_extraction(
    local_server: LocalServer, side: SideModel, tmp_path: Path, memory_dir: Path
) -> None:
    """``run ... | head -1``: the output's reader has gone before the answer is written
    (a broken pipe). No traceback: the query goes on to its end, the command exits 141
    (128 + SIGPIPE) with nothing on stderr, and the query's extraction is handed on."""
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."))
    local_server.script("main", Reply(text="noted\nand more\nand more\n", chunk_size=6))
    process = subprocess.Popen(
        command(local_server, tmp_path, "run", "we deploy on fridays"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(tmp_path),
    )  # fmt: skip
    assert process.stdout is not None
    process.stdout.close()  # as `head` does once it has its line
    _out, err = ended(process)
    assert process.returncode == 141, err
    assert err == ""
    wait_until_handed_off_work_is_done(memory_dir)
    assert (memory_dir / "deploy-day.md").is_file()


def test_many_quick_runs_start_one_worker_and_every_fact_is_saved(
    local_server: LocalServer, side: SideModel, tmp_path: Path, memory_dir: Path
) -> None:
    """However many runs end while extraction is held, at most one hand-off worker per
    store is alive (later runs queue their hand-off); once the side model answers, all N
    facts are saved, and the ended sessions' cursors are gone."""
    runs = 5
    release = threading.Event()

    def extractor(record: RecordedRequest) -> Reply:
        # Answered by what the request holds, not in arrival order: a request the worker
        # hangs up on (it gives way to the next run's requests) is asked again later.
        if not is_extraction(record):
            return Reply(json={"selected_memories": []})
        asked = json.dumps(record.messages)
        index = next(i for i in range(runs) if f"remember fact {i}" in asked)
        found = memory(f"Fact {index}", [0, 1], content=f"Fact number {index}.")
        return Reply(json={"memories": [found]}, gate=release)

    local_server.set_default("side", extractor)
    local_server.script("main", *(["noted"] * runs))
    alive = []
    try:
        for index in range(runs):
            done = subprocess.run(
                command(local_server, tmp_path, "run", f"remember fact {index}"),
                capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            alive.append(len(handoff_workers(str(memory_dir))))
        local_server.wait_for(is_extraction, timeout=HANG_GUARD)  # the worker's, held
        alive.append(len(handoff_workers(str(memory_dir))))
    finally:
        release.set()
    assert max(alive) == 1, alive
    wait_until_handed_off_work_is_done(memory_dir)
    saved = sorted(p.name for p in memory_dir.glob("fact-*.md"))
    assert saved == [f"fact-{i}.md" for i in range(runs)]
    assert handoffs(memory_dir) == []
    cursors = ExtractionState(default_state_dir(memory_dir)).root / "extract"
    assert sorted(cursors.glob("*.json")) == []


_WITHOUT_SIGNAL_HANDLERS = """
import asyncio, sys
def refuse(self, *args, **kwargs):
    raise NotImplementedError  # as on Windows
asyncio.unix_events._UnixSelectorEventLoop.add_signal_handler = refuse
from asyncrecall.cli import main
main()
"""


def test_ctrl_c_cancels_the_turn_where_the_loop_has_no_signal_handlers(
    local_server: LocalServer, side: SideModel, tmp_path: Path
) -> None:
    """On a loop without ``add_signal_handler`` (Windows), Ctrl-C in ``chat`` cancels the
    running turn (the server sees the request hang up) instead of ending the chat: the
    next line is answered and the chat exits 0 at end of input."""
    local_server.script("main", Reply(text="never", hang=True), "second answer")
    args = command(local_server, tmp_path, "chat", "--output-format", "stream-json")
    process = subprocess.Popen(
        [sys.executable, "-c", _WITHOUT_SIGNAL_HANDLERS, *args[3:]],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env(tmp_path),
    )  # fmt: skip
    try:
        assert process.stdin is not None
        process.stdin.write("a question\n")
        process.stdin.flush()
        first = local_server.wait_for(lambda r: r.model == "main", timeout=HANG_GUARD)
        process.send_signal(signal.SIGINT)
        assert local_server.wait_disconnected(first, timeout=HANG_GUARD).disconnected
        out, err = process.communicate(input="another question\n", timeout=HANG_GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    finished = [e for e in events if e["type"] == "finished"]
    assert [e["reason"] for e in finished] == ["cancelled", "stop"]
    assert finished[-1]["text"] == "second answer"


def test_a_hang_up_that_nohup_ignores_stays_ignored(
    local_server: LocalServer, side: SideModel, tmp_path: Path
) -> None:
    """Started with ``SIGHUP`` ignored (``nohup``), ``chat`` does not end on a hang-up:
    it answers the next line and exits 0 at end of input."""
    local_server.script("main", "first answer", "second answer")
    process = subprocess.Popen(
        command(local_server, tmp_path, "chat", "--output-format", "stream-json"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env(tmp_path),
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )  # fmt: skip
    try:
        ask_and_read_the_answer(process, "a question")
        process.send_signal(signal.SIGHUP)
        out, err = process.communicate(input="another question\n", timeout=HANG_GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    finished = [e for e in map(json.loads, out.splitlines()) if e["type"] == "finished"]
    assert [e["text"] for e in finished] == ["second answer"]

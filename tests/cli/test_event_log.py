"""The event log (``--event-log FILE``): the recall's stream-json events, as JSON lines,
written off the recall's path, whole lines only, bounded in size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from asyncrecall.agent import MemoryInjectedEvent, MemoryRecallStartedEvent
from asyncrecall.cli._event_log import LOGGED, EventLog, read_events
from asyncrecall.cli.console._traces import read_traces
from asyncrecall.memory import FolderStore
from asyncrecall.testing import LocalServer, Reply

HANG_GUARD = 120.0


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    return env


def test_chat_logs_the_stream_json_events_of_each_message(
    local_server: LocalServer, tmp_path: Path
) -> None:
    """With ``--event-log FILE``, ``chat`` appends the recall's events of each user message
    to FILE: the same objects its stream-json prints, in the same order, each with the
    time, the session and the message's number, after a ``user_message`` line; the
    answer's text is not logged. The console's traces read them back per message."""
    store = FolderStore(tmp_path / "memory")
    saved = store.save_memory(
        "deploy-flow", "deploys go through staging first", "project", "Use blue.", origin="user"
    )
    local_server.set_default("side", Reply(json={"selected_memories": [saved.rel_path]}))
    local_server.set_default("main", Reply(text="fine"))
    log = tmp_path / "logs" / "events.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "chat", "--output-format", "stream-json",
         "--base-url", local_server.base_url, "--api-key", "test", "--model", "main",
         "--side-model", "side", "--memory-dir", str(store.root), "--no-extract",
         "--event-log", str(log)],
        input="how do we deploy?\nand where do builds go?\n", capture_output=True, text=True,
        env=clean_env(tmp_path), cwd=tmp_path, timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    logged = list(read_events(log))
    assert [e["type"] for e in logged if e["type"] == "user_message"] == ["user_message"] * 2
    assert {e["session"] for e in logged} == {logged[0]["session"]}
    assert all(isinstance(e["at"], float) for e in logged)
    assert all("text" not in e for e in logged if e["type"] != "user_message")
    expected = [{k: v for k, v in e.items() if k != "text"} for e in printed if e["type"] in LOGGED]
    body = [
        {k: v for k, v in e.items() if k not in ("at", "session", "query")}
        for e in logged
        if e["type"] != "user_message"
    ]
    assert body == expected
    messages = [e["text"] for e in logged if e["type"] == "user_message"]
    assert messages == ["how do we deploy?", "and where do builds go?"]
    numbers = [e["query"] for e in logged]
    assert numbers == sorted(numbers) and set(numbers) == {1, 2}
    traces = read_traces(log)
    assert [t.text for t in traces] == messages[::-1]  # newest first
    injected = [e for e in printed if e["type"] == "memory_injected"]
    assert injected, "the recall delivered nothing: the trace would show no selection"
    assert [p for t in traces for p in t.selected] == [p for e in injected for p in e["paths"]]


def test_record_never_waits_for_the_file(tmp_path: Path) -> None:
    """Recording an event does not write it: while another process holds the log's lock
    (as when it rotates), ``record`` still returns at once; the line is written once the
    lock is free, and ``close`` waits for it."""
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    with FileLock(f"{path}.lock"):
        log.user_message("what is blue?")
        log.record(MemoryRecallStartedEvent(prompt_id="p1"))
        assert not path.exists()
    log.close()
    assert [e["type"] for e in read_events(path)] == ["user_message", "memory_recall_started"]


def test_the_log_rotates_and_keeps_whole_lines(tmp_path: Path) -> None:
    """Past ``max_bytes`` the log becomes ``FILE.1`` (one generation kept): the files stay
    bounded, and every line of both is a whole JSON object, read back oldest first."""
    path = tmp_path / "events.jsonl"
    event = MemoryInjectedEvent(point="user_query", paths=("a.md",), recall_ms=3.0, strategy="x")
    for round_ in range(40):
        log = EventLog(path, max_bytes=4096)  # each close is one batch, one write
        for _ in range(10):
            log.user_message(f"round {round_}")
            log.record(event)
        log.close()
    assert Path(f"{path}.1").exists()
    assert path.stat().st_size <= 4096 + 2048 and Path(f"{path}.1").stat().st_size <= 4096 + 2048
    lines = (Path(f"{path}.1").read_text() + path.read_text()).splitlines()
    assert all(json.loads(line)["type"] in ("user_message", "memory_injected") for line in lines)
    rounds = [int(e["text"].split()[1]) for e in read_events(path) if e["type"] == "user_message"]
    assert rounds == sorted(rounds) and rounds[-1] == 39


WRITER = """
import json, sys
from pathlib import Path
from asyncrecall.cli._event_log import EventLog
path, count, tag, go = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
log = EventLog(path)
lines = [(json.dumps({"type": "x", "id": f"{tag}{n}", "pad": tag * 300}) + "\\n").encode()
         for n in range(count)]
print("ready", flush=True)
while not go.exists():  # both start appending at once
    pass
for line in lines:  # one append per line: as many chances to interleave as lines
    log._append(line)
log.close()
"""


def test_two_processes_append_whole_lines(tmp_path: Path) -> None:
    """Two sessions appending to one file at the same moment: every line is one whole
    event of one of them, in each one's order; none is lost or torn."""
    path, go, count = tmp_path / "events.jsonl", tmp_path / "go", 500
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(count), tag, str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for tag in "ab"
    ]
    for writer in writers:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
    go.touch()
    for writer in writers:
        assert writer.wait(timeout=HANG_GUARD) == 0
        assert writer.stdout is not None
        writer.stdout.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 2 * count
    events = [json.loads(line) for line in lines]
    for tag in "ab":
        ids = [e["id"] for e in events if e["id"].startswith(tag)]
        assert ids == [f"{tag}{n}" for n in range(count)]


def test_an_unwritable_log_is_one_warning(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A log that cannot be written is reported once on stderr; recording goes on."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    log = EventLog(blocker / "events.jsonl")  # a folder under a file: cannot be made
    for _ in range(3):
        log.user_message("hello there")
    log.close()
    err = capfd.readouterr().err
    assert err.count("warning: event log") == 1


def test_a_trace_says_why_a_message_got_no_memory(tmp_path: Path) -> None:
    """Each user message is one trace: a skipped recall says why, a dropped one says how
    (and whether it had settled), a delivered one where and what; newest first."""
    from asyncrecall.agent import MemoryDiscardedEvent, MemoryRecallSkippedEvent

    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    log.user_message("ok")
    log.record(MemoryRecallSkippedEvent(prompt_id="p1", reason="nothing_to_recall"))
    log.user_message("how do we deploy?")
    log.record(MemoryRecallStartedEvent(prompt_id="p2"))
    log.record(MemoryDiscardedEvent(reason="turn_ended", settled=False))
    log.user_message("and the queue?")
    log.record(MemoryRecallStartedEvent(prompt_id="p3"))
    log.record(
        MemoryInjectedEvent(point="tool_result", paths=("q.md",), recall_ms=800.0, strategy="m")
    )
    log.close()
    newest, dropped, skipped = read_traces(path)
    assert (newest.outcome, newest.selected, newest.delivered) == ("tool_result", ["q.md"], True)
    assert newest.started_at is not None and newest.settled_at is not None
    assert newest.settled_at == pytest.approx(newest.started_at + 0.8)
    assert dropped.outcome == "discarded (turn_ended, still running)" and not dropped.delivered
    assert skipped.outcome == "skipped: too_short" and skipped.started_at is None


def test_a_run_whose_recall_finds_nothing_says_why(
    local_server: LocalServer, tmp_path: Path
) -> None:
    """``run`` of a question no memory matches: stream-json and the event log say why
    the recall and the instant pass brought nothing (``memory_recall_empty``, the
    selector's reason, through the reader process that reads the folder ahead), and the
    console's trace shows it."""
    store = FolderStore(tmp_path / "memory")
    store.save_memory(
        "deploy-flow", "deploys go through staging first", "project", "Use blue.", origin="user"
    )
    local_server.set_default("main", Reply(text="fine"))
    log = tmp_path / "events.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "run", "which colour suits the kitchen walls?",
         "--output-format", "stream-json", "--base-url", local_server.base_url,
         "--api-key", "test", "--model", "main", "--selector", "lexical",
         "--memory-dir", str(store.root), "--no-extract", "--event-log", str(log)],
        capture_output=True, text=True, env=clean_env(tmp_path), cwd=tmp_path,
        timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    empty = [(e["strategy"], e["reason"]) for e in printed if e["type"] == "memory_recall_empty"]
    assert empty == [("lexical", "no_match"), ("instant-lexical", "no_match")]
    assert not [e for e in printed if e["type"] == "memory_injected"]
    logged = [e for e in read_events(log) if e["type"] == "memory_recall_empty"]
    assert [(e["strategy"], e["reason"]) for e in logged] == empty
    (trace,) = read_traces(log)
    assert trace.misses == ["lexical: nothing (no_match)", "instant-lexical: nothing (no_match)"]

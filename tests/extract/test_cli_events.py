"""``chat`` shows what background extraction did: JSON lines in stream-json, a dim line
in text, nothing in json; the query's own events are unchanged (a real CLI process
against the local server)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from asyncrecall.agent import (
    ContentEvent,
    FinishedEvent,
    MemoryConsolidatedEvent,
    MemoryExtractedEvent,
    MemoryExtractionSkippedEvent,
    MemoryExtractionStartedEvent,
)
from asyncrecall.cli._render import EventPrinter
from asyncrecall.testing import LocalServer, Reply

from .conftest import HANG_GUARD, SideModel, memory, wait_until_handed_off_work_is_done

EXTRACTION_TYPES = {
    "memory_extraction_started",
    "memory_extracted",
    "memory_extraction_skipped",
    "memory_consolidated",
}


def chat(
    server: LocalServer, tmp_path: Path, lines: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    project = tmp_path / "project"
    project.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    return subprocess.run(
        [sys.executable, "-m", "asyncrecall", "chat", "--base-url", server.base_url,
         "--api-key", "t", "--model", "main", "--side-model", "side",
         "--project", str(project), "--memory-dir", str(tmp_path / "memory"), *flags],
        input=lines, capture_output=True, text=True, env=env, timeout=HANG_GUARD,
    )  # fmt: skip


def extraction_committed(memory_dir: Path) -> threading.Event:
    """An event set once an extraction of the folder has moved its cursor past the first
    query (its writes committed). A main reply gated on it holds the next query until
    then: chat's exit at the end of its input would hand a running extraction on to a
    worker instead (``test_handoff.py``), and its events would not be this process's."""
    committed = threading.Event()
    cursors = memory_dir.with_name(f"{memory_dir.name}.state") / "extract"

    def watch() -> None:
        deadline = time.monotonic() + HANG_GUARD
        while time.monotonic() < deadline:
            for cursor in cursors.glob("*.json") if cursors.is_dir() else ():
                with contextlib.suppress(OSError, ValueError):
                    if json.loads(cursor.read_text()).get("offset", 0) >= 2:
                        committed.set()
                        return
            time.sleep(0.005)

    threading.Thread(target=watch, daemon=True).start()
    return committed


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_stream_json_adds_one_line_per_extraction_event_and_changes_nothing_else(
    local_server: LocalServer, side: SideModel, tmp_path: Path
) -> None:
    """Each extraction event is one JSON line shaped as its ``to_dict``; with them
    filtered out, the stream is the one ``--no-extract`` gives (same types, same
    order): existing consumers see what they saw before, plus lines they can skip."""
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."))
    held = extraction_committed(tmp_path / "on" / "memory")
    local_server.script("main", "noted", Reply(text="ok", gate=held))
    on = chat(local_server, tmp_path / "on", "we deploy on fridays\nthanks\n",
              "--output-format", "stream-json")  # fmt: skip
    assert on.returncode == 0, on.stderr
    local_server.script("main", "noted", "ok")
    off = chat(local_server, tmp_path / "off", "we deploy on fridays\nthanks\n",
               "--output-format", "stream-json", "--no-extract")  # fmt: skip
    assert off.returncode == 0, off.stderr

    events = json_lines(on.stdout)
    extraction = [e for e in events if e["type"] in EXTRACTION_TYPES]
    assert [e["type"] for e in extraction][:2] == ["memory_extraction_started", "memory_extracted"]
    saved = next(e for e in extraction if e["type"] == "memory_extracted")
    assert set(saved) == {"type", *(f.name for f in dataclasses.fields(MemoryExtractedEvent))}
    assert saved["paths"] == ["deploy-day.md"] and saved["created"] == ["deploy-day.md"]
    assert saved["start"] == 0 and saved["end"] == 2
    rest = [e["type"] for e in events if e["type"] not in EXTRACTION_TYPES]
    assert rest == [e["type"] for e in json_lines(off.stdout)]
    assert [e["text"] for e in events if e["type"] == "finished"] == ["noted", "ok"]
    assert not any(e["type"] in EXTRACTION_TYPES for e in json_lines(off.stdout))


def test_text_shows_a_dim_line_on_stderr_and_json_shows_nothing(
    local_server: LocalServer, side: SideModel, tmp_path: Path
) -> None:
    """Text: the answers on stdout as before, ``memory: saved 1 (deploy-day.md)`` on
    stderr. json: one result object per query, no extraction object among them."""
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."))
    held = extraction_committed(tmp_path / "text" / "memory")
    local_server.script("main", "noted", Reply(text="ok", gate=held))
    text = chat(local_server, tmp_path / "text", "we deploy on fridays\nthanks\n")
    assert text.returncode == 0, text.stderr
    assert text.stdout == "noted\n\nok\n"
    assert "· memory: saved 1 (deploy-day.md)" in text.stderr
    wait_until_handed_off_work_is_done(tmp_path / "text" / "memory")  # the second query's

    # json: the second answer waits until the first query's extraction was answered, so
    # its events happen while the second query runs; they stay out of its object.
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."))
    held = extraction_committed(tmp_path / "json" / "memory")
    local_server.script("main", "noted", Reply(text="ok", gate=held))
    two = chat(local_server, tmp_path / "json", "we deploy on fridays\nthanks\n",
               "--output-format", "json")  # fmt: skip
    assert two.returncode == 0, two.stderr
    results = json_lines(two.stdout)
    assert [r["type"] for r in results] == ["result", "result"]
    assert [r["result"] for r in results] == ["noted", "ok"]
    assert not any(e["type"] in EXTRACTION_TYPES for r in results for e in r["events"])
    assert (tmp_path / "json" / "memory" / "deploy-day.md").is_file()  # it did extract


def test_a_background_line_waits_for_the_answer_being_written() -> None:
    """Text mode never splits an answer: a background line arriving while the answer
    streams is printed once the query has finished; routine skips print nothing."""
    out, err = io.StringIO(), io.StringIO()
    printer = EventPrinter("text", out=out, err=Console(file=err, highlight=False))
    saved = MemoryExtractedEvent(
        session_id="s", paths=("a.md", "b.md"), created=("a.md",), updated=("b.md",),
        refused=1, start=0, end=2, elapsed_ms=3.0,
    )  # fmt: skip

    printer.show(ContentEvent(text="half an ans"))
    printer.show_background(MemoryExtractionStartedEvent(session_id="s", end=2))
    printer.show_background(saved)
    assert err.getvalue() == ""
    printer.show(ContentEvent(text="wer"))
    printer.show(FinishedEvent(text="half an answer", reason="stop", turns=1))
    assert out.getvalue() == "half an answer\n"
    assert err.getvalue() == "· memory: saved 2 (a.md, b.md), 1 refused\n"

    printer.show_background(MemoryExtractionSkippedEvent(reason="superseded"))
    printer.show_background(MemoryExtractionSkippedEvent(reason="error", detail="HTTP 500"))
    printer.show_background(
        MemoryConsolidatedEvent(written=("a.md",), removed=("c.md",), actions=2)
    )
    assert err.getvalue().splitlines()[1:] == [
        "· memory: extraction failed: HTTP 500",
        "· memory: consolidated, 2 action(s) (a.md, -c.md)",
    ]

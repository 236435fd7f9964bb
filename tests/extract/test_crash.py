"""Cursor correctness across a crash: a real process killed mid-extraction, restarted."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from asyncrecall.memory import FolderStore, read_source_offsets
from asyncrecall.memory.extraction._state import ExtractionState, default_state_dir
from asyncrecall.testing import LocalServer

from .conftest import (
    HANG_GUARD,
    SideModel,
    is_extraction,
    kill_mid_extraction,
    memory,
    offsets_in_prompt,
)

WORKER = Path(__file__).with_name("_crash_worker.py")


def transcript(n: int) -> str:
    roles = ("user", "assistant")
    return json.dumps([{"offset": i, "role": roles[i % 2], "text": f"turn {i}"} for i in range(n)])


def worker(server: LocalServer, memory_dir: Path, n: int, *crash: str) -> list[str]:
    return [sys.executable, str(WORKER), str(memory_dir), server.base_url, "s1", transcript(n),
            *crash]  # fmt: skip


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def names(store: FolderStore) -> list[str]:
    return sorted(doc.name for doc in store.scan(limit=None))


def test_killed_during_the_side_query_then_restarted_loses_nothing_and_repeats_nothing(
    local_server: LocalServer, side: SideModel, memory_dir: Path
) -> None:
    """A process killed (SIGKILL) while its side query is out leaves the cursor where the
    last completed extraction put it: the restarted extraction covers exactly the
    unprocessed turns, every fact is written once, none is lost."""
    store = FolderStore(memory_dir)
    state = ExtractionState(default_state_dir(memory_dir))
    side.add(memory("First", [0, 1]))
    done = subprocess.run(worker(local_server, memory_dir, 2), env=env(), capture_output=True,
                          text=True, timeout=HANG_GUARD)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert state.cursor("s1") == 2

    held = threading.Event()
    side.add(memory("Second", [2, 3]), gate=held)
    kill_mid_extraction(local_server, worker(local_server, memory_dir, 4), env(), [2, 3])
    assert state.cursor("s1") == 2 and names(store) == ["First"]
    assert state.journal("s1") is None
    side.replies.clear()

    side.add(memory("Second", [2, 3]))
    done = subprocess.run(worker(local_server, memory_dir, 4), env=env(), capture_output=True,
                          text=True, timeout=HANG_GUARD)  # fmt: skip
    assert done.returncode == 0, done.stderr

    extractions = [r for r in local_server.requests if is_extraction(r)]
    assert [offsets_in_prompt(r) for r in extractions] == [[0, 1], [2, 3], [2, 3]]
    assert names(store) == ["First", "Second"]
    assert state.cursor("s1") == 4
    second = next(d for d in store.scan() if d.name == "Second")
    assert read_source_offsets(second.path) == {"s1": (2, 3)}


def test_crash_half_way_through_the_writes_is_rolled_forward_without_asking_again(
    local_server: LocalServer, side: SideModel, memory_dir: Path
) -> None:
    """A process that dies after writing one of two memories leaves its journal; the
    restart writes the rest from the journal (not a new side query, whose answer could
    differ), moves the cursor, and every memory exists exactly once."""
    store = FolderStore(memory_dir)
    state = ExtractionState(default_state_dir(memory_dir))
    side.add(memory("Alpha", [0]), memory("Beta", [1]))
    crashed = subprocess.run(worker(local_server, memory_dir, 2, "1"), env=env(),
                             capture_output=True, text=True, timeout=HANG_GUARD)  # fmt: skip
    assert crashed.returncode == 9, crashed.stderr
    assert names(store) == ["Alpha"] and state.cursor("s1") == 0
    assert state.journal("s1") is not None

    done = subprocess.run(worker(local_server, memory_dir, 2), env=env(), capture_output=True,
                          text=True, timeout=HANG_GUARD)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["recovered"] is True
    assert len([r for r in local_server.requests if is_extraction(r)]) == 1
    assert names(store) == ["Alpha", "Beta"]
    index = store.index_path.read_text()
    assert index.count("](alpha.md)") == 1 and index.count("](beta.md)") == 1
    assert state.cursor("s1") == 2 and state.journal("s1") is None


async def test_a_crashed_sessions_journal_is_rolled_forward_by_another_session(
    local_server: LocalServer, side: SideModel, memory_dir: Path
) -> None:
    """A CLI session never comes back (a new process has a new session id), so its
    journal is rolled forward by the next extraction of any session once it is stale
    (over ten minutes old: its writer is dead). Only writes nobody has overwritten
    since: a newer memory of the same name is kept; a fresh journal is left alone."""
    from asyncrecall.memory import MemoryExtractor, TranscriptTurn
    from asyncrecall.models import OpenAIModel

    store = FolderStore(memory_dir)
    state = ExtractionState(default_state_dir(memory_dir))
    side.add(memory("Alpha", [0]), memory("Beta", [1]), memory("Gamma", [1]))
    command = worker(local_server, memory_dir, 2, "1")
    command[command.index("s1")] = "dead"
    crashed = await asyncio.to_thread(
        subprocess.run, command, env=env(), capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert crashed.returncode == 9, crashed.stderr
    assert names(store) == ["Alpha"] and state.journal("dead") is not None
    model = OpenAIModel(model="side", base_url=local_server.base_url, api_key="t", max_retries=0)
    live = [TranscriptTurn(0, "user", "hello"), TranscriptTurn(1, "assistant", "hi")]
    try:
        extractor = MemoryExtractor(store, model)
        await extractor.extract("live", live[:1])
        assert state.journal("dead") is not None and names(store) == ["Alpha"]  # fresh: alone

        store.save_memory(
            "Gamma", "newer", "project", "Gamma as someone wrote it later.", origin="user"
        )
        journal_file = state.journal_path("dead")
        long_ago = journal_file.stat().st_mtime - 3600
        os.utime(journal_file, (long_ago, long_ago))
        await extractor.extract("live", live)
    finally:
        await model.aclose()

    assert names(store) == ["Alpha", "Beta", "Gamma"]
    assert store.get("Gamma").body == "Gamma as someone wrote it later."
    assert read_source_offsets(store.get("Beta").path) == {"dead": (1,)}
    assert state.journal("dead") is None and state.cursor("dead") == 2
    assert len([r for r in local_server.requests if is_extraction(r)]) == 3

"""Single flight per memory folder: two sessions of one process never extract at once."""

from __future__ import annotations

import asyncio
import threading

from asyncrecall.agent import ExtractionScheduler
from asyncrecall.memory import FolderStore, MemoryExtractor
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer

from .conftest import HANG_GUARD, SideModel, is_extraction, memory


async def test_two_sessions_on_one_folder_take_turns(
    store: FolderStore, side: SideModel, local_server: LocalServer, side_model: OpenAIModel
) -> None:
    """The second session's extraction goes out only after the first one's ended."""
    held = threading.Event()
    side.add(memory("From A", [0]), gate=held)
    side.add(memory("From B", [0]))
    a = ExtractionScheduler(MemoryExtractor(store, side_model), session_id="a")
    b = ExtractionScheduler(MemoryExtractor(store, side_model), session_id="b")
    log: list[str] = []
    a.add_listener(lambda e: log.append(f"a {e.type}"))
    b.add_listener(lambda e: log.append(f"b {e.type}"))
    a.query_completed("fact for a", "ok", saved_memory=False)
    first = await local_server.await_for(is_extraction, timeout=HANG_GUARD)
    b.query_completed("fact for b", "ok", saved_memory=False)
    await asyncio.sleep(0)  # b's task takes its first step: it stops at the folder lock
    assert b.running and log == ["a memory_extraction_started"]
    assert [r for r in local_server.requests if is_extraction(r)] == [first]

    held.set()
    await a.wait_idle()
    await b.wait_idle()
    one, two = [r for r in local_server.requests if is_extraction(r)]
    assert one.finished_at is not None and two.arrived_at > one.finished_at
    assert log == [
        "a memory_extraction_started",
        "a memory_extracted",
        "b memory_extraction_started",
        "b memory_extracted",
    ]
    assert sorted(d.name for d in store.scan()) == ["From A", "From B"]
    await a.aclose()
    await b.aclose()

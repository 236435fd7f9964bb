"""``async with X(...) as x:`` closes ``x`` on exit, for every public class with an ``aclose``:
the agent client, the agent, the extraction scheduler, the prefetcher and the
OpenAI-compatible models."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from asyncrecall import Agent, AgentClient, Recaller, RecallPrefetcher
from asyncrecall.agent import ExtractionScheduler, ToolRegistry
from asyncrecall.memory import FolderStore, MemoryExtractor, ModelSelector
from asyncrecall.models import FunctionCall, OpenAIModel
from asyncrecall.models._openai import open_openai_models
from asyncrecall.testing import LocalServer, Reply, ScriptedModel


@pytest.fixture
def store(tmp_path: Path) -> FolderStore:
    memory = FolderStore(tmp_path / "memory")
    memory.save_memory(
        "deploy steps", "how to deploy to staging", "project", "make deploy", origin="user"
    )
    return memory


def _stuck_side() -> tuple[ScriptedModel, asyncio.Event]:
    """A side model whose one selector answer waits for a gate the test never opens."""
    side = ScriptedModel(name="side")
    gate = asyncio.Event()
    side.add_json({"selected_memories": ["deploy-steps.md"]}, gate=gate)
    return side, gate


async def _turn_with_a_tool_call(client: AgentClient) -> None:
    """One user query whose answer is a tool call: the turn ends with its recall still
    pending (it may yet ride on the tool result), so only closing can cancel it."""
    async for _ in client.send_message_stream("how do I deploy to staging?"):
        pass


async def test_leaving_async_with_recall_prefetcher_cancels_its_running_recalls(
    store: FolderStore,
) -> None:
    """On exit, every running recall is cancelled (the side query with it) and drained."""
    side, _ = _stuck_side()
    async with RecallPrefetcher(Recaller(store, ModelSelector(side, fallback=None))) as recall:
        assert recall.start("t1", "how do I deploy to staging?")
        await side.wait_until(lambda m: m.json_started == 1)
        pending = recall.pending("t1")
        assert pending is not None and side.json_cancelled == 0
    assert side.json_cancelled == 1
    assert pending.task.done()
    with pytest.raises(RuntimeError, match="closed"):
        recall.start("t2", "anything")


async def test_leaving_async_with_agent_client_cancels_the_pending_recall(
    store: FolderStore,
) -> None:
    """The recall a turn left pending is cancelled on exit; the model stays open."""
    main = ScriptedModel(name="main")
    main.add_turn("", [FunctionCall("c1", "glob", {"pattern": "*.md"})])
    side, _ = _stuck_side()
    memory = Recaller(store, ModelSelector(side, fallback=None))
    async with AgentClient(model=main, memory=memory) as client:
        await _turn_with_a_tool_call(client)
        pending = client.pending_prefetch
        assert pending is not None and not pending.task.done()
        assert side.json_cancelled == 0
    assert side.json_cancelled == 1
    assert pending.task.done()


async def test_leaving_async_with_agent_ends_its_extraction_and_closes_its_client(
    tmp_path: Path, store: FolderStore
) -> None:
    """The agent's exit ends its background extraction (here handed on, as ``run`` does)
    and closes its client, whose pending recall is cancelled."""
    main = ScriptedModel(name="main")
    main.add_turn("", [FunctionCall("c1", "glob", {"pattern": "*.md"})])
    side, _ = _stuck_side()
    client = AgentClient(model=main, memory=Recaller(store, ModelSelector(side, fallback=None)))
    handed: list[object] = []
    scheduler = ExtractionScheduler(MemoryExtractor(store, side), handoff=handed.append)
    async with Agent(client, ToolRegistry(tmp_path)) as agent:
        agent.extraction = scheduler
        await _turn_with_a_tool_call(client)
        assert client.pending_prefetch is not None and side.json_cancelled == 0
        assert handed == []
    assert side.json_cancelled == 1
    assert handed == [None]  # nothing was owed, and the scheduler was ended


async def test_leaving_async_with_an_extraction_scheduler_ends_it(store: FolderStore) -> None:
    """On exit the scheduler is ended: what it owes is handed on (nothing, here) and it
    takes no new requests."""
    handed: list[object] = []
    side = ScriptedModel(name="side")
    async with ExtractionScheduler(MemoryExtractor(store, side), handoff=handed.append) as s:
        assert handed == []
    assert handed == [None]
    s.request()
    assert not s.running and side.json_started == 0


async def test_leaving_async_with_an_openai_model_or_pair_closes_its_clients(
    local_server: LocalServer,
) -> None:
    """An :class:`OpenAIModel` closes the HTTP client it made; a pair closes both."""
    local_server.script("main", Reply(json={"ok": True}))
    pair = open_openai_models(model="main", base_url=local_server.base_url, max_retries=0)
    async with pair.main as model:
        assert isinstance(model, OpenAIModel)
        assert await model.generate_json(
            system="s", prompt="p", schema={"type": "object"}, schema_name="ok"
        ) == {"ok": True}
        assert not pair.main_client.is_closed()
    assert pair.main_client.is_closed() and not pair.side_client.is_closed()
    async with pair:
        pass
    assert pair.side_client.is_closed()

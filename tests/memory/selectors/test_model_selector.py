"""The model selector over real HTTP: the suite's LocalServer and the OpenAI-compatible model.

Bad JSON, an unknown path and HTTP 500 fall back to lexical; a cancel makes the server
see the side query's connection close, and recall returns empty.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator

import pytest

from asyncrecall import CancelSignal
from asyncrecall.memory import EMPTY_RECALL, FolderStore, MemoryDoc, ModelSelector, Recaller
from asyncrecall.models._openai import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

from ..conftest import WriteFile, memory_doc, topic


@pytest.fixture
async def side(local_server: LocalServer) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(model="side", base_url=local_server.base_url, max_retries=0) as model:
        yield model


@pytest.fixture
def manager(store: FolderStore, write: WriteFile, side: OpenAIModel) -> Recaller:
    write("db.md", topic("Database", description="testing the db", body="Use real Postgres."))
    write("notes/style.md", topic("Style", description="code style", body="ruff, mypy"))
    return Recaller(store, ModelSelector(side))


async def test_the_side_query_on_the_wire(local_server: LocalServer, manager: Recaller) -> None:
    """Non-streamed, temperature 0, json_schema with ``selected_memories``; manifest lines."""
    local_server.script("side", Reply(json={"selected_memories": ["notes/style.md"]}))
    result = await manager.recall("which style rules?")
    assert (result.strategy, result.paths) == ("model", ("notes/style.md",))
    request = local_server.requests[-1]
    assert request.path.endswith("/chat/completions")
    assert request.model == "side" and request.stream is False
    assert request.body["temperature"] == 0
    assert request.response_format_type == "json_schema"
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["selected_memories"]["maxItems"] == 5
    text = json.dumps(request.messages)
    assert "which style rules?" in text
    assert "db.md" in text and "notes/style.md" in text
    assert "Use real Postgres." not in text


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(raw_content="this is not JSON"), "ModelProtocolError"),
        (Reply(json={"selected_memories": ["invented.md"]}), "not offered"),
        (Reply(status=500, error_message="boom"), "ModelServerError"),
    ],
    ids=["bad-json", "unknown-path", "http-500"],
)
async def test_failures_fall_back_to_lexical(
    local_server: LocalServer, manager: Recaller, reply: Reply, reason: str
) -> None:
    local_server.script("side", reply)
    result = await manager.recall("testing the database")
    assert (result.strategy, result.paths) == ("lexical", ("db.md",))
    assert result.fallback_reason is not None and reason in result.fallback_reason


async def test_a_cancel_closes_the_side_query_connection(
    local_server: LocalServer, manager: Recaller
) -> None:
    """The server sees the side query hang up; recall returns EMPTY_RECALL."""
    gate = threading.Event()
    local_server.script("side", Reply(json={"selected_memories": ["db.md"]}, gate=gate))
    cancel = CancelSignal()
    try:
        task = asyncio.create_task(manager.recall("database", cancel=cancel))
        request = await local_server.await_for(lambda r: r.is_side_query)
        cancel.cancel()
        async with asyncio.timeout(5):
            assert await task is EMPTY_RECALL
        await local_server.await_disconnected(request)
        assert request.status is None  # nothing was answered
    finally:
        gate.set()


def _docs(*descriptions: str) -> list[MemoryDoc]:
    return [
        memory_doc(f"note-{n}.md", "body", name=f"Note {n}", description=text)
        for n, text in enumerate(descriptions)
    ]


def test_the_manifest_bound_is_computed_for_the_memories_given() -> None:
    """``offer`` remembers its last answer only for the very same memories and bounds:
    a memory rewritten (a new object), other memories or new bounds are measured again."""
    selector = ModelSelector(object(), fallback=None, manifest_files=10, manifest_bytes=200)  # type: ignore[arg-type]
    docs = _docs("short", "short too")
    assert selector.offer(docs) == docs
    assert selector.offer(list(docs)) == docs  # a new list of the same memories
    longer = [docs[0], *_docs("x" * 300)[:1]]
    assert selector.offer(longer) == longer[:1]
    assert selector.offer(docs) == docs
    selector.manifest_files = 1
    assert selector.offer(docs) == docs[:1]


def test_prefer_reads_nothing_when_the_manifest_lists_everything() -> None:
    """Every memory fits: the order is the store's and the field index is not asked;
    the manifest cut: the memory whose name answers comes first."""
    docs = [
        memory_doc("tea.md", "Green tea.", name="Tea", description="drinks"),
        memory_doc("go.md", "Tabs.", name="Indent style for Go", description="indent style"),
    ]
    selector = ModelSelector(object(), fallback=None)  # type: ignore[arg-type]
    assert list(selector.prefer("how do I indent Go code?", docs)) == docs
    assert not selector.fields.ready(docs)  # never indexed: nothing was read
    selector.manifest_files = 1
    assert [d.rel_path for d in selector.prefer("how do I indent Go code?", docs)] == [
        "go.md",
        "tea.md",
    ]

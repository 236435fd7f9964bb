"""Shared pieces of the adapter tests: a memory folder, a side model over HTTP, and
readers of what the LocalServer saw on the wire.

Every adapter test runs the framework's real agent loop against the suite's
:class:`~asyncrecall.testing.LocalServer`: the main model is ``main``, the memory side
query goes to ``side``. Assertions read the server's request records.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest

import eager_loops
from asyncrecall.memory import LexicalSelector, MemoryManager, MemoryStore, ModelSelector
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, RecordedRequest, Reply

if eager_loops.ENABLED:  # make test-py313: every test of this folder on an eager loop
    pytest_asyncio_loop_factories = eager_loops.loop_factories

MEMORY_MARK = "## Relevant memory"

#: For the tests that run litellm (the google-adk extra) only. The first of them in a
#: process to send a request through litellm makes it build pydantic TypeAdapters of its
#: own ``ReadOnly`` TypedDicts (ten classes in 1.110), and pydantic warns that it cannot
#: protect those items. In every other test the warning still fails.
LITELLM_WARNINGS = pytest.mark.filterwarnings(
    "ignore:Items? .* (is|are) using the `ReadOnly` qualifier:UserWarning"
)


@pytest.fixture
async def side_model(local_server: LocalServer) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(model="side", base_url=local_server.base_url, max_retries=0) as model:
        yield model


@pytest.fixture
async def slow(store: MemoryStore, side_model: OpenAIModel) -> AsyncIterator[RecallPrefetcher]:
    """A prefetcher whose recall is a side query to the LocalServer's ``side`` model."""
    async with RecallPrefetcher(MemoryManager(store, ModelSelector(side_model))) as prefetcher:
        yield prefetcher


@pytest.fixture
async def fast(store: MemoryStore) -> AsyncIterator[RecallPrefetcher]:
    """A prefetcher with the lexical selector, warm: settled within one loop tick."""
    async with RecallPrefetcher(MemoryManager(store, LexicalSelector())) as prefetcher:
        await prefetcher.warm()
        yield prefetcher


def side_reply(*paths: str, gate: threading.Event | None = None) -> Reply:
    return Reply(json={"selected_memories": list(paths)}, gate=gate)


def main_requests(server: LocalServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.model == "main"]


def side_requests(server: LocalServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.model == "side"]


def text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def memory_indexes(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the messages that carry a memory block."""
    return [i for i, m in enumerate(messages) if MEMORY_MARK in text_of(m)]


def assert_valid_chat(messages: Sequence[Mapping[str, Any]]) -> None:
    """What a strict OpenAI-compatible server checks: at most one system message, first;
    every tool message answers a tool call of the assistant message right before its
    block of tool messages; every tool call is answered before anything else."""
    roles = [m["role"] for m in messages]
    assert roles.count("system") + roles.count("developer") <= 1, roles
    if "system" in roles:
        assert roles.index("system") == 0, roles
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, f"orphan tool message {message}"
            open_calls.discard(message["tool_call_id"])
            continue
        assert not open_calls, f"tool calls {open_calls} unanswered before a {message['role']}"
        if message["role"] == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    assert not open_calls


def memory_after_tools(messages: Sequence[Mapping[str, Any]]) -> None:
    """The one memory message comes right after the last tool message of its round."""
    (at,) = memory_indexes(messages)
    assert messages[at]["role"] == "user"
    assert messages[at - 1]["role"] == "tool"
    before = messages[:at]
    last_assistant = max(i for i, m in enumerate(before) if m["role"] == "assistant")
    calls = {c["id"] for c in messages[last_assistant].get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in messages[last_assistant + 1 : at]}
    assert calls and answered == calls


class Ending:
    """Test (c)'s scaffolding, the same for every framework: a side query that never
    answers, and a main reply that lets the run end as ``ending`` ("returns",
    "raises", "is cancelled", "is left early") once :meth:`finish` releases it."""

    def __init__(self, server: LocalServer, ending: str) -> None:
        self.server, self.ending = server, ending
        self.release = threading.Event()
        server.script("side", Reply(hang=True))
        if ending == "raises":
            main = Reply(status=400, error_message="bad request", gate=self.release)
        elif ending == "is cancelled":
            main = Reply(hang=True)
        else:
            main = Reply(text="ok", gate=self.release)
        server.script("main", main)

    async def started(self) -> RecordedRequest:
        """The side query, once it and the first main request are out."""
        side = await self.server.await_for(lambda r: r.model == "side")
        await self.server.await_for(lambda r: r.model == "main")
        return side

    async def finish(
        self,
        task: asyncio.Task[Any],
        side: RecordedRequest,
        prefetcher: RecallPrefetcher,
        key: str,
        *,
        error: type[BaseException] | tuple[type[BaseException], ...],
        cancel_raises: bool = True,
    ) -> None:
        """Let the run end; check how it ended, that the server saw the side query hang
        up, and that the prefetcher holds nothing for ``key``."""
        self.release.set()
        if self.ending == "raises":
            with pytest.raises(error):
                await task
        elif self.ending == "is cancelled" and cancel_raises:
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            await task
        await self.server.await_disconnected(side)
        assert prefetcher.pending(key) is None

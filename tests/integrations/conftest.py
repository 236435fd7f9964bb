"""Shared pieces of the adapter tests: a memory folder, a side model over HTTP, and
readers of what the LocalServer saw on the wire (the conformance kit's).

Every adapter test runs the framework's real agent loop against a
:class:`~asyncrecall.testing.LocalServer`: the main model is ``main``, the memory side
query goes to ``side``. Assertions read the server's request records. The recall
contract itself is the conformance kit's (:mod:`asyncrecall_conformance`): each
adapter's test module subclasses its suite with a driver. Under
``ASYNCRECALL_EAGER_TASKS=1`` (``make test-py313 PY313_TESTS=tests``) its cases run on
eager-task loops like the rest of this folder (they pass there: none is marked
``plain_loop``); ``make test`` runs this folder once, on plain loops.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

import eager_loops
from asyncrecall.memory import FolderStore, LexicalSelector, ModelSelector, Recaller
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from asyncrecall_conformance import (
    MEMORY_MARK,
    assert_valid_chat,
    memory_indexes,
    text_of,
)

__all__ = ["MEMORY_MARK", "assert_valid_chat", "memory_indexes", "text_of"]

if eager_loops.ENABLED:  # ASYNCRECALL_EAGER_TASKS=1: every test of this folder on an eager loop
    pytest_asyncio_loop_factories = eager_loops.loop_factories

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
async def slow(store: FolderStore, side_model: OpenAIModel) -> AsyncIterator[RecallPrefetcher]:
    """A prefetcher whose recall is a side query to the LocalServer's ``side`` model."""
    async with RecallPrefetcher(Recaller(store, ModelSelector(side_model))) as prefetcher:
        yield prefetcher


@pytest.fixture
async def fast(store: FolderStore) -> AsyncIterator[RecallPrefetcher]:
    """A prefetcher with the lexical selector, warm: settled within one loop tick."""
    async with RecallPrefetcher(Recaller(store, LexicalSelector())) as prefetcher:
        await prefetcher.warm()
        yield prefetcher


def side_reply(*paths: str, gate: threading.Event | None = None) -> Reply:
    return Reply(json={"selected_memories": list(paths)}, gate=gate)


def main_requests(server: LocalServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.model == "main"]


def side_requests(server: LocalServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.model == "side"]


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

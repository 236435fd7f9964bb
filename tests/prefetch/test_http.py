"""The prefetcher over real HTTP: the side query is a request to the suite's LocalServer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncrecall.memory import FolderStore, ModelSelector, Recaller
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, Reply

from .conftest import selection


@pytest.fixture
async def side_http(local_server: LocalServer) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(model="side", base_url=local_server.base_url, max_retries=0) as model:
        yield model


async def test_cancel_hangs_up_the_side_query(
    local_server: LocalServer, store: FolderStore, side_http: OpenAIModel
) -> None:
    """Cancelling a conversation's recall closes its side query's HTTP connection: the
    server sees the client hang up."""
    local_server.script("side", Reply(hang=True))
    async with RecallPrefetcher(Recaller(store, ModelSelector(side_http))) as prefetcher:
        prefetcher.start("t", "how do I deploy?")
        request = await local_server.await_for(lambda r: r.model == "side")
        prefetcher.cancel("t")
        await local_server.await_disconnected(request)


async def test_leaving_the_context_hangs_up_every_side_query(
    local_server: LocalServer, store: FolderStore, side_http: OpenAIModel
) -> None:
    """Leaving ``async with`` closes the side query of every conversation."""
    local_server.script("side", Reply(hang=True), Reply(hang=True))
    async with RecallPrefetcher(Recaller(store, ModelSelector(side_http))) as prefetcher:
        prefetcher.start("a", "how do I deploy?")
        prefetcher.start("b", "who am I?")
        await local_server.await_for(lambda r: r.index == 1)
    for request in local_server.requests:
        await local_server.await_disconnected(request)


async def test_a_settled_recall_over_http_is_taken(
    local_server: LocalServer, store: FolderStore, side_http: OpenAIModel, paths: dict[str, str]
) -> None:
    """The side model's answer over HTTP becomes the conversation's memory block."""
    local_server.script("side", Reply(json=selection(paths["deploy-flow"])))
    async with RecallPrefetcher(Recaller(store, ModelSelector(side_http))) as prefetcher:
        prefetcher.start("t", "how do I deploy?")
        assert await prefetcher.wait_settled("t", 5)
        block = prefetcher.take("t", "user_query")
    assert block is not None and block.paths == (paths["deploy-flow"],)

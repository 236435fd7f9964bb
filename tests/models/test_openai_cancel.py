"""Cancelling a model call closes its HTTP connection, and the cancellation propagates.

Each test synchronises on the server's records (``await_for``), never on sleeps, and
asserts what the server saw: the client hung up (``disconnected``) before the
response was complete.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from asyncrecall.models import OpenAIModel, TextDelta, user_content
from asyncrecall.testing import LocalServer, Reply

from .helpers import run_turn

GUARD = 5.0  # seconds; a hang guard only


async def _cancel(task: asyncio.Task[object]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_cancel_mid_stream_closes_the_connection(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Cancelling the task consuming a stream, after text arrived, hangs up the connection."""
    local_server.script("main", Reply(text="abcdefgh", chunk_size=1, stall_after=3))
    got_text = asyncio.Event()

    async def consume() -> None:
        async for event in model.stream([user_content("hi")]):
            if isinstance(event, TextDelta):
                got_text.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(GUARD):
        await got_text.wait()
    request = local_server.requests[0]
    assert request.first_byte_at is not None
    assert not request.disconnected
    await _cancel(task)
    await local_server.await_disconnected(request)
    assert request.finished_at is None


async def test_cancel_before_first_byte_closes_the_connection(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Cancelling while the server has not answered anything yet also hangs up."""
    local_server.script("main", Reply(text="never", hang=True))
    task = asyncio.create_task(run_turn(model))
    request = await local_server.await_for(lambda r: r.model == "main")
    await _cancel(task)
    await local_server.await_disconnected(request)
    assert request.first_byte_at is None


async def test_cancel_generate_json_closes_the_connection(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Cancelling the side query's task hangs up on the side request."""
    local_server.script("main", Reply(json={"selected_memories": []}, hang=True))
    task = asyncio.create_task(
        model.generate_json(system="s", prompt="p", schema={}, schema_name="selection")
    )
    request = await local_server.await_for(lambda r: r.is_side_query)
    await _cancel(task)
    await local_server.await_disconnected(request)
    assert request.status is None


async def test_closing_the_stream_early_closes_the_connection(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Leaving the stream early (``aclosing``) releases the connection instead of reading on."""
    local_server.script("main", Reply(text="abcdefgh", chunk_size=1, stall_after=3))
    async with contextlib.aclosing(model.stream([user_content("hi")])) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                break
    assert (await local_server.await_disconnected(local_server.requests[0])).disconnected


async def test_model_is_usable_after_a_cancel(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """A cancelled request leaves the connection pool healthy for the next one."""
    local_server.script("main", Reply(hang=True), "after")
    task = asyncio.create_task(run_turn(model))
    request = await local_server.await_for(lambda r: r.model == "main")
    await _cancel(task)
    await local_server.await_disconnected(request)
    events = await run_turn(model)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["after"]

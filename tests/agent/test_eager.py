"""The client under Python 3.12+'s eager task factory, where a task may run to its end
inside ``create_task`` (a lexical recall has no real suspension point)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import pytest

from asyncrecall import CancelSignal
from asyncrecall.agent import AgentClient, MemoryInjectedEvent
from asyncrecall.memory import FolderStore, LexicalSelector, ModelSelector, Recaller
from asyncrecall.testing import ScriptedModel

from .conftest import collect, selection, types, user_query

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 12), reason="asyncio.eager_task_factory is new in Python 3.12"
)


@pytest.fixture
async def eager() -> AsyncIterator[None]:
    """Run the test's own event loop with the eager task factory."""
    loop = asyncio.get_running_loop()
    previous = loop.get_task_factory()
    loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
    try:
        yield
    finally:
        loop.set_task_factory(previous)


@pytest.mark.usefixtures("eager")
async def test_a_lexical_recall_that_finishes_inside_create_task_rides_on_the_request(
    main: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """A recall that settles eagerly (inside ``create_task``) is no error: its memory goes
    on the first request, and no task is left behind."""
    main.add_turn("ok")
    client = AgentClient(model=main, memory=Recaller(store, LexicalSelector()))
    await client.warm_memory()  # warm: the lexical recall then runs inline, eagerly

    events = await collect(client.send_message_stream("how do we deploy to staging?"))

    injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
    assert [(e.point, e.paths[0]) for e in injected] == [("user_query", paths["deploy-flow"])]
    assert injected[0].recall_ms >= 0
    await client.aclose()
    assert client.background_tasks == frozenset()


@pytest.mark.usefixtures("eager")
async def test_model_recall_and_cancel_under_the_eager_factory(
    main: ScriptedModel, side: ScriptedModel, store: FolderStore, paths: dict[str, str]
) -> None:
    """The side-query recall, the caller's cancel and the drain behave as with the
    default factory."""
    side.add_json(selection(paths["user-role"]))
    side.add_json(selection(), gate=asyncio.Event())
    main.add_turn("one")
    main.add_turn("never", gate=asyncio.Event())
    client = AgentClient(model=main, memory=Recaller(store, ModelSelector(side)))

    first = await user_query(client, "who am I?", settle_first=True, prompt_id="p1")
    cancel = CancelSignal()

    async def press_ctrl_c() -> None:
        await main.wait_until(lambda m: m.stream_started == 2)
        cancel.cancel("user")

    presser = asyncio.create_task(press_ctrl_c())
    second = await user_query(client, "and now?", cancel=cancel, prompt_id="p2")
    await presser

    assert "memory_injected" in types(first)
    assert types(second)[-1] == "cancelled"
    await client.aclose()
    assert client.background_tasks == frozenset()
    assert side.json_started == side.json_finished + side.json_cancelled

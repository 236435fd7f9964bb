"""Shared pieces of the agent tests: a real memory folder, scripted main and side models."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

import eager_loops
from asyncrecall import CancelSignal
from asyncrecall.agent import AgentClient, AgentEvent, ClientOptions, MessageType
from asyncrecall.memory import FolderStore, ModelSelector, Recaller
from asyncrecall.models import Content, FunctionCall, FunctionResponse, Text
from asyncrecall.testing import ScriptedModel

if eager_loops.ENABLED:  # make test-py313: every test of this folder on an eager loop
    pytest_asyncio_loop_factories = eager_loops.loop_factories


@pytest.fixture
def main() -> ScriptedModel:
    return ScriptedModel(name="main")


@pytest.fixture
def side() -> ScriptedModel:
    return ScriptedModel(name="side")


def make_client(
    main: ScriptedModel,
    side: ScriptedModel | None,
    store: FolderStore | None,
    **options: Any,
) -> AgentClient:
    memory = None
    if store is not None and side is not None:
        memory = Recaller(store, ModelSelector(side))
    control = options.pop("control", None)
    return AgentClient(model=main, memory=memory, options=ClientOptions(**options), control=control)


def selection(*paths: str) -> dict[str, list[str]]:
    return {"selected_memories": list(paths)}


async def collect(events: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    return [event async for event in events]


async def user_query(
    client: AgentClient,
    text: str,
    *,
    cancel: CancelSignal | None = None,
    prompt_id: str = "p1",
    settle_first: bool = False,
    turns: int = 100,
) -> list[AgentEvent]:
    """Send a user query. With ``settle_first``, wait for the recall as soon as it starts
    (so it has settled before the request is built: the deterministic form of a fast recall)."""
    events: list[AgentEvent] = []
    async for event in client.send_message_stream(
        text, cancel or CancelSignal(), prompt_id, MessageType.USER_QUERY, turns=turns
    ):
        events.append(event)
        if settle_first and event.type == "memory_recall_started":
            handle = client.pending_prefetch
            assert handle is not None
            await asyncio.wait({handle.task})
    return events


async def tool_result(
    client: AgentClient,
    calls: Sequence[FunctionCall],
    *,
    cancel: CancelSignal | None = None,
    prompt_id: str = "p1",
) -> list[AgentEvent]:
    responses = [FunctionResponse(c.id, c.name, {"output": f"result of {c.id}"}) for c in calls]
    return await collect(
        client.send_message_stream(
            responses, cancel or CancelSignal(), prompt_id, MessageType.TOOL_RESULT
        )
    )


def types(events: Sequence[AgentEvent]) -> list[str]:
    return [event.type for event in events]


def last_user(contents: Sequence[Content]) -> Content:
    return next(c for c in reversed(contents) if c.role == "user")


def memory_texts(content: Content) -> list[str]:
    return [p.text for p in content.parts if isinstance(p, Text) and "## Relevant memory" in p.text]


async def assert_recall_cancelled(client: AgentClient, side: ScriptedModel) -> None:
    """The client dropped its recall and cancelled it: every recall task is being
    cancelled (or done) now, ends cancelled or with nothing selected (a recall whose
    side query the caller's cancel reached may return its empty result first: the
    order of the two depends on the Python version), and every side query that started
    was cancelled inside the model (none is left running)."""
    assert client.pending_prefetch is None
    tasks = client.background_tasks
    assert all(task.cancelling() or task.done() for task in tasks)
    await asyncio.gather(*tasks, return_exceptions=True)
    assert all(task.cancelled() or not task.result().selected for task in tasks)
    assert side.json_started == side.json_finished + side.json_cancelled

"""Shared pieces of the prefetcher tests: a real memory folder, a scripted side model."""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator, Coroutine, Generator
from typing import Any

import pytest

from asyncrecall.memory import FolderStore, LexicalSelector, ModelSelector, Recaller
from asyncrecall.prefetch import PrefetchEvent, RecallPrefetcher
from asyncrecall.testing import ScriptedModel


@pytest.fixture
def side() -> ScriptedModel:
    return ScriptedModel(name="side")


@pytest.fixture
def events() -> list[PrefetchEvent]:
    return []


@pytest.fixture
async def prefetcher(
    store: FolderStore, side: ScriptedModel, events: list[PrefetchEvent]
) -> AsyncIterator[RecallPrefetcher]:
    """A prefetcher over the model selector (the scripted side model)."""
    async with RecallPrefetcher(
        Recaller(store, ModelSelector(side)), on_event=events.append
    ) as prefetcher:
        yield prefetcher


def selection(*paths: str) -> dict[str, list[str]]:
    return {"selected_memories": list(paths)}


async def settle(prefetcher: RecallPrefetcher, key: str) -> None:
    """Wait (hang guard 5 s) until the key's recall has settled."""
    handle = prefetcher.pending(key)
    assert handle is not None
    async with asyncio.timeout(5):
        await asyncio.wait({handle.task})


# -- asyncio.eager_task_factory, and the same on Python 3.11 -----------------------------


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """Drive ``coro`` on from a suspension its first step already reached."""
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:  # thrown into us by the task: pass it on
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value


class _Finished(asyncio.Future[Any]):
    """A task-shaped future for a coroutine that finished in its first, eager step."""

    _name = ""

    def set_name(self, name: object) -> None:
        self._name = str(name)

    def get_name(self) -> str:
        return self._name

    def cancelling(self) -> int:
        return 0


def _eager_start(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
    """What ``asyncio.eager_task_factory`` does (3.12+): run the coroutine's first step in
    the caller, inside ``create_task``; a coroutine that finishes there comes back done."""
    future = _Finished(loop=loop)
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        future.set_result(stop.value)
        return future
    except BaseException as exc:
        future.set_exception(exc)
        return future
    return asyncio.Task(_resume(coro, yielded), loop=loop, **kwargs)


EAGER_FACTORY: Any = getattr(asyncio, "eager_task_factory", None) or _eager_start
"""The real eager task factory where Python has it, else an equivalent for 3.11."""


def pick_beside_instant_pass(
    store: FolderStore, side: ScriptedModel, events: list[PrefetchEvent]
) -> RecallPrefetcher:
    """A prefetcher (to enter) whose recall is the scripted side model's pick, with a
    lexical instant pass beside it, reporting to ``events``."""
    return RecallPrefetcher(
        Recaller(store, ModelSelector(side)),
        instant_selector=LexicalSelector(),
        on_event=events.append,
    )

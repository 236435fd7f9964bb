"""CancelSignal: a one-shot flag with listeners, like AbortSignal."""

from __future__ import annotations

import asyncio

from asyncrecall import CancelSignal


def test_listeners_run_once_and_can_be_removed() -> None:
    signal = CancelSignal()
    calls: list[str] = []
    signal.add_listener(lambda: calls.append("a"))
    remove_b = signal.add_listener(lambda: calls.append("b"))
    remove_b()
    remove_b()  # removing twice is harmless
    assert signal.listener_count() == 1
    signal.cancel("user")
    signal.cancel("again")
    assert calls == ["a"]
    assert signal.cancelled and signal.reason == "user"
    assert signal.listener_count() == 0


def test_a_listener_added_after_cancel_runs_at_once() -> None:
    signal = CancelSignal()
    signal.cancel()
    calls: list[int] = []
    signal.add_listener(lambda: calls.append(1))()
    assert calls == [1]


async def test_wait_returns_once_cancelled() -> None:
    signal = CancelSignal()
    waiter = asyncio.create_task(signal.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    signal.cancel()
    await asyncio.wait_for(waiter, timeout=5)  # hang guard only
    assert signal.listener_count() == 0
    await signal.wait()  # already cancelled: returns at once

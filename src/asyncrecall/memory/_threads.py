"""Work off the event loop that stops when its caller stops waiting, and never holds exit.

``asyncio.to_thread`` is the wrong tool for recall's CPU work: a cancelled await leaves
the thread running to the end (an embedding selection went on ranking long after its
recall was cancelled, stalling the loop meanwhile), and ``asyncio.run`` joins the
default executor's threads at exit, so a cancelled recall held the program's exit.

:func:`run_off_loop` runs ``work(stop)`` in a daemon thread of its own (never joined:
exit does not wait for it) and sets ``stop`` (a :class:`threading.Event`) as soon as the
awaiting task is cancelled. The work checks it between batches (:func:`check`) and ends
early with :class:`Stopped`; its partial progress (caches) stays usable. :func:`off_loop`
tells such work from work its caller waits on inline.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Stopped", "check", "off_loop", "run_off_loop"]

_T = TypeVar("_T")

#: ``active`` is set in the threads :func:`run_off_loop` starts.
_worker = threading.local()


class Stopped(Exception):
    """Raised inside off-loop work whose caller stopped waiting for it."""


def off_loop() -> bool:
    """Whether the calling thread runs :func:`run_off_loop`'s work."""
    return bool(getattr(_worker, "active", False))


def check(stop: threading.Event | None) -> None:
    """Raise :class:`Stopped` when ``stop`` is set (``None``: never stops)."""
    if stop is not None and stop.is_set():
        raise Stopped


async def run_off_loop(work: Callable[[threading.Event], _T], *, name: str) -> _T:
    """``work(stop)``'s result, computed in a daemon thread named ``name``.

    Cancelling the awaiting task sets ``stop`` and propagates at once; the thread ends
    at its next :func:`check`, and its outcome is dropped. The thread is never joined,
    so neither the loop's shutdown nor the interpreter's exit waits for it.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()
    stop = threading.Event()

    def settle(result: _T | None, error: BaseException | None) -> None:
        if future.done():
            return  # cancelled meanwhile: the outcome is deliberately dropped
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def post(result: _T | None, error: BaseException | None) -> None:
        # RuntimeError: the loop is closed, nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    def target() -> None:
        _worker.active = True
        try:
            result = work(stop)
        except Stopped:
            return  # stopped on request: the awaiting task is gone already
        except BaseException as exc:
            post(None, exc)
        else:
            post(result, None)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    try:
        return await future
    finally:
        stop.set()

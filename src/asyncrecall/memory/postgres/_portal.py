"""A private event loop in a daemon thread, where a database store's I/O lives.

The PostgreSQL store's ``LISTEN`` connection, and its async pool for the recalls that
find every connection of their own loop busy (``_loops``), live on one loop of
its own, in one thread: a synchronous call waits for a future, the recall task awaits a
wrapped future (its event loop never blocks), and cancelling the recall task cancels
the query's task here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["Portal"]

_T = TypeVar("_T")


class Portal:
    """An event loop running in a daemon thread until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self._stopping = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def in_portal(self) -> bool:
        """Whether the caller runs on the portal's own thread."""
        return threading.current_thread() is self._thread

    def call(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Run ``work`` on the portal's loop and wait for its result (blocking)."""
        if self.in_portal():
            work.close()
            raise RuntimeError("a blocking store call from the store's own thread")
        if self._loop.is_closed():
            work.close()
            raise RuntimeError("the store is closed")
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    async def acall(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Run ``work`` on the portal's loop; awaiting never blocks the caller's loop.

        Cancelling the awaiting task cancels ``work``'s task on the portal.
        """
        if self._loop.is_closed():
            work.close()
            raise RuntimeError("the store is closed")
        try:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._stopping and task is not None and not task.cancelling():
                # Our work was ended by :meth:`stop`, not the caller's task cancelled.
                raise RuntimeError("the store is closed") from None
            raise

    def stop(self) -> None:
        """End the work still running here (its :meth:`acall` callers get
        ``RuntimeError("the store is closed")``: a loop stopped under its tasks left
        them waiting for ever), stop the loop, join the thread, close the loop.
        Idempotent."""
        if self._loop.is_closed():
            return
        self._stopping = True
        if not self.in_portal():
            asyncio.run_coroutine_threadsafe(_end_the_others(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        if not self.in_portal():
            self._thread.join()
        self._loop.close()


async def _end_the_others() -> None:
    """Cancel every task of the running loop but this one, and wait for them."""
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)

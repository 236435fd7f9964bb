"""The memory prefetch handle: a recall started on a user query and never awaited.

This is the design note's ``MemoryPrefetchHandle``. The client polls it at two
points (:meth:`MemoryPrefetch.result_nowait` never yields to the event loop) and
cancels it on every early exit. The running task is owned by the handle's creator:
it is cancelled, never left to be garbage-collected, and its failures are logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from asyncrecall._cancel import CancelSignal
from asyncrecall.memory import EMPTY_RECALL, RecallResult

__all__ = ["MemoryPrefetch", "RecallNotReady", "start_prefetch"]

logger = logging.getLogger("asyncrecall.agent")


class RecallNotReady(Exception):
    """The recall has not settled yet: polling returns at once instead of waiting."""


@dataclass(eq=False)
class MemoryPrefetch:
    """A running recall, its cancel control and whether its result was used."""

    control: CancelSignal
    started_at: float
    clock: Callable[[], float]
    prompt_id: str
    #: When the recall finished (any outcome); ``None`` while it runs.
    settled_at: float | None = None
    #: True once the result was injected: stops a second injection.
    consumed: bool = False
    _unbridge: Callable[[], None] = field(default=lambda: None, repr=False)
    #: Set right after creation: the handle exists before its task, because an eager
    #: task factory (Python 3.12+) may run the whole recall inside ``create_task``.
    task: asyncio.Task[RecallResult] = field(init=False)

    @property
    def settled(self) -> bool:
        """Derived from the task, so it can never disagree with it."""
        return self.task.done()

    @property
    def recall_ms(self) -> float:
        """How long the recall took (or has taken so far), in milliseconds."""
        end = self.settled_at if self.settled_at is not None else self.clock()
        return (end - self.started_at) * 1000.0

    def result_nowait(self) -> RecallResult:
        """The recall's result, or :class:`RecallNotReady`; never waits."""
        if not self.task.done():
            raise RecallNotReady
        if self.task.cancelled():
            return EMPTY_RECALL
        return self.task.result()

    def cancel(self) -> None:
        """Stop the recall (its side query's connection closes) and detach the bridge."""
        self.control.cancel("discarded")
        self.task.cancel()
        self._unbridge()


def start_prefetch(
    recall: Callable[[CancelSignal], Awaitable[RecallResult]],
    *,
    caller_cancel: CancelSignal | None,
    prompt_id: str,
    owner: set[asyncio.Task[RecallResult]],
    clock: Callable[[], float] = time.monotonic,
) -> MemoryPrefetch:
    """Start ``recall`` in a task and return its handle at once.

    The caller's cancel signal is bridged to the handle's control (and the bridge is
    removed when the recall settles). Errors other than our own cancellation become
    an empty result with a warning: the recall never raises into the client.
    ``owner`` keeps a strong reference to the task until it is done.
    """
    control = CancelSignal()

    async def run() -> RecallResult:
        try:
            return await recall(control)
        except asyncio.CancelledError:
            raise  # only the handle cancels this task: ending cancelled is the outcome
        except Exception:
            logger.warning("memory prefetch failed; continuing without memory", exc_info=True)
            return EMPTY_RECALL
        finally:
            handle.settled_at = clock()

    # The handle first: under an eager task factory ``run`` may finish inside
    # ``create_task`` and its ``finally`` already needs the handle.
    handle = MemoryPrefetch(control=control, started_at=clock(), clock=clock, prompt_id=prompt_id)
    task = asyncio.get_running_loop().create_task(run(), name=f"memory-prefetch-{prompt_id}")
    handle.task = task
    owner.add(task)

    if caller_cancel is not None:
        handle._unbridge = caller_cancel.add_listener(lambda: control.cancel("caller"))

    def on_done(done: asyncio.Task[RecallResult]) -> None:
        owner.discard(done)
        if handle.settled_at is None:  # cancelled before it ever ran
            handle.settled_at = clock()
        handle._unbridge()

    task.add_done_callback(on_done)
    return handle

"""One recall running in the background: a handle to poll, never to await.

The design note's ``MemoryPrefetchHandle``. :meth:`PendingRecall.result_nowait` never
yields to the event loop; :meth:`PendingRecall.cancel` stops the recall (its side
query's HTTP connection closes). The task is owned: a strong reference lives in the
owner's set until it is done, and a failure is logged, never left unretrieved.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from asyncrecall._cancel import CancelSignal
from asyncrecall._exceptions import RecallNotReady
from asyncrecall.memory import EMPTY_RECALL, RecallResult

if TYPE_CHECKING:
    from asyncrecall._telemetry import RecallTrace

__all__ = ["PendingRecall", "RecallNotReady"]

logger = logging.getLogger("asyncrecall.prefetch")


def _noop() -> None:
    return None


class PendingRecall:
    """A running recall, its cancel control and whether its result was used.

    Created by :meth:`RecallPrefetcher.start <asyncrecall.prefetch.RecallPrefetcher.start>`;
    read it, do not build it.
    """

    def __init__(
        self,
        recall: Callable[[CancelSignal], Awaitable[RecallResult]] | RecallResult,
        *,
        prompt_id: str,
        caller_cancel: CancelSignal | None,
        owner: set[asyncio.Task[RecallResult]],
        clock: Callable[[], float],
    ) -> None:
        """``recall``: the recall to run in a task, or its result, computed already (an
        inline recall: the handle is settled from the start, no task runs)."""
        self.prompt_id = prompt_id
        #: Cancelled when the recall is dropped; the caller's cancel signal is bridged to it.
        self.control = CancelSignal()
        self.started_at = clock()
        #: When the recall finished (any outcome); ``None`` while it runs.
        self.settled_at: float | None = None
        #: True once the result was taken: stops a second injection.
        self.consumed = False
        #: The recall's span while OpenTelemetry is on (set by the prefetcher), else None.
        self.trace: RecallTrace | None = None
        self._clock = clock
        self._owner = owner
        self._caller = caller_cancel
        self._unbridge: Callable[[], None] = _noop
        if caller_cancel is not None and caller_cancel.cancelled:
            self.control.cancel("caller")
        if isinstance(recall, RecallResult):
            done: asyncio.Future[RecallResult] = asyncio.get_running_loop().create_future()
            done.set_result(recall)
            self.settled_at = self.started_at
            #: The recall's task (a finished future for a recall computed inline).
            self.task: asyncio.Future[RecallResult] = done
            return
        if caller_cancel is not None:
            self._unbridge = caller_cancel.add_listener(lambda: self.control.cancel("caller"))
        # Everything the task's body and callback read exists before the task does: under
        # asyncio.eager_task_factory (3.12+) the body runs inside create_task, and a recall
        # with no I/O (the lexical selector) even finishes there.
        task = asyncio.get_running_loop().create_task(
            self._run(recall), name=f"memory-prefetch-{prompt_id}"
        )
        self.task = task
        owner.add(task)
        task.add_done_callback(self._on_done)

    def __repr__(self) -> str:
        state = "settled" if self.settled else "running"
        return f"<PendingRecall {self.prompt_id} {state}{' consumed' if self.consumed else ''}>"

    @property
    def settled(self) -> bool:
        """Whether the recall finished; derived from the task, so it never disagrees."""
        return self.task.done()

    @property
    def withdrawn(self) -> bool:
        """Whether the recall was cancelled, by its owner or by the caller's signal, at any
        time: a settled result is not used after its message's caller gave up on it (the
        bridge to the caller's signal is gone once settled, so the signal is read here)."""
        caller = self._caller
        return self.control.cancelled or (caller is not None and caller.cancelled)

    @property
    def recall_ms(self) -> float:
        """How long the recall took (or has taken so far), in milliseconds."""
        end = self.settled_at if self.settled_at is not None else self._clock()
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

    async def _run(self, recall: Callable[[CancelSignal], Awaitable[RecallResult]]) -> RecallResult:
        try:
            return await recall(self.control)
        except asyncio.CancelledError:
            raise  # only cancel() cancels this task: ending cancelled is the outcome
        except Exception:
            logger.warning("memory prefetch failed; continuing without memory", exc_info=True)
            return EMPTY_RECALL
        finally:
            self.settled_at = self._clock()

    def _on_done(self, task: asyncio.Task[RecallResult]) -> None:
        self._owner.discard(task)
        if self.settled_at is None:  # cancelled before it ever ran
            self.settled_at = self._clock()
        self._unbridge()

"""The client's one pending recall: start it, poll it at the two points, drop it.

:class:`PrefetchSlot` holds what the design note keeps on ``GeminiClient``: the pending
:class:`~asyncrecall.agent._prefetch.MemoryPrefetch`, the session's surfaced paths and
the recall tasks the client owns. The client calls :meth:`PrefetchSlot.trigger` on a
user query, :meth:`PrefetchSlot.consume` at the two consumption points, and
:meth:`PrefetchSlot.discard` at every cancel-and-drop site.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from asyncrecall._cancel import CancelSignal
from asyncrecall.agent._events import (
    AgentEvent,
    DiscardReason,
    InjectionPoint,
    MemoryDiscardedEvent,
    MemoryInjectedEvent,
    MemoryRecallStartedEvent,
)
from asyncrecall.agent._options import ClientOptions
from asyncrecall.agent._prefetch import MemoryPrefetch, start_prefetch
from asyncrecall.memory import MemoryManager, RecallResult, Selector, format_memory_block

__all__ = ["PrefetchSlot"]

logger = logging.getLogger("asyncrecall.agent")


@dataclass
class _Instant:
    """What an instant lexical pass found for the current user query."""

    result: RecallResult
    started_at: float
    settled_at: float


class PrefetchSlot:
    """At most one recall in flight per client, and the paths already shown."""

    def __init__(
        self,
        *,
        memory: MemoryManager | None,
        options: ClientOptions,
        instant_selector: Selector | None,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
        self.memory = memory
        self.options = options
        self.pending: MemoryPrefetch | None = None
        #: Memory files already shown to the model this session (relative paths).
        self.surfaced: set[str] = set()
        self.tasks: set[asyncio.Task[RecallResult]] = set()
        self._instant_selector = instant_selector
        self._instant: _Instant | None = None
        self._clock = clock
        self._wall_clock = wall_clock

    async def trigger(
        self, query: str, cancel: CancelSignal, prompt_id: str
    ) -> AsyncGenerator[AgentEvent, None]:
        """Start the recall for this user query; never wait for it."""
        superseded = self.discard("superseded")
        if superseded is not None:
            yield superseded
        self._instant = None
        memory = self.memory
        if memory is None or not query.strip():
            return
        excluded = frozenset(self.surfaced)
        limit = self.options.recall_limit
        self.pending = start_prefetch(
            lambda control: memory.recall(
                query, excluded_paths=excluded, limit=limit, cancel=control
            ),
            caller_cancel=cancel,
            prompt_id=prompt_id,
            owner=self.tasks,
            clock=self._clock,
        )
        # One loop tick (not a wait on the recall): the task runs up to its first real
        # suspension, as a JavaScript async function runs synchronously until its first
        # await. A recall with no I/O (the lexical selector) settles right here and
        # rides on the first request; the CPU it uses would be spent at the main
        # request's first await anyway.
        await asyncio.sleep(0)
        yield MemoryRecallStartedEvent(prompt_id=prompt_id)
        if self.options.recall_mode == "async+lexical" and self._instant_selector is not None:
            started = self._clock()
            try:
                result = await memory.recall(
                    query,
                    excluded_paths=excluded,
                    limit=self.options.instant_limit,
                    selector=self._instant_selector,
                )
            except Exception:  # like the prefetch itself: a recall never breaks a turn
                logger.warning("instant lexical pass failed; continuing without it", exc_info=True)
            else:
                self._instant = _Instant(result, started, self._clock())

    async def bounded_wait(self, cancel: CancelSignal) -> MemoryDiscardedEvent | None:
        """The blocking baseline and the bounded-wait variant wait here; ``async`` never does.

        The caller's cancel ends the wait at once (the caller then sends nothing).
        """
        handle = self.pending
        if handle is None or handle.settled or cancel.cancelled:
            return None
        mode = self.options.recall_mode
        if mode == "blocking":
            budget = self.options.blocking_deadline
        elif mode == "async+wait100":
            budget = self.options.initial_wait
        else:
            return None
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        remove = cancel.add_listener(wake)
        try:
            # asyncio.wait, not wait_for: a late result stays usable at a tool result.
            waited: set[asyncio.Future[Any]] = {handle.task, woken}
            await asyncio.wait(waited, timeout=budget, return_when=asyncio.FIRST_COMPLETED)
        finally:
            remove()
            woken.cancel()
        if mode == "blocking" and not handle.settled and not cancel.cancelled:
            # The old design gave up at its deadline: no memory for this query.
            return self.discard("cancelled")
        return None

    def consume(self, point: InjectionPoint) -> tuple[str, MemoryInjectedEvent] | None:
        """Take a settled, unconsumed recall's block, or ``None`` at once (never waits)."""
        handle = self.pending
        if handle is not None and handle.settled and not handle.consumed:
            handle.consumed = True
            self.pending = None
            rendered = self._render(handle.result_nowait(), point, handle.recall_ms)
            if rendered is not None:
                return rendered
        instant = self._instant
        if point == "user_query" and instant is not None:
            self._instant = None
            ms = (instant.settled_at - instant.started_at) * 1000.0
            return self._render(instant.result, point, ms, strategy="instant-lexical")
        return None

    def discard(self, reason: DiscardReason) -> MemoryDiscardedEvent | None:
        """Cancel and drop the pending recall, if any."""
        handle = self.pending
        if handle is None:
            return None
        self.pending = None
        settled = handle.settled
        handle.cancel()
        logger.debug("memory prefetch %s discarded: %s", handle.prompt_id, reason)
        return MemoryDiscardedEvent(reason=reason, settled=settled)

    def reset(self) -> MemoryDiscardedEvent | None:
        """Drop the pending recall and forget what was surfaced (``reset_chat``)."""
        event = self.discard("reset")
        self.surfaced.clear()
        self._instant = None
        return event

    async def aclose(self) -> None:
        """Cancel every recall of ours, then drain them. Never waits for a result."""
        self.discard("closed")
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        # Drained: a done-callback that has not run yet would drop them a tick later.
        self.tasks.clear()

    def _render(
        self,
        result: RecallResult,
        point: InjectionPoint,
        recall_ms: float,
        *,
        strategy: str | None = None,
    ) -> tuple[str, MemoryInjectedEvent] | None:
        docs = [doc for doc in result.selected if doc.rel_path not in self.surfaced]
        if not docs or not result.prompt:
            return None
        block = result.prompt
        if len(docs) != len(result.selected):  # some were already sent by an instant pass
            block = format_memory_block(docs, now=self._wall_clock())
        paths = tuple(doc.rel_path for doc in docs)
        self.surfaced.update(paths)
        event = MemoryInjectedEvent(
            point=point,
            paths=paths,
            recall_ms=round(recall_ms, 3),
            strategy=strategy or result.strategy,
        )
        return block, event

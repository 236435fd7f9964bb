"""The client's recall modes, on the public :class:`~asyncrecall.prefetch.RecallPrefetcher`.

The prefetcher does the recall itself (start, take at the two points, cancel, surfaced
paths, owned tasks). :class:`RecallSlot` adds only what the agent's recall modes need:
one conversation key per client, the bounded waits of the ``blocking`` baseline and
the ``async+wait100`` variant (woken by the caller's cancel), and the prefetcher's
events handed back to the turn in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from asyncrecall._cancel import CancelSignal
from asyncrecall.agent._options import ClientOptions
from asyncrecall.memory import Recaller, RecallResult, Selector
from asyncrecall.prefetch import (
    DiscardReason,
    InjectionPoint,
    MemoryDiscardedEvent,
    MemoryInjectedEvent,
    PendingRecall,
    PrefetchEvent,
    RecallPrefetcher,
)

__all__ = ["RecallSlot"]

#: The client's one conversation in its prefetcher.
_KEY = "session"


class RecallSlot:
    """One client's recall: at most one in flight, and the paths already shown."""

    def __init__(
        self,
        *,
        memory: Recaller | None,
        options: ClientOptions,
        instant_selector: Selector | None,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
        self.options = options
        self._events: list[PrefetchEvent] = []
        self._prefetcher: RecallPrefetcher | None = None
        if memory is not None:
            instant = instant_selector if options.recall_mode == "async+lexical" else None
            self._prefetcher = RecallPrefetcher(
                memory,
                limit=options.recall_limit,
                instant_selector=instant,
                instant_limit=options.instant_limit,
                session_bytes=options.session_bytes,
                on_event=self._events.append,
                clock=clock,
                wall_clock=wall_clock,
            )

    async def warm(self) -> None:
        """Warm the memory (see :meth:`RecallPrefetcher.warm`); nothing without memory."""
        if self._prefetcher is not None:
            await self._prefetcher.warm()

    @property
    def pending(self) -> PendingRecall | None:
        """The recall started by the last user query and not yet used or dropped."""
        return self._prefetcher.pending(_KEY) if self._prefetcher is not None else None

    @property
    def surfaced(self) -> frozenset[str]:
        """Memory files already shown to the model this session (relative paths)."""
        return self._prefetcher.surfaced(_KEY) if self._prefetcher is not None else frozenset()

    @property
    def tasks(self) -> frozenset[asyncio.Task[RecallResult]]:
        """Recall tasks still running."""
        if self._prefetcher is None:
            return frozenset()
        return frozenset(task for task in self._prefetcher.tasks if not task.done())

    async def trigger(
        self,
        query: str,
        cancel: CancelSignal,
        prompt_id: str,
        until_request: float | None = None,
    ) -> AsyncGenerator[PrefetchEvent, None]:
        """Start the recall for this user query (superseding the last one); never wait.
        ``until_request``: its background work waits for this query's request (see
        ``ClientOptions.until_request``)."""
        prefetcher = self._prefetcher
        if prefetcher is None:
            return
        # No loop tick: a warm recall with no I/O (the lexical selector, the instant
        # pass) is computed inside start() and rides on the first request, however many
        # other sessions share the loop.
        prefetcher.start(
            _KEY, query, cancel=cancel, prompt_id=prompt_id, until_request=until_request
        )
        for event in self._take_events():
            yield event

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
        began = time.perf_counter()
        try:
            # asyncio.wait, not wait_for: a late result stays usable at a tool result.
            waited: set[asyncio.Future[Any]] = {handle.task, woken}
            await asyncio.wait(waited, timeout=budget, return_when=asyncio.FIRST_COMPLETED)
        finally:
            remove()
            woken.cancel()
            if handle.trace is not None:  # OpenTelemetry on: the wait is latency added
                handle.trace.waited(time.perf_counter() - began)
        if mode == "blocking" and not handle.settled and not cancel.cancelled:
            # The old design gave up at its deadline: no memory for this query.
            return self.discard("cancelled")
        return None

    def consume(
        self, point: InjectionPoint
    ) -> tuple[tuple[str, MemoryInjectedEvent] | None, list[PrefetchEvent]]:
        """Take a settled, unconsumed recall's block, or ``None`` at once (never waits),
        and the events of taking it (a budget's, the instant pass preempted, injected)."""
        if self._prefetcher is None:
            return None, []
        block = self._prefetcher.take(_KEY, point)
        events = self._take_events()
        injected = [e for e in events if isinstance(e, MemoryInjectedEvent)]
        if block is None or not injected:
            return None, events
        return (block.text, injected[-1]), events

    def request_sent(self) -> None:
        """The request of the last :meth:`consume` is written: a held recall goes on."""
        if self._prefetcher is not None:
            self._prefetcher.request_sent(_KEY)

    def discard(self, reason: DiscardReason) -> MemoryDiscardedEvent | None:
        """Cancel and drop the pending recall, if any."""
        if self._prefetcher is None:
            return None
        self._prefetcher.cancel(_KEY, reason)
        return self._last_discarded()

    def reset(self) -> MemoryDiscardedEvent | None:
        """Drop the pending recall and forget what was surfaced (``reset_chat``)."""
        if self._prefetcher is None:
            return None
        self._prefetcher.reset(_KEY)
        return self._last_discarded()

    def unsurface(self, paths: tuple[str, ...]) -> None:
        """The request that carried these paths got no answer: the model never saw them."""
        if self._prefetcher is not None:
            self._prefetcher.unsurface(_KEY, paths)

    async def aclose(self) -> None:
        """Cancel every recall of ours, then drain them. Never waits for a result."""
        if self._prefetcher is not None:
            await self._prefetcher.aclose()
        self._events.clear()

    def _take_events(self) -> list[PrefetchEvent]:
        events, self._events[:] = list(self._events), []
        return events

    def _last_discarded(self) -> MemoryDiscardedEvent | None:
        discarded = [e for e in self._take_events() if isinstance(e, MemoryDiscardedEvent)]
        return discarded[-1] if discarded else None

"""The recall prefetcher: one background recall per conversation, never awaited.

See :class:`RecallPrefetcher`; the package docstring tells the whole pattern.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final

from asyncrecall import _telemetry
from asyncrecall._cancel import CancelSignal
from asyncrecall.memory import (
    DEFAULT_LIMIT,
    EMPTY_RECALL,
    SESSION_BYTES,
    MemoryDoc,
    Recaller,
    RecallResult,
    Selector,
)
from asyncrecall.prefetch._events import (
    Budget,
    DiscardReason,
    InjectionPoint,
    MemoryBudgetEvent,
    MemoryDiscardedEvent,
    MemoryInjectedEvent,
    MemoryInstantPreemptedEvent,
    MemoryRecallEmptyEvent,
    MemoryRecallSkippedEvent,
    MemoryRecallStartedEvent,
    PrefetchEvent,
)
from asyncrecall.prefetch._handle import PendingRecall

__all__ = ["INSTANT_STRATEGY", "MemoryBlock", "RecallPrefetcher"]

logger = logging.getLogger("asyncrecall.prefetch")

#: ``MemoryBlock.strategy`` of a block found by the lexical instant pass (a block of
#: another instant selector: ``instant-`` and its name, ``instant-semantic``).
INSTANT_STRATEGY = "instant-lexical"
#: What the instant pass's handle adds to the message's prompt id.
_INSTANT_ID: Final = "-instant"


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """A memory block taken for one request.

    ``text`` is what goes into the request (the memory block of
    :func:`~asyncrecall.memory.format_memory_block`, headed ``## Relevant memory``);
    ``paths`` are the memory files in it (relative to the memory folder), now in the
    conversation's surfaced set; ``point`` says where it goes; ``recall_ms`` is how long
    the recall took; ``strategy`` names the selector.
    """

    text: str
    paths: tuple[str, ...]
    point: InjectionPoint
    recall_ms: float
    strategy: str


#: Conversations kept at most, and how long one may sit unused (seconds), before the
#: least recently used idle ones are forgotten (see :class:`RecallPrefetcher`).
MAX_CONVERSATIONS: Final = 10_000
IDLE_SECONDS: Final = 3_600.0
#: How long after the take a recall started with ``until_request`` goes on when nobody
#: says the request is out (:meth:`RecallPrefetcher.request_sent`): the framework's own
#: steps between its hook and the request's send come first (a few milliseconds on an
#: idle machine, tens on busy cores), and a side query answers in hundreds of
#: milliseconds, so starting it this much later changes no point it reaches.
AFTER_TAKE_S: Final = 0.1


@dataclass
class _Conversation:
    surfaced: set[str] = field(default_factory=set)
    #: When :meth:`RecallPrefetcher.start` or ``take`` last used it (the clock's time).
    used_at: float = 0.0
    pending: PendingRecall | None = None
    #: The instant pass for the pending user message, usable at its user-query point only.
    instant: PendingRecall | None = None
    #: Files injected for the current user message (instant pass and main recall).
    message_files: int = 0
    #: Bytes (UTF-8) of the memory blocks injected in this conversation.
    sent_bytes: int = 0
    #: A block no longer fitted the session byte budget: recall stops here.
    spent: bool = False
    #: Opened after the next :meth:`RecallPrefetcher.take`: a recall started with
    #: ``until_request`` waits for it.
    gate: asyncio.Event | None = None
    #: The gate of the last take, until :meth:`RecallPrefetcher.request_sent` opens it.
    taken_gate: asyncio.Event | None = None
    #: The pending recall's span (OpenTelemetry on), for its events.
    trace: _telemetry.RecallTrace | None = None


class RecallPrefetcher:
    """Recall memory in the background for each conversation; inject it when settled.

    One instance serves an app or a session; conversations are told apart by a string
    ``key`` (a thread id, a session id). Per key:

    * :meth:`start` on each user message: starts the recall and returns at once. The
      key's previous recall is cancelled (``superseded``); files already shown in this
      conversation are never offered to the selector again.
    * :meth:`take` just before each model request that carries the user's message
      (``"user_query"``) or tool results (``"tool_result"``): the memory block if the
      recall has settled, else ``None``. It never waits and never yields to the event
      loop; a recall is taken at most once.
    * :meth:`cancel` when the run ends, fails, is cancelled or the app gives up on the
      message; :meth:`reset` when the conversation starts over.

    With ``instant_selector`` (an instant selector such as
    :class:`~asyncrecall.memory.LexicalSelector`), each :meth:`start` also runs an
    instant pass with it (at most ``instant_limit`` files): when the main recall has not
    settled by the user-query point, that pass's block goes there instead, and the
    main recall can still land at a tool result with the files the pass did not show.
    When both have settled by the user-query point, the main recall (the model's pick)
    goes in and the pass is dropped (``memory_instant_preempted``).

    **Budgets.** At most ``limit`` files reach the model for one user message, the
    instant pass and the main recall together (``memory_budget``, ``message_files``);
    once a conversation's blocks reach ``session_bytes`` (UTF-8; default 60 KB,
    ``None``: no budget), what does not fit is left out (``session_bytes``) and recall
    stops for the conversation until :meth:`reset` (``memory_recall_skipped``,
    ``session_budget``); a message with nothing to recall (one word, a bare
    "yes"/"ok": see :meth:`Recaller.skips
    <asyncrecall.memory.Recaller.skips>`) starts none
    (``memory_recall_skipped``, ``nothing_to_recall``). The memory's file cap and the
    model selector's manifest report through ``memory_budget`` too (``file``,
    ``manifest``).

    **No loop tick needed.** A recall that needs no I/O and is warm (the lexical
    selector, the instant pass: see :meth:`Recaller.recall_instant
    <asyncrecall.memory.Recaller.recall_instant>`) is computed inside
    :meth:`start`, so the :meth:`take` right after it finds it settled: nothing
    depends on the event loop running the recall first, which other conversations on
    the same loop could delay. Any other recall (a side query, a cold folder) runs in
    a task, and a worker thread for the cold work.

    **Warming at start-up.** :meth:`start_warming` (no event loop needed: at import or
    application start-up) reads the folder and prepares the lexical term counts in a
    daemon thread, so the first message's instant pass is computed in :meth:`start`.

    ``on_event`` receives :class:`~asyncrecall.prefetch.MemoryRecallStartedEvent`,
    :class:`~asyncrecall.prefetch.MemoryInjectedEvent` and
    :class:`~asyncrecall.prefetch.MemoryDiscardedEvent`, synchronously, after the state
    change they report; an exception it raises propagates to the caller.

    **Bounded.** A conversation is forgotten (its surfaced set with it: its files can be
    offered again) once it has not been used for ``idle_seconds``, or when more than
    ``max_conversations`` exist and it is the least recently used; never while it has a
    recall pending. So a long-lived server whose framework makes a new key per run does
    not grow without bound. :meth:`reset` forgets one at once.

    Use it as an async context manager, or call :meth:`aclose`: every recall is
    cancelled and drained, and :meth:`start` refuses afterwards.
    """

    def __init__(
        self,
        memory: Recaller,
        *,
        limit: int = DEFAULT_LIMIT,
        instant_selector: Selector | None = None,
        instant_limit: int = 3,
        on_event: Callable[[PrefetchEvent], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        max_conversations: int = MAX_CONVERSATIONS,
        idle_seconds: float = IDLE_SECONDS,
        session_bytes: int | None = SESSION_BYTES,
    ) -> None:
        if max_conversations < 1:
            raise ValueError("max_conversations must be at least 1")
        if session_bytes is not None and session_bytes < 1:
            raise ValueError("session_bytes must be at least 1 (None: no budget)")
        self.session_bytes = session_bytes
        self.memory = memory
        self.max_conversations = max_conversations
        self.idle_seconds = idle_seconds
        self.limit = limit
        self.instant_selector = instant_selector
        self.instant_limit = instant_limit
        self._on_event = on_event
        self._clock = clock
        self._wall_clock = wall_clock
        self._conversations: dict[str, _Conversation] = {}
        self._tasks: set[asyncio.Task[RecallResult]] = set()
        self._ids = itertools.count(1)
        self._closed = False

    def __repr__(self) -> str:
        return f"RecallPrefetcher({self.memory!r}, conversations={len(self._conversations)})"

    # -- per conversation ---------------------------------------------------------

    def start(
        self,
        key: str,
        query: str,
        *,
        cancel: CancelSignal | None = None,
        prompt_id: str | None = None,
        hold: Callable[[], Awaitable[object]] | None = None,
        until_request: float | None = None,
    ) -> bool:
        """Start recalling for the user message ``query`` of conversation ``key``.

        Returns at once (it needs a running event loop). The key's previous recall is
        cancelled first (``superseded``), whether it was used or not. ``cancel`` is the
        caller's cancel signal: when it fires, the side query stops too. Returns whether
        a recall started (a blank query starts none).

        ``hold``: what the recalls that run in a task wait for before they do any work
        (the caller's first model request being on its way: so that a cold folder's
        reading and the side query's prompt never hold the interpreter while that
        request is built). A recall computed inline is not held.

        ``until_request``: the main recall, when it runs in a task (a side query), waits
        until the request of the key's next :meth:`take` is out (:meth:`request_sent`,
        else :data:`AFTER_TAKE_S` after the take), or at most this many seconds: for a
        hook that
        starts the recall just before the framework's first request of the message, so
        that the side query's prompt and send run while that request is on its way,
        not before it (a side query cannot settle in time for it anyway). An instant
        pass computed inline is not held: it is the one that can reach that request; one
        that must read the folder first runs in a task and is held like the main recall
        (it is dropped at that take unless settled, so reading before it only competes
        with the request being built).
        """
        if hold is not None and until_request is not None:
            raise ValueError("give hold or until_request, not both")
        if self._closed:
            raise RuntimeError("RecallPrefetcher is closed: start() after aclose()")
        asyncio.get_running_loop()  # fail here, clearly, outside a loop
        telemetry = _telemetry.current()  # None unless OpenTelemetry is on: one check
        began = time.perf_counter() if telemetry is not None else 0.0
        found = self._conversations.pop(key, None)
        conversation = self._touch(key, found if found is not None else _Conversation())
        self._evict(conversation.used_at)
        self._discard(conversation, "superseded")
        conversation.message_files = 0
        memory, limit = self.memory, self.limit
        if memory.skips(query):
            if query.strip():
                prompt_id = prompt_id or f"recall-{next(self._ids)}"
                self._emit(
                    MemoryRecallSkippedEvent(prompt_id=prompt_id, reason="nothing_to_recall")
                )
                if telemetry is not None:
                    telemetry.skipped("nothing_to_recall")
            return False
        prompt_id = prompt_id or f"recall-{next(self._ids)}"
        budget = self.session_bytes
        if conversation.spent or (budget is not None and conversation.sent_bytes >= budget):
            conversation.spent = True
            self._emit(MemoryRecallSkippedEvent(prompt_id=prompt_id, reason="session_budget"))
            if telemetry is not None:
                telemetry.skipped("session_budget")
            return False
        excluded = frozenset(conversation.surfaced)
        trace = telemetry.recall(prompt_id, began) if telemetry is not None else None
        main: RecallResult | Callable[[CancelSignal], Awaitable[RecallResult]] | None
        held = hold
        if until_request is not None:
            conversation.gate = asyncio.Event()
            held = _opened(conversation.gate, until_request)
        main = _inline(memory, query, excluded, limit, None)
        if main is None:
            main = _held(
                held,
                lambda control: memory.recall(
                    query, excluded_paths=excluded, limit=limit, cancel=control
                ),
            )
        conversation.pending = self._pending(main, prompt_id, cancel, trace)
        conversation.trace = trace
        self._emit(MemoryRecallStartedEvent(prompt_id=prompt_id), trace)
        instant, instant_limit = self.instant_selector, min(self.instant_limit, limit)
        if instant is not None and instant_limit > 0:
            pass_: RecallResult | Callable[[CancelSignal], Awaitable[RecallResult]] | None
            pass_ = _inline(memory, query, excluded, instant_limit, instant)
            if pass_ is None:
                pass_ = _held(
                    held,
                    lambda control: memory.recall(
                        query,
                        excluded_paths=excluded,
                        limit=instant_limit,
                        cancel=control,
                        selector=instant,
                    ),
                )
            conversation.instant = self._pending(pass_, prompt_id + _INSTANT_ID, cancel, None)
        return True

    def take(self, key: str, point: InjectionPoint) -> MemoryBlock | None:
        """The memory block for the request about to be sent, or ``None`` at once.

        ``point`` is ``"user_query"`` for the request carrying the user's message and
        ``"tool_result"`` for one carrying tool results. Never waits, never yields to the
        event loop. A settled recall is consumed by the first call (with or without a
        block: files already surfaced in the conversation are left out); its files join
        the conversation's surfaced set.
        """
        conversation = self._conversations.get(key)
        if conversation is None:
            return None
        conversation.used_at = self._clock()
        gate, conversation.gate = conversation.gate, None
        conversation.taken_gate = gate
        if gate is not None:  # the held recall goes on once the request is out
            asyncio.get_running_loop().call_later(AFTER_TAKE_S, gate.set)
        block: MemoryBlock | None = None
        handle = conversation.pending
        trace = handle.trace if handle is not None else None
        began = time.perf_counter() if trace is not None else 0.0
        if handle is not None and handle.settled and not handle.consumed:
            handle.consumed = True
            conversation.pending = None
            if not handle.withdrawn:
                block = self._render(conversation, handle, point)
        instant = conversation.instant
        if instant is not None:
            conversation.instant = None  # the first request is past: used there or never
            usable = instant.settled and not instant.withdrawn
            if block is None and point == "user_query" and usable:
                instant.consumed = True
                block = self._render(conversation, instant, point, instant=True)
            else:
                instant.cancel()
                if block is not None and instant.settled:
                    self._preempted(conversation, instant, block)
        if trace is not None and handle is not None:
            self._traced_take(conversation, handle, point, block, time.perf_counter() - began)
        return block

    def request_sent(self, key: str) -> None:
        """The request the last :meth:`take` of ``key`` was for is on the wire: a recall
        held with ``until_request`` goes on now rather than :data:`AFTER_TAKE_S` after
        the take. Optional (for a caller that knows when its request is written)."""
        conversation = self._conversations.get(key)
        if conversation is not None and conversation.taken_gate is not None:
            conversation.taken_gate.set()
            conversation.taken_gate = None

    def cancel(self, key: str, reason: DiscardReason = "cancelled") -> None:
        """Cancel and drop the key's pending recall, if any (its side query hangs up)."""
        conversation = self._conversations.get(key)
        if conversation is not None:
            self._discard(conversation, reason)

    def reset(self, key: str) -> None:
        """Cancel the key's recall (``reset``) and forget what the conversation was shown."""
        conversation = self._conversations.pop(key, None)
        if conversation is not None:
            self._discard(conversation, "reset")

    def surfaced(self, key: str) -> frozenset[str]:
        """The memory files already shown in this conversation (relative paths)."""
        conversation = self._conversations.get(key)
        return frozenset(conversation.surfaced) if conversation is not None else frozenset()

    def unsurface(self, key: str, paths: Iterable[str]) -> None:
        """Take ``paths`` back out of the surfaced set: the request that carried their
        block was never answered, so the model did not see them."""
        conversation = self._conversations.get(key)
        if conversation is not None:
            conversation.surfaced.difference_update(paths)

    def pending(self, key: str) -> PendingRecall | None:
        """The key's recall that was started and is not yet taken or dropped."""
        conversation = self._conversations.get(key)
        return conversation.pending if conversation is not None else None

    async def wait_settled(self, key: str, timeout: float) -> bool:  # noqa: ASYNC109
        """Wait at most ``timeout`` seconds for the key's recall to settle; never cancels it.

        For the blocking baseline and bounded-wait variants only: the asynchronous
        pattern never waits. Returns whether no recall of the key is still running. A
        recall that settles later stays usable at a tool result.
        """
        handle = self.pending(key)
        if handle is None or handle.settled:
            return True
        await asyncio.wait({handle.task}, timeout=timeout)
        return handle.settled

    @property
    def tasks(self) -> frozenset[asyncio.Task[RecallResult]]:
        """Recall tasks still running (tests check none is left behind)."""
        return frozenset(self._tasks)

    # -- lifetime -------------------------------------------------------------------

    def start_warming(self) -> threading.Thread:
        """Start the memory's cold work now, in a daemon thread, and return it at once
        (:meth:`Recaller.start_warming
        <asyncrecall.memory.Recaller.start_warming>`, the instant selector
        included). Needs no event loop: call it at import or at start-up."""
        extra = (self.instant_selector,) if self.instant_selector is not None else ()
        return self.memory.start_warming(*extra)

    async def warm(self) -> None:
        """Do the memory's cold work now, in a worker thread: scan the folder and load
        or build the lexical term counts (for the instant selector too).

        Until then a lexical recall runs in a thread and settles later (it never blocks
        the loop); once warm it is computed inside :meth:`start` and rides on the first
        request. Call it at start-up, as a task you own or awaited; cancelling it stops
        the wait, never a recall. :meth:`start_warming` does the same without a loop.
        """
        await self.memory.warm()
        if self.instant_selector is not None:
            await self.memory.warm(selector=self.instant_selector)

    async def aclose(self) -> None:
        """Cancel every recall (``closed``), then drain their tasks. Never waits for a result."""
        self._closed = True
        for conversation in list(self._conversations.values()):
            self._discard(conversation, "closed")
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> RecallPrefetcher:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- internals ------------------------------------------------------------------

    def _touch(self, key: str, conversation: _Conversation) -> _Conversation:
        """``conversation`` as the most recently used (the dict keeps use order)."""
        conversation.used_at = self._clock()
        self._conversations[key] = conversation
        return conversation

    def _evict(self, now: float) -> None:
        """Forget the least recently used conversations while they are idle too long or
        too many. The bound is soft: it stops at the first one whose recall is still
        running, or was started within ``idle_seconds`` and not yet taken; an idle one
        whose recall settled and was never taken (a run that ended without cancelling
        it) goes, its recall dropped, so it cannot hold the others back."""
        conversations = self._conversations
        while len(conversations) > 1:
            key, oldest = next(iter(conversations.items()))
            idle = now - oldest.used_at > self.idle_seconds
            if not idle and len(conversations) <= self.max_conversations:
                return
            handles = [h for h in (oldest.pending, oldest.instant) if h is not None]
            if handles:
                if not idle or not all(h.settled for h in handles):
                    return
                self._discard(oldest, "cancelled")
            del conversations[key]

    def _discard(self, conversation: _Conversation, reason: DiscardReason) -> None:
        conversation.gate = None
        instant, conversation.instant = conversation.instant, None
        if instant is not None:
            instant.cancel()
        handle, conversation.pending = conversation.pending, None
        if handle is None:
            return
        settled = handle.settled
        handle.cancel()
        trace, conversation.trace = handle.trace, None
        self._emit(MemoryDiscardedEvent(reason=reason, settled=settled), trace)
        if trace is not None:
            trace.end(reason)

    def _pending(
        self,
        recall: RecallResult | Callable[[CancelSignal], Awaitable[RecallResult]],
        prompt_id: str,
        cancel: CancelSignal | None,
        trace: _telemetry.RecallTrace | None,
    ) -> PendingRecall:
        """The handle of a recall (its task started under the recall's span, if traced)."""
        if trace is None:
            return PendingRecall(
                recall, prompt_id=prompt_id, caller_cancel=cancel, owner=self._tasks,
                clock=self._clock,
            )  # fmt: skip
        with trace.current():  # the side query's span nests under the recall's
            handle = PendingRecall(
                recall, prompt_id=prompt_id, caller_cancel=cancel, owner=self._tasks,
                clock=self._clock,
            )  # fmt: skip
        handle.trace = trace

        def settled(_: object = None) -> None:
            trace.settled(handle.result_nowait(), handle.recall_ms)

        if handle.settled:
            settled()
        else:
            handle.task.add_done_callback(settled)
        return handle

    def _traced_take(
        self,
        conversation: _Conversation,
        handle: PendingRecall,
        point: InjectionPoint,
        block: MemoryBlock | None,
        seconds: float,
    ) -> None:
        """What a take did with the traced recall; the span ends once it is used up."""
        trace = handle.trace
        assert trace is not None
        if block is not None:
            outcome = "instant" if block.strategy == INSTANT_STRATEGY else "injected"
        elif not handle.settled:
            outcome = "not_settled"
        else:
            outcome = "empty"
        trace.took(point, outcome, seconds)
        if handle.consumed:
            reason = "withdrawn" if handle.withdrawn else handle.result_nowait().reason
            trace.end(reason or "already_shown")
            conversation.trace = None

    def _preempted(
        self, conversation: _Conversation, instant: PendingRecall, block: MemoryBlock
    ) -> None:
        """The main recall's block won the user-query point over a settled instant pass:
        say which of the pass's files did not go in (nothing when it found none)."""
        if block.point != "user_query":
            return
        found = instant.result_nowait().paths
        left = tuple(p for p in found if p not in conversation.surfaced)
        if left:
            self._emit(
                MemoryInstantPreemptedEvent(paths=left, strategy=block.strategy),
                conversation.trace,
            )

    def _render(
        self,
        conversation: _Conversation,
        handle: PendingRecall,
        point: InjectionPoint,
        *,
        instant: bool = False,
    ) -> MemoryBlock | None:
        result = handle.result_nowait()
        if result.manifest_left_out:
            listed = getattr(self.memory.selector, "manifest_files", 0)
            self._budget(conversation, "manifest", listed, (), count=result.manifest_left_out)
        docs = [doc for doc in result.selected if doc.rel_path not in conversation.surfaced]
        if not docs or not result.prompt:
            strategy = f"instant-{result.strategy}" if instant else result.strategy
            self._emit(
                MemoryRecallEmptyEvent(
                    prompt_id=handle.prompt_id.removesuffix(_INSTANT_ID),
                    reason="already_shown" if result.selected else result.reason or "chose_none",
                    strategy=strategy,
                ),
                conversation.trace,
            )
            return None
        room = self.limit - conversation.message_files
        if len(docs) > room:  # the instant pass had some of this message's files
            self._budget(conversation, "message_files", self.limit, docs[max(room, 0) :])
            docs = docs[: max(room, 0)]
        memory = self.memory
        text = (
            result.prompt
            if len(docs) == len(result.selected)
            else memory.format_block(docs, now=self._wall_clock())
        )
        text, docs = self._fit_session(conversation, text, docs)
        if not docs:
            return None
        cut = memory.cut_paths(docs)
        if cut:
            self._budget(conversation, "file", memory.file_chars, cut)
        paths = tuple(doc.rel_path for doc in docs)
        conversation.surfaced.update(paths)
        conversation.message_files += len(paths)
        conversation.sent_bytes += len(text.encode("utf-8"))
        block = MemoryBlock(
            text=text,
            paths=paths,
            point=point,
            recall_ms=round(handle.recall_ms, 3),
            strategy=f"instant-{result.strategy}" if instant else result.strategy,
        )
        self._emit(
            MemoryInjectedEvent(
                point=point, paths=paths, recall_ms=block.recall_ms, strategy=block.strategy
            ),
            conversation.trace,
        )
        return block

    def _fit_session(
        self, conversation: _Conversation, text: str, docs: list[MemoryDoc]
    ) -> tuple[str, list[MemoryDoc]]:
        """``text`` and ``docs`` within what the session byte budget has left: the first
        files whose block fits; when one is left out, recall stops for the conversation."""
        budget = self.session_bytes
        if budget is None:
            return text, docs
        room = budget - conversation.sent_bytes
        kept = docs
        while kept and len(text.encode("utf-8")) > room:
            kept = kept[:-1]
            text = self.memory.format_block(kept, now=self._wall_clock()) if kept else ""
        if len(kept) < len(docs):
            conversation.spent = True
            self._budget(conversation, "session_bytes", budget, docs[len(kept) :])
        return text, kept

    def _budget(
        self,
        conversation: _Conversation,
        budget: Budget,
        limit: int,
        left: Sequence[MemoryDoc] | tuple[str, ...],
        *,
        count: int | None = None,
    ) -> None:
        paths = tuple(p if isinstance(p, str) else p.rel_path for p in left)
        self._emit(
            MemoryBudgetEvent(
                budget=budget,
                limit=limit,
                paths=paths,
                count=len(paths) if count is None else count,
            ),
            conversation.trace,
        )

    def _emit(self, event: PrefetchEvent, trace: _telemetry.RecallTrace | None = None) -> None:
        if trace is not None:
            trace.event(event)
        if self._on_event is not None:
            self._on_event(event)


def _held(
    hold: Callable[[], Awaitable[object]] | None,
    recall: Callable[[CancelSignal], Awaitable[RecallResult]],
) -> Callable[[CancelSignal], Awaitable[RecallResult]]:
    """``recall``, started once ``hold`` is over (at once without one)."""
    if hold is None:
        return recall

    async def held(control: CancelSignal) -> RecallResult:
        await hold()
        if control.cancelled:
            return EMPTY_RECALL
        return await recall(control)

    return held


def _opened(gate: asyncio.Event, seconds: float) -> Callable[[], Awaitable[object]]:
    """A hold that is over when ``gate`` opens or after ``seconds``."""

    async def opened() -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await gate.wait()

    return opened


def _inline(
    memory: Recaller,
    query: str,
    excluded: frozenset[str],
    limit: int,
    selector: Selector | None,
) -> RecallResult | None:
    """The recall computed now when it is an instant selector's and warm (else ``None``:
    it runs in a task). A blank query never gets here."""
    chosen = selector if selector is not None else memory.selector
    if getattr(chosen, "inline", None) is not True or not memory.store.inline_scan:
        return None
    try:
        return memory.recall_instant(
            query,
            excluded_paths=excluded,
            limit=limit,
            selector=chosen,  # type: ignore[arg-type]
        )
    except TypeError:
        return None  # ``inline`` set on something that is not an instant selector
    except Exception:
        # As a recall's task does: a failure is logged and gives no memory, never
        # an error of the turn.
        logger.warning("memory prefetch failed; continuing without memory", exc_info=True)
        return EMPTY_RECALL

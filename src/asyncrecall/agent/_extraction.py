"""Background memory extraction after each completed user query, owned by the session.

:class:`ExtractionScheduler` keeps the session's transcript as plain turns (the user's
words and the final answer of every completed query: no memory blocks, no tool
traffic) and runs :class:`~asyncrecall.memory.MemoryExtractor` over the unprocessed
part in a background task. Its promises:

- a completed user query (its :class:`FinishedEvent` says ``stop``) schedules an
  extraction, never awaited by the query; a query where ``save_memory`` ran is
  skipped (``memory_extraction_skipped``, reason ``saved_memory``) and its turns are
  left out of later extractions (the main agent already handled them);
- single flight: one extraction at a time per memory folder (or database namespace)
  in this process (per event loop); a request arriving while one runs becomes one
  trailing request, and a newer request supersedes it (reason ``superseded``); the
  trailing run covers every turn up to the newest query;
- a new user query never cancels a running extraction (it is about the past) and
  shares no lock with the turn: the main request goes out while it runs;
- :meth:`cancel` (reset, the session's control signal) and :meth:`aclose` (exit) cancel
  it; the cursor stays where the last completed extraction put it, so nothing is
  processed twice or skipped. With a ``handoff`` (the command line's: see
  :mod:`asyncrecall.agent._handoff`) exit waits for nothing: what was requested and not
  done is handed on (reason ``handed_off``); without one, exit first lets a running
  extraction finish for at most ``drain_timeout`` (default 2 s);
- errors never reach the user's query: they are logged as warnings on
  ``asyncrecall.agent`` and reported as ``memory_extraction_skipped`` (reason ``error``);
- every write is vetted against the session's record of outside text (``taint``,
  shared with the tools: tool output, answers written after it, pasted parts of user
  turns), for the whole session, not only the query: an answer citing a tool's text
  does not make it the user's, even when the user's request is cited too; an answer
  written after any tool output of the session counts as written after tool output.
  A hand-off carries that record to the worker;
- on the embedded model (``--extract`` forces it there) extraction's side query holds
  the one engine only until a main turn asks for it: it gives way at once (between
  tokens, or inside its prompt), reported as reason ``preempted``; the cursor has not
  moved, so the extraction after that turn covers those turns too.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Final

from asyncrecall._cancel import CancelSignal
from asyncrecall._exceptions import AsyncRecallError
from asyncrecall.agent._events import AgentEvent, FinishedEvent, ToolResultEvent
from asyncrecall.agent._extraction_events import (
    ExtractionEvent,
    ExtractionSkipReason,
    MemoryConsolidatedEvent,
    MemoryExtractedEvent,
    MemoryExtractionSkippedEvent,
    MemoryExtractionStartedEvent,
)
from asyncrecall.agent._handoff import Handoff
from asyncrecall.agent._untrusted import SessionTaint
from asyncrecall.memory import (
    Fingerprint,
    ForeignText,
    MemoryDoc,
    MemoryExtractor,
    Store,
    TranscriptTurn,
    consolidate,
)
from asyncrecall.memory.extraction._consolidate import Gate
from asyncrecall.models import Model, PromptPrefix
from asyncrecall.models._traffic import SideRequestYielded, background_requests

__all__ = [
    "DEFAULT_DRAIN_TIMEOUT",
    "ExtractionScheduler",
    "QueryWatch",
    "is_embedded",
    "is_preempted",
    "maybe_consolidate",
]

logger = logging.getLogger("asyncrecall.agent")

#: Seconds :meth:`ExtractionScheduler.aclose` lets a running extraction finish.
DEFAULT_DRAIN_TIMEOUT: Final = 2.0

_folder_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def _folder_lock(key: str) -> asyncio.Lock:
    """The one lock per memory place (a folder, or a database's namespace) and event loop
    that makes extraction single-flight."""
    locks = _folder_locks.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(key, asyncio.Lock())


class QueryWatch:
    """Follows one user query's events; a completed query is handed to the scheduler."""

    __slots__ = ("_saved", "_scheduler", "_text", "_tools")

    def __init__(self, scheduler: ExtractionScheduler, text: str) -> None:
        self._scheduler = scheduler
        self._text = text
        self._saved = False
        self._tools = False

    def see(self, event: AgentEvent) -> None:
        if isinstance(event, ToolResultEvent) and event.name == "save_memory" and event.ok:
            self._saved = True
        elif isinstance(event, ToolResultEvent):
            self._tools = True  # the answer may repeat what the tool returned
        elif isinstance(event, FinishedEvent) and event.reason == "stop":
            taint = self._scheduler.taint
            seen = self._tools or (taint is not None and taint.tool_output_seen)
            self._scheduler.query_completed(
                self._text, event.text, saved_memory=self._saved, after_tools=seen
            )


class ExtractionScheduler:
    """Runs memory extraction in the background for one session (see module doc)."""

    def __init__(
        self,
        extractor: MemoryExtractor,
        *,
        session_id: str | None = None,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        control: CancelSignal | None = None,
        on_event: Callable[[ExtractionEvent], None] | None = None,
        consolidation: Gate | None = None,
        handoff: Callable[[Handoff | None], None] | None = None,
    ) -> None:
        self.extractor = extractor
        #: Called at exit with what was requested and not done, ``None`` when nothing
        #: is owed (the callback may still look for others' work); unset: drain instead.
        self.handoff = handoff
        #: With a ``handoff``: requests are only recorded, nothing runs here; what they
        #: ask is handed on at exit (``run``: one query, then the process ends, so an
        #: extraction started here would only be dropped).
        self.deferred = False
        #: Automatic consolidation after an extraction, when due (``None``: never).
        self.consolidation = consolidation
        self._session_noted = False
        self.session_id = session_id or f"s-{uuid.uuid4().hex}"
        self.drain_timeout = drain_timeout
        self.transcript: list[TranscriptTurn] = []
        #: What the session's model was shown that the user did not type (the agent
        #: sets it to its tools' record); writes are vetted against it.
        self.taint: SessionTaint | None = None
        #: How the session's main turns begin (the agent sets it to its client's system
        #: prompt and tools): extraction's side query begins the same way, and a
        #: hand-off carries it, so a one-slot server keeps that start in its cache.
        self.prefix: Callable[[], PromptPrefix | None] | None = None
        self._covered: set[int] = set()
        # The end of the newest request, and of the newest extraction that ended other
        # than cancelled: what lies between is owed (handed on at exit).
        self._requested_to = 0
        self._attempted_to = 0
        self._listeners: list[Callable[[ExtractionEvent], None]] = []
        if on_event is not None:
            self._listeners.append(on_event)
        self._task: asyncio.Task[None] | None = None
        self._trailing = False
        self._closed = False
        self._cancel_reason: ExtractionSkipReason = "cancelled"
        self._idle = asyncio.Event()
        self._idle.set()
        if control is not None:
            control.add_listener(self._on_control)

    def __repr__(self) -> str:
        return f"ExtractionScheduler({self.session_id!r}, running={self.running})"

    # -- observing -----------------------------------------------------------------------

    def add_listener(self, callback: Callable[[ExtractionEvent], None]) -> Callable[[], None]:
        """Call ``callback`` with every extraction event; returns a remover."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    @property
    def running(self) -> bool:
        """An extraction task exists and has not finished."""
        return self._task is not None and not self._task.done()

    @property
    def trailing(self) -> bool:
        """A request is waiting for the running extraction to end."""
        return self._trailing

    @property
    def background_tasks(self) -> frozenset[asyncio.Task[None]]:
        task = self._task
        return frozenset({task}) if task is not None and not task.done() else frozenset()

    async def wait_idle(self) -> None:
        """Return once no extraction runs or waits (tests and benchmarks use it)."""
        await self._idle.wait()

    # -- requests ------------------------------------------------------------------------

    def watch(self, text: str) -> QueryWatch:
        """A watcher for the user query ``text`` (the agent loop feeds it every event)."""
        return QueryWatch(self, text)

    def query_completed(
        self, user_text: str, answer: str, *, saved_memory: bool, after_tools: bool = False
    ) -> None:
        """Record a completed query's turns and schedule an extraction (or skip it).
        ``after_tools``: tools had returned output in the session by the end of the
        query, so its answer may repeat content the user never said (its memories'
        provenance says so)."""
        base = self.transcript[-1].offset + 1 if self.transcript else 0
        self.transcript.append(TranscriptTurn(base, "user", user_text))
        self.transcript.append(TranscriptTurn(base + 1, "assistant", answer, after_tools))
        if saved_memory:
            self._covered.update({base, base + 1})
            self._emit(MemoryExtractionSkippedEvent(reason="saved_memory"))
            return
        self.request()

    def request(self) -> None:
        """Ask for an extraction of everything up to now (needs a running event loop)."""
        if self._closed:
            return
        self._requested_to = self._end()
        if self.deferred and self.handoff is not None:
            return
        if self.running:
            if self._trailing:
                self._emit(
                    MemoryExtractionSkippedEvent(
                        reason="superseded", detail="a newer request replaced it"
                    )
                )
            self._trailing = True
            return
        self._idle.clear()
        task = asyncio.get_running_loop().create_task(
            self._run(), name=f"asyncrecall-extract-{self.session_id}"
        )
        self._task = task
        task.add_done_callback(self._done)

    def cancel(self, reason: ExtractionSkipReason = "cancelled") -> None:
        """Cancel the running extraction and drop the trailing request (reset, stop)."""
        self._trailing = False
        self._cancel_reason = reason
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def owed(self) -> Handoff | None:
        """What was requested and has not run to an end (``None``: nothing): the
        session's uncovered turns up to the newest request's end."""
        if self._requested_to <= self._attempted_to:
            return None
        turns = tuple(t for t in self.transcript if t.offset not in self._covered)
        if not any(t.offset >= self._attempted_to for t in turns):
            return None  # only turns save_memory covered: nothing to ask anyone
        foreign, partial = self._foreign_text()
        return Handoff(
            self.session_id, self._requested_to, turns, noted=self._session_noted,
            foreign=foreign, partial=partial, prefix=self._prefix(),
        )  # fmt: skip

    def _prefix(self) -> PromptPrefix | None:
        return self.prefix() if self.prefix is not None else None

    def _foreign_text(self) -> tuple[tuple[ForeignText, ...], bool]:
        """The session's outside text (held recalled memories included) for a hand-off,
        and whether some of it was dropped."""
        taint = self.taint
        if taint is None:
            return (), False
        store = self.extractor.store
        held = taint.held_recalled(lambda rel: _lookup(store, rel))
        return (*taint.foreign(), *held), taint.partial

    def _fingerprints(self) -> tuple[tuple[Fingerprint, ...], bool]:
        """:meth:`_foreign_text` as fingerprints (each built once per session)."""
        taint = self.taint
        if taint is None:
            return (), False
        store = self.extractor.store
        return tuple(taint.fingerprints(lambda rel: _lookup(store, rel))), taint.partial

    async def aclose(self, *, drain: float | None = None) -> None:
        """End the scheduler; no new requests.

        With a ``handoff``: cancel a running extraction at once (it ends within
        milliseconds: a side query is dropped, a write step is finished), then hand on
        :meth:`owed`. Without: let it finish for at most ``drain`` seconds (default
        ``drain_timeout``), then cancel it and wait for it to end.
        """
        self._closed = True
        task = self._task
        if self.handoff is not None:
            if task is not None and not task.done():
                self.cancel("handed_off")
                await asyncio.wait({task})
            self.handoff(self.owed())
            return
        if task is None or task.done():
            return
        limit = self.drain_timeout if drain is None else drain
        if limit > 0:
            await asyncio.wait({task}, timeout=limit)
        if not task.done():
            self.cancel("cancelled")
            await asyncio.wait({task})

    async def __aenter__(self) -> ExtractionScheduler:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """:meth:`aclose` on leaving ``async with`` (drained for ``drain_timeout``)."""
        await self.aclose()

    # -- the task ------------------------------------------------------------------------

    def _on_control(self) -> None:
        self._closed = True
        self.cancel("cancelled")

    async def _run(self) -> None:
        async with _folder_lock(self.extractor.backend.key):
            while True:
                self._trailing = False
                end = self._end()
                turns = [t for t in self.transcript if t.offset not in self._covered]
                self._emit(MemoryExtractionStartedEvent(session_id=self.session_id, end=end))
                try:
                    foreign, partial = await asyncio.to_thread(self._fingerprints)
                    with background_requests():  # never over a main turn
                        result = await self.extractor.extract(
                            self.session_id, turns, end=end, foreign=foreign, partial=partial,
                            prefix=self._prefix(),
                        )  # fmt: skip
                except asyncio.CancelledError:
                    self._emit(
                        MemoryExtractionSkippedEvent(
                            reason=self._cancel_reason, detail="cursor left at the last commit"
                        )
                    )
                    raise
                except Exception as exc:  # surfaced as a warning and an event, never raised
                    if is_preempted(exc):  # the user's turn comes first: not a failure
                        logger.debug("memory extraction preempted: %s", exc)
                        self._emit(
                            MemoryExtractionSkippedEvent(reason="preempted", detail=str(exc))
                        )
                    else:
                        self._attempted_to = max(self._attempted_to, end)
                        logger.warning("memory extraction failed: %s", exc)
                        self._emit(MemoryExtractionSkippedEvent(reason="error", detail=str(exc)))
                else:
                    self._attempted_to = max(self._attempted_to, end)
                    if not result.asked_model:
                        self._emit(MemoryExtractionSkippedEvent(reason="nothing_new"))
                    else:
                        self._emit(
                            MemoryExtractedEvent(
                                session_id=self.session_id,
                                paths=result.paths,
                                created=result.created,
                                updated=result.updated,
                                refused=len(result.refused),
                                start=result.start,
                                end=result.end,
                                elapsed_ms=round(result.elapsed_ms, 1),
                            )
                        )
                if not self._trailing:
                    break
            await self._maybe_consolidate()

    async def _maybe_consolidate(self) -> None:
        """Count this session once, then consolidate if 24 h and 5 sessions have passed."""
        gate = self.consolidation
        if gate is None:
            return
        note, self._session_noted = not self._session_noted, True
        await maybe_consolidate(self.extractor, gate, note_session=note, emit=self._emit)

    def _end(self) -> int:
        return self.transcript[-1].offset + 1 if self.transcript else 0

    def _done(self, task: asyncio.Task[None]) -> None:
        if self._task is task:
            self._task = None
        if not task.cancelled() and task.exception() is not None:
            logger.warning("memory extraction task failed: %r", task.exception())
        if self._trailing and not self._closed and not task.cancelled():
            # A request came after the task's last look (while it counted the session
            # for consolidation, or left the folder lock): it runs now, not never.
            self._trailing = False
            self.request()
        if not self.running:
            self._idle.set()

    def _emit(self, event: ExtractionEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a broken listener must not break extraction
                logger.exception("extraction event listener failed")


async def maybe_consolidate(
    extractor: MemoryExtractor,
    gate: Gate,
    *,
    note_session: bool,
    emit: Callable[[ExtractionEvent], None] | None = None,
) -> None:
    """Count a session (``note_session``), then consolidate when due and the gate's lock
    is ours; failures are warnings on ``asyncrecall.agent``, never raised."""
    try:
        if note_session:
            await asyncio.to_thread(gate.note_session)
        if not await asyncio.to_thread(gate.due) or not await asyncio.to_thread(gate.acquire):
            return
    except AsyncRecallError as exc:
        logger.warning("memory consolidation skipped: %s", exc)
        return
    completed = False
    try:
        with background_requests():
            result = await consolidate(extractor.store, extractor.model, backend=extractor.backend)
        completed = True
        if emit is not None:
            emit(
                MemoryConsolidatedEvent(
                    written=result.written, removed=result.removed, actions=len(result.actions)
                )
            )
    except AsyncRecallError as exc:
        logger.warning("memory consolidation failed: %s", exc)
    finally:
        await asyncio.to_thread(gate.release, completed=completed)


def _lookup(store: Store, rel_path: str) -> MemoryDoc | None:
    """A recalled memory as it is now (``None``: gone or unreadable)."""
    try:
        return store.get(rel_path)
    except (AsyncRecallError, OSError, KeyError, ValueError):
        return None


def is_preempted(error: BaseException) -> bool:
    """Whether ``error`` is a side query giving way to a main turn: the embedded engine's
    "a main turn needs me" (checked without importing it), or an endpoint's that cuts a
    stream for a second request (``SideRequestYielded``). The cursor has not moved: the
    next extraction covers those turns."""
    if isinstance(error, SideRequestYielded):
        return True
    engine = sys.modules.get("asyncrecall.models._local_engine")
    return engine is not None and isinstance(error, engine.Preempted)


def is_embedded(model: Model) -> bool:
    """Whether ``model`` is the embedded llama.cpp model (checked without importing it)."""
    local = sys.modules.get("asyncrecall.models._local")
    return local is not None and isinstance(model, local.LocalModel)

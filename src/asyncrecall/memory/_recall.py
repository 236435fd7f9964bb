"""Recall: scan the folder, ask a selector, format the memory block.

:meth:`Recaller.recall` is what the agent starts (and never awaits) on each user
query. Its promises:

- an empty or blank query, no document left after ``excluded_paths``, or ``limit`` 0:
  :data:`EMPTY_RECALL`, and no selector is asked (no side query); so too a query with
  nothing to recall (:func:`~asyncrecall.memory._budget.nothing_to_recall`: one word,
  a bare "yes"/"ok") when the manager's ``skip_trivial`` is on (the command line's
  default: the ``skip_trivial`` setting; off by default in the library, where a
  caller's one-word message may be a real query);
- a selector that is not instant and has an ``abstains(query, docs)`` method (the
  model selector: the embedded selectors' names gate, read from its warm lexical
  fallback) is not asked when that gives a reason: no side query for a question about
  something no memory mentions; ``RecallResult.reason`` carries it;
- a selector with an ``offer`` method (the model selector: its bounded manifest) is
  offered only what that returns; ``RecallResult.manifest_left_out`` counts the rest
  (its fallback is offered everything);
- each body in the block is cut at ``file_lines`` lines and ``file_chars`` characters,
  with a note naming the file (:meth:`Recaller.format_block`);
- excluded paths are never offered to a selector, nor are quarantined memories (held by
  an untrusted write the user has not confirmed since: see ``_provenance``) unless the manager's
  ``quarantine`` is off;
- an :class:`~asyncrecall.memory.InstantSelector` whose ``inline`` is true (the
  lexical one) runs inline, scan included, so the recall completes without ever
  suspending, but only when that costs about a millisecond at most: every file's parse
  is cached (:meth:`FolderStore.scan_cached`) and the selector is :meth:`ready` for
  them, or what is not adds up to :data:`INLINE_BUDGET_BYTES` (4 KiB: a note or two
  saved since the last recall, parsed and tokenised here in about 0.5 ms). Otherwise
  (a new process before its warm-up is done, many new files) the scan, parse and
  tokenising run in a worker thread: the event loop never pays for them;
- :meth:`Recaller.start_warming` (no event loop needed: call it at import or at
  start-up) reads the folder and prepares the selectors in a daemon thread now, so the
  first recall finds them ready;
- when the caller's :class:`~asyncrecall.CancelSignal` fires, the running step (the
  folder scan, or the selector's task: a side query's HTTP connection closes) is
  cancelled and drained, and recall returns :data:`EMPTY_RECALL` at once, logging
  nothing (a scan already running in its worker thread finishes there, unused; worker
  threads are daemons, never joined, so the program's exit never waits for them);
- when the task running recall is itself cancelled by someone else, the selector's task
  is cancelled and drained, and the ``CancelledError`` propagates: recall never
  swallows a cancellation it did not issue;
- any other selector failure (model error, invalid answer, HTTP 500 ...) is logged once
  as a warning on ``asyncrecall.memory`` and the selector's ``fallback`` (lexical by
  default for the model selector) answers instead; ``fallback_reason`` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Collection, Coroutine, Sequence
from typing import Any, TypeGuard, TypeVar

from asyncrecall._cancel import SIGNAL_CANCEL, CancelSignal
from asyncrecall._exceptions import SelectorError
from asyncrecall.memory._budget import FILE_CHARS, FILE_LINES, nothing_to_recall
from asyncrecall.memory._prompt import cut_body, format_memory_block
from asyncrecall.memory._selector import InstantSelector, Selector
from asyncrecall.memory._store import Store
from asyncrecall.memory._threads import run_off_loop
from asyncrecall.memory._types import EMPTY_RECALL, MemoryDoc, RecallResult

__all__ = ["DEFAULT_LIMIT", "INLINE_BUDGET_BYTES", "TOO_SHORT", "Recaller"]

_T = TypeVar("_T")

logger = logging.getLogger("asyncrecall.memory")

#: Files put in one memory block at most.
DEFAULT_LIMIT = 5
#: What an instant recall may still read and tokenise inline, in bytes of notes (a 1.5
#: KiB note: about 0.15 ms to parse and tokenise with PyStemmer on this machine).
INLINE_BUDGET_BYTES = 4096
#: The result of a recall skipped because the query holds nothing to recall.
TOO_SHORT = RecallResult("", (), "none", reason="too_short")


class Recaller:
    """Recall over one memory folder with one configured selector."""

    def __init__(
        self,
        store: Store,
        selector: Selector,
        *,
        clock: Callable[[], float] = time.time,
        quarantine: bool = True,
        file_chars: int = FILE_CHARS,
        file_lines: int = FILE_LINES,
        skip_trivial: bool = False,
    ) -> None:
        if file_chars < 1 or file_lines < 1:
            raise ValueError("file_chars and file_lines must be at least 1")
        self.store = store
        self.selector = selector
        self._clock = clock
        #: Leave quarantined memories out (held by an untrusted write the user has not
        #: confirmed since: see ``_provenance``); ``False`` offers every memory.
        self.quarantine = quarantine
        #: What of each body the block holds (the rest: a note names the file).
        self.file_chars = file_chars
        self.file_lines = file_lines
        #: Recall nothing for a prompt with nothing to recall (one word, a bare "ok");
        #: the settings turn it on for the command line (``skip_trivial``).
        self.skip_trivial = skip_trivial

    def skips(self, query: str) -> bool:
        """Whether :meth:`recall` gives nothing for ``query`` without looking: blank, or
        nothing to recall (one word, a bare "yes"/"ok") while ``skip_trivial`` is on."""
        return not query.strip() or (self.skip_trivial and nothing_to_recall(query))

    def format_block(self, docs: Sequence[MemoryDoc], *, now: float | None = None) -> str:
        """The memory block of ``docs``, each body within this manager's file cap
        (``now``: a Unix time for the ages; default: the manager's clock)."""
        return format_memory_block(
            docs,
            now=self._clock() if now is None else now,
            file_chars=self.file_chars,
            file_lines=self.file_lines,
        )

    def cut_paths(self, docs: Sequence[MemoryDoc]) -> tuple[str, ...]:
        """Which of ``docs`` the file cap cuts in the block (their notes name them)."""
        return tuple(
            doc.rel_path
            for doc in docs
            if cut_body(
                doc.body.strip("\n"), file_chars=self.file_chars, file_lines=self.file_lines
            )[1]
        )

    def __repr__(self) -> str:
        return f"Recaller({self.store!r}, {self.selector!r})"

    async def recall(
        self,
        query: str,
        *,
        excluded_paths: Collection[str] = (),
        limit: int = DEFAULT_LIMIT,
        cancel: CancelSignal | None = None,
        selector: Selector | None = None,
    ) -> RecallResult:
        """The memory block for ``query`` and the files in it (see the module's promises)."""
        if limit <= 0 or (cancel is not None and cancel.cancelled) or not query.strip():
            return EMPTY_RECALL
        if self.skips(query):
            return TOO_SHORT
        chosen = selector if selector is not None else self.selector
        if _is_inline(chosen) and self.store.inline_scan:
            inline = self._recall_inline(chosen, query, excluded_paths, limit)
            if inline is not None:
                return inline
        docs = self.store.scan_cached() if self.store.inline_scan else None
        if docs is None:
            candidates = self.store.candidates(query, exclude=excluded_paths)
            scan = await _bridged(candidates, cancel, name="memory-scan")
            if scan is None:
                return EMPTY_RECALL  # our cancel fired: nothing to log, nothing to return
            docs = scan.result()
        offered = self._offered(docs, excluded_paths)
        if not offered:
            return EMPTY_RECALL
        gate: Callable[[str, Sequence[MemoryDoc]], str | None] | None
        gate = getattr(chosen, "skip_reason", None) if not _is_inline(chosen) else None
        if gate is not None:
            why = gate(query, offered)
            if why is not None:
                return RecallResult("", (), chosen.name, reason=why)
        offer: Callable[[Sequence[MemoryDoc]], Sequence[MemoryDoc]] | None
        offer = getattr(chosen, "offer", None)
        prefer: Callable[[str, Sequence[MemoryDoc]], Sequence[MemoryDoc]] | None
        prefer = getattr(chosen, "prefer", None)
        listed = offered
        if offer is not None:
            listed = offer(prefer(query, offered) if prefer is not None else offered)
        left_out = len(offered) - len(listed)
        outcome = await _select(chosen, query, listed, limit=limit, cancel=cancel)
        if outcome is None:
            return EMPTY_RECALL
        selected, error, why = outcome
        if error is None:
            return self._result(selected, chosen.name, manifest_left_out=left_out, reason=why)
        reason = f"{chosen.name} selector failed: {_describe(error)}"
        fallback: Selector | None = getattr(chosen, "fallback", None)
        if fallback is None or fallback is chosen:
            logger.warning("memory recall failed, no fallback: %s", reason)
            return RecallResult("", (), "none", fallback_reason=reason, reason="selector_failed")
        logger.warning("memory recall fell back to the %s selector: %s", fallback.name, reason)
        outcome = await _select(fallback, query, offered, limit=limit, cancel=cancel)
        if outcome is None:
            return EMPTY_RECALL
        selected, error, why = outcome
        if error is not None:
            logger.warning("memory recall fallback failed too: %s", _describe(error))
            return RecallResult("", (), "none", fallback_reason=reason, reason="selector_failed")
        return self._result(selected, fallback.name, fallback_reason=reason, reason=why)

    async def warm(self, *, selector: Selector | None = None) -> None:
        """Scan the folder and do an instant selector's cold work (the lexical one:
        load the stemmer, read or build the term counts) in a worker thread, so the
        next recalls run inline. Call it at start-up; cancelling it stops the wait.

        A selector with an instant ``fallback`` (the model selector's lexical one) has
        that fallback warmed.
        """
        targets = self._warm_targets(selector)
        if self.store.inline_scan:
            docs = self.store.scan_cached()  # never waits for a scan in another thread
            if docs is not None and all(_prepared(target, docs) for target in targets):
                return  # warm already (read at start-up): starting a thread costs the loop
        await run_off_loop(lambda _stop: self._warm_now(targets), name="asyncrecall-warm")

    def start_warming(
        self, *selectors: Selector, first: Callable[[], object] | None = None
    ) -> threading.Thread:
        """Start :meth:`warm`'s work now in a daemon thread and return at once.

        Needs no event loop: call it at import time or at the application's start-up,
        so the folder is read while the rest of the program is still importing. The
        recalls that come before it is done go their usual way (a worker thread, never
        the event loop); the ones after run inline. ``selectors``: others to warm too
        (an instant selector the prefetcher runs besides this manager's). The thread is
        never joined (exit does not wait for it); calling again while it runs returns it.
        ``first``: work to do in that thread before (the command line has a changed
        folder parsed in a child process there).
        """
        running = _warming_now(self.store)
        if running is not None:
            return running
        targets = self._warm_targets(None)
        for extra in selectors:
            targets.extend(t for t in self._warm_targets(extra) if t not in targets)

        def warm() -> None:
            try:
                if first is not None:
                    first()
                self._warm_now(targets)
            except Exception:
                logger.warning(
                    "warming the memory of %s failed", self.store.location, exc_info=True
                )

        return _start_warming(self.store, warm)

    def _warm_targets(self, selector: Selector | None) -> list[InstantSelector]:
        """The instant selector to prepare for ``selector`` (itself, or its instant
        ``fallback``: the model selector's lexical one)."""
        chosen: object = selector if selector is not None else self.selector
        if not _is_inline(chosen):
            chosen = getattr(chosen, "fallback", None)
        return [chosen] if _is_inline(chosen) else []

    def _warm_now(self, targets: Sequence[InstantSelector]) -> None:
        """Scan (from the folder's persisted index when there is one) and prepare."""
        store = self.store
        docs = store.warm_scan()
        for target in targets:
            target.prepare(docs)

    def recall_instant(
        self,
        query: str,
        *,
        excluded_paths: Collection[str] = (),
        limit: int = DEFAULT_LIMIT,
        selector: InstantSelector | None = None,
    ) -> RecallResult | None:
        """The instant pass: an inline selector's recall computed now, never waiting.

        ``None`` when it is not warm (a new process, new files: something would need
        reading or tokenising): nothing is read or tokenised on the caller's thread, and
        a worker thread warms the folder and the selector, so a later call answers.
        ``selector`` defaults to the manager's, which must then be instant.
        """
        chosen = selector if selector is not None else self.selector
        if not _is_inline(chosen):
            raise TypeError(f"{chosen!r} is not an inline (instant) selector")
        if limit <= 0 or not query.strip():
            return EMPTY_RECALL
        if self.skips(query):
            return TOO_SHORT
        result = self._recall_inline(chosen, query, excluded_paths, limit)
        if result is None:
            self._warm(chosen)
        return result

    def _warm(self, selector: InstantSelector) -> None:
        """Scan and prepare ``selector`` in a daemon thread (one at a time, never joined)."""
        if _warming_now(self.store) is not None:
            return  # a warm-up of this store runs (maybe another manager's, at start-up)

        def warm() -> None:
            try:
                self._warm_now([selector])
            except Exception:
                logger.warning("warming the %s selector failed", selector.name, exc_info=True)

        _start_warming(self.store, warm)

    def _recall_inline(
        self, selector: InstantSelector, query: str, excluded_paths: Collection[str], limit: int
    ) -> RecallResult | None:
        """Scan and rank without yielding to the event loop, when both are warm (200
        files: about 0.6 ms) or what is missing fits :data:`INLINE_BUDGET_BYTES`;
        ``None`` when more would need reading or tokenising."""
        store = self.store
        docs = store.scan_cached(budget_bytes=INLINE_BUDGET_BYTES)
        if docs is None:
            return None
        offered = self._offered(docs, excluded_paths)
        if not offered:
            return EMPTY_RECALL
        if not selector.ready(offered):
            count_within = getattr(selector, "count_within", None)
            if count_within is None or not count_within(offered, INLINE_BUDGET_BYTES):
                return None
        explained = getattr(selector, "rank_explained", None)
        if explained is not None:
            answer, why = explained(query, offered, limit=limit)
        else:
            answer, why = selector.rank(query, offered, limit=limit), None
        ranked, error = _as_offered(answer, offered)
        if error is not None:
            logger.warning("the %s selector failed: %s", selector.name, _describe(error))
            return RecallResult(
                "", (), "none", fallback_reason=_describe(error), reason="selector_failed"
            )
        return self._result(ranked, selector.name, reason=why)

    def _offered(
        self, docs: Sequence[MemoryDoc], excluded_paths: Collection[str]
    ) -> list[MemoryDoc]:
        """What a selector is offered: not excluded, and not quarantined (unless off)."""
        excluded = frozenset(excluded_paths)
        held = self.quarantine
        return [d for d in docs if d.rel_path not in excluded and not (held and d.quarantined)]

    def _result(
        self,
        selected: Sequence[MemoryDoc],
        strategy: str,
        *,
        fallback_reason: str | None = None,
        manifest_left_out: int = 0,
        reason: str | None = None,
    ) -> RecallResult:
        docs = tuple(d for d in selected if not (self.quarantine and d.quarantined))
        prompt = self.format_block(docs) if docs else ""
        return RecallResult(
            prompt,
            docs,
            strategy,
            fallback_reason=fallback_reason,
            manifest_left_out=manifest_left_out,
            reason=None if docs else (reason or "chose_none"),
        )


#: The warm-up thread of each store, while it runs (one at a time per store, whichever
#: manager started it: starting a thread holds the event loop until it runs).
_WARMING: weakref.WeakKeyDictionary[Store, threading.Thread] = weakref.WeakKeyDictionary()
_WARMING_LOCK = threading.Lock()


def _prepared(selector: InstantSelector, docs: Sequence[MemoryDoc]) -> bool:
    """Whether warming ``selector`` for ``docs`` has nothing left to do: it is ready,
    and so are its optional vectors (the semantic instant pass ranks without them,
    but a warm-up is where they are made)."""
    vectors_ready: Callable[[Sequence[MemoryDoc]], bool] | None
    vectors_ready = getattr(selector, "vectors_ready", None)
    return selector.ready(docs) and (vectors_ready is None or vectors_ready(docs))


def _warming_now(store: Store) -> threading.Thread | None:
    with _WARMING_LOCK, contextlib.suppress(TypeError):  # TypeError: no weak reference
        thread = _WARMING.get(store)
        return thread if thread is not None and thread.is_alive() else None
    return None


def _start_warming(store: Store, work: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=work, name="asyncrecall-warm", daemon=True)
    with _WARMING_LOCK, contextlib.suppress(TypeError):  # a store without weak references
        _WARMING[store] = thread
    thread.start()
    return thread


#: Types already seen to be instant selectors (``isinstance`` against a runtime protocol
#: costs about 20 µs, on the event loop, per user message).
_INSTANT_TYPES: set[type] = set()


def _is_inline(selector: object) -> TypeGuard[InstantSelector]:
    """An instant selector that allows inline runs (``inline = False`` is respected)."""
    if getattr(selector, "inline", None) is not True:
        return False
    if type(selector) in _INSTANT_TYPES:
        return True
    if isinstance(selector, InstantSelector):
        _INSTANT_TYPES.add(type(selector))
        return True
    return False


async def _select(
    selector: Selector,
    query: str,
    docs: Sequence[MemoryDoc],
    *,
    limit: int,
    cancel: CancelSignal | None,
) -> tuple[list[MemoryDoc], BaseException | None, str | None] | None:
    """Run ``selector.select`` (``select_explained`` when it has one) in its own task,
    bridged to ``cancel``.

    ``None`` when ``cancel`` fired; ``(docs, None, why)`` on success (``why``: the
    selector's reason for selecting nothing, when it gives one); ``([], error, None)``
    on a failure, a cancellation that came from inside the selector included.
    """
    explained = getattr(selector, "select_explained", None)
    work = (
        explained(query, docs, limit=limit)
        if explained is not None
        else _unexplained(selector, query, docs, limit)
    )
    task = await _bridged(work, cancel, name=f"memory-select-{selector.name}")
    if task is None:
        return None
    if task.cancelled():
        return [], asyncio.CancelledError("the selector's task was cancelled from inside"), None
    error = task.exception()
    if error is not None:
        return [], error, None
    answer, why = task.result()
    chosen, error = _as_offered(list(answer)[:limit], docs)
    return chosen, error, why


async def _unexplained(
    selector: Selector, query: str, docs: Sequence[MemoryDoc], limit: int
) -> tuple[list[MemoryDoc], str | None]:
    return await selector.select(query, docs, limit=limit), None


def _as_offered(
    selected: Sequence[MemoryDoc], offered: Sequence[MemoryDoc]
) -> tuple[list[MemoryDoc], BaseException | None]:
    """The offered documents a selector's answer names, or an error when it names one it
    was not offered: whoever wrote the selector, only what the store offered (its own
    text, not the selector's copy) can reach a request."""
    by_path = {d.rel_path: d for d in offered}
    chosen: list[MemoryDoc] = []
    for doc in selected:
        known = by_path.get(getattr(doc, "rel_path", None))  # type: ignore[arg-type]
        if known is None:
            return [], SelectorError(f"selected {getattr(doc, 'rel_path', doc)!r:.80}, not offered")
        if known not in chosen:
            chosen.append(known)
    return chosen, None


async def _bridged(
    work: Coroutine[Any, Any, _T], cancel: CancelSignal | None, *, name: str
) -> asyncio.Task[_T] | None:
    """Run ``work`` in a task that ``cancel`` cancels; return the finished task.

    Returns ``None`` when ``cancel`` fired (the task was cancelled and drained, its
    outcome dropped). If the calling task is cancelled, the inner task is cancelled and
    drained first, then the ``CancelledError`` propagates: never swallowed.
    """
    finished = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not finished.done():
            finished.set_result(None)

    async def run() -> _T:
        try:
            return await work
        finally:
            # Woken from the task's last step: it is done by the time we resume, one
            # loop iteration sooner than through its done-callbacks (asyncio.wait).
            wake()

    def done(_task: object) -> None:
        work.close()  # cancelled before its first step, ``work`` never ran: no warning
        wake()

    task = asyncio.create_task(run(), name=name)
    task.add_done_callback(done)

    def cancel_task() -> None:
        task.cancel(SIGNAL_CANCEL)  # dropped on purpose: see cancelled_by_signal

    remove = cancel.add_listener(cancel_task) if cancel is not None else None
    try:
        await finished
    except asyncio.CancelledError:
        await _cancel_and_drain(task)
        raise
    finally:
        if remove is not None:
            remove()
    if cancel is not None and cancel.cancelled:
        _retrieve(task)
        return None
    return task


async def _cancel_and_drain(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has finished, whatever it raises."""
    task.cancel()
    try:
        await asyncio.wait({task})
    finally:
        _retrieve(task)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a finished task's exception as seen: its outcome is deliberately dropped."""
    if task.done() and not task.cancelled():
        task.exception()


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = type(error).__name__
    return f"{name}: {text}" if text else name

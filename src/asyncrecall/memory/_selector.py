"""The selector protocol, and the validation of a selector's answer.

A selector picks, for a query, at most ``limit`` documents among those it is offered.
Two ship here: :class:`~asyncrecall.memory.LexicalSelector` (BM25, local, instant) and
:class:`~asyncrecall.memory.ModelSelector` (one side query to a fast model).

A selector may carry a ``fallback`` attribute (another selector, or ``None``): when
its ``select`` fails with anything but a cancellation, :class:`Recaller` asks
the fallback instead and records why in ``RecallResult.fallback_reason``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from asyncrecall._exceptions import SelectorError
from asyncrecall.memory._types import MemoryDoc

__all__ = ["SELECTION_KEY", "InstantSelector", "Selector", "validate_selection"]

#: The one property of a selector's JSON answer: the chosen relative paths.
SELECTION_KEY = "selected_memories"


@runtime_checkable
class Selector(Protocol):
    """Picks the documents relevant to a query."""

    @property
    def name(self) -> str:
        """The strategy name recorded in ``RecallResult.strategy`` (``lexical``, ``model``)."""
        ...

    async def select(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """At most ``limit`` of ``docs``, best first; raises on failure.

        Cancelling the task that runs this must stop any work it started (a side
        query's HTTP request included).
        """
        ...


@runtime_checkable
class InstantSelector(Selector, Protocol):
    """A selector that can answer synchronously, with no I/O, when it is warm.

    Recall runs such a selector inline (scan included), so a recall started as a task
    finishes in its first step, only when ``inline`` is true, every file's parse is
    cached and :meth:`ready` says ranking costs well under a millisecond; otherwise
    it calls ``select``, which must then do its cold work (loading, tokenising) off the
    event loop. The embedding selectors load a model on first use: they are not
    instant.
    """

    #: Whether recall may run this selector on the event loop (when :meth:`ready`).
    inline: bool

    def ready(self, docs: Sequence[MemoryDoc]) -> bool:
        """Whether :meth:`rank` over ``docs`` would do no I/O and no cold work now."""
        ...

    def prepare(self, docs: Sequence[MemoryDoc]) -> None:
        """Do the cold work for ``docs`` now (blocking: called off the event loop)."""
        ...

    def rank(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """At most ``limit`` of ``docs``, best first, computed now."""
        ...


def validate_selection(answer: Any, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
    """The documents named by a ``{"selected_memories": [paths]}`` answer.

    Raises :class:`SelectorError` when the answer is not that shape, names a path that
    was not offered, or names more than ``limit`` paths. A path named twice counts once.
    """
    if not isinstance(answer, Mapping) or SELECTION_KEY not in answer:
        raise SelectorError(f"malformed selector answer: expected an object with {SELECTION_KEY!r}")
    paths = answer[SELECTION_KEY]
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise SelectorError(f"malformed selector answer: {SELECTION_KEY!r} must be a list of paths")
    unique = list(dict.fromkeys(paths))
    if len(unique) > limit:
        raise SelectorError(f"selector chose {len(unique)} memories; the limit is {limit}")
    by_path = {doc.rel_path: doc for doc in docs}
    unknown = [p for p in unique if p not in by_path]
    if unknown:
        raise SelectorError(f"selector chose a path that was not offered: {unknown[0]!r}")
    return [by_path[p] for p in unique]

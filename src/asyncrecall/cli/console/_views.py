"""What the console's pages show, read from the store: plain values for the templates."""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass
from typing import Any

from asyncrecall.memory import MemoryDoc, Store
from asyncrecall.memory._history import HistoryRecord
from asyncrecall.memory._pending import PendingChange
from asyncrecall.memory._provenance import Source, lifts

__all__ = [
    "Filters",
    "HeldItem",
    "Version",
    "diff_lines",
    "held_items",
    "hold_reasons",
    "matching",
    "origins_of",
    "source_row",
    "versions",
    "when",
]

#: Why a source without a ``held`` reason of its own holds a memory, by origin.
_UNTRUSTED_WHY = {
    "import": "imported without --trusted: its claims about itself cannot be checked",
    "mcp": "saved by an MCP client the server does not trust",
    "library": "saved through the store API without a trusted origin",
    "save_memory": "the model saved it after reading tool output, with no user turn behind it",
    "extraction-assistant": "extracted from the model's text after tool output",
    "consolidation": "a consolidation wrote it from held text",
}


@dataclass(frozen=True, slots=True)
class Filters:
    """The memory list's search and filters (empty: no filter)."""

    q: str = ""
    type: str = ""
    origin: str = ""
    held: str = ""  # "", "held" (held or a change waits), "recalled"

    def keep(self, doc: MemoryDoc, waiting: set[str]) -> bool:
        if self.type and doc.type != self.type:
            return False
        if self.origin and self.origin not in _origins(doc):
            return False
        is_held = doc.quarantined or doc.name in waiting
        if self.held == "held" and not is_held:
            return False
        if self.held == "recalled" and is_held:
            return False
        if self.q:
            words = self.q.casefold().split()
            text = f"{doc.name}\n{doc.description}\n{doc.body}".casefold()
            return all(word in text for word in words)
        return True


def matching(store: Store, filters: Filters) -> tuple[list[MemoryDoc], set[str]]:
    """The memories that pass ``filters``, newest first, and the names with a change waiting."""
    waiting = store.pending_names()
    return [d for d in store.scan(limit=None) if filters.keep(d, waiting)], waiting


def origins_of(docs: list[MemoryDoc]) -> list[str]:
    """Every origin any of ``docs`` names, sorted."""
    return sorted({o for d in docs for o in _origins(d)})


def _origins(doc: MemoryDoc) -> set[str]:
    return {part.removesuffix(" (untrusted)") for part in doc.origin.split(", ") if part}


def hold_reasons(sources: tuple[Source, ...]) -> list[str]:
    """Why a memory with these sources is held: each untrusted source after the last
    one that lifts a hold, in words."""
    reasons: list[str] = []
    for source in reversed(sources):
        if lifts(source):
            break
        if source.untrusted:
            why = source.held or _UNTRUSTED_WHY.get(
                source.origin, "written from text you did not write"
            )
            reasons.append(f"{source.origin}, {when(source.at)}: {why}")
    return reasons[::-1]


def source_row(source: Source) -> dict[str, Any]:
    """One provenance entry for the page."""
    return {
        "origin": source.origin,
        "at": when(source.at),
        "session": source.session,
        "untrusted": source.untrusted,
        "held": source.held,
        "attested": source.attested,
    }


@dataclass(frozen=True, slots=True)
class HeldItem:
    """One entry of the held inbox: a held memory, or a change waiting beside one."""

    doc: MemoryDoc
    change: PendingChange | None
    reasons: list[str]
    diff: list[tuple[str, str]]


def held_items(store: Store) -> list[HeldItem]:
    """Every held memory and every memory with a change waiting, newest first."""
    waiting = store.pending_names()
    items: list[HeldItem] = []
    for doc in store.scan(limit=None):
        if doc.quarantined:
            reasons = hold_reasons(store.provenance_of(doc))
            items.append(HeldItem(doc, None, reasons, []))
        elif doc.name in waiting and (change := store.pending_of(doc)) is not None:
            reasons = hold_reasons(change.sources) or ["a change from an untrusted source"]
            items.append(HeldItem(doc, change, reasons, diff_lines(doc.body, change.body)))
    return items


@dataclass(frozen=True, slots=True)
class Version:
    """One recorded write of a memory, with its change as a diff."""

    record: HistoryRecord
    at: str
    diff: list[tuple[str, str]]


def versions(records: list[HistoryRecord]) -> list[Version]:
    """``records`` newest first, each with the diff of what it changed."""
    return [Version(r, when(r.at), diff_lines(r.before or "", r.after or "")) for r in records][
        ::-1
    ]


def diff_lines(before: str, after: str) -> list[tuple[str, str]]:
    """A unified diff of two texts as ``(kind, line)``: ``add``, ``del``, ``hunk`` or ``ctx``."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), "before", "after", n=2, lineterm=""
    )
    out: list[tuple[str, str]] = []
    for line in lines:
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        out.append((kind, line))
    return out


def when(at: float) -> str:
    """A POSIX time as local date and time (``-`` for none)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else "-"

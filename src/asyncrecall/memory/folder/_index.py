"""``MEMORY.md``'s lines as the folder's writes edit them: one write's edit, and a batch's.

A write replaces (or drops) the line linking to the topic file it wrote and repairs the
rest (:func:`edited`): every memory keeps a line (one without gets it, oldest first), and
a line linking to a topic file that does not exist is dropped (a crash between a file's
removal and the index's). A batch of writes (an import) keeps the lines in an
:class:`IndexDraft` and writes them once: its first write edits as one write does, each
later one only replaces its line or appends it, so the text is the one the writes would
have left one by one, for a cost that does not grow with the folder.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from asyncrecall.memory._limits import index_line
from asyncrecall.memory._types import MemoryDoc

__all__ = ["INDEX_BYTES", "IndexDraft", "edited", "index_lines", "index_text", "link_target"]

_LINK: Final = re.compile(r"\]\(([^)\s]+\.md)\)")
#: How ``MEMORY.md`` is read to be edited and written back: a byte that is not UTF-8
#: (a hand edit in another encoding) is kept as it was, not replaced.
INDEX_BYTES: Final = "surrogateescape"


def index_lines(raw: bytes | None) -> list[str]:
    """The lines of ``MEMORY.md``'s bytes ``raw``, to edit (see :data:`INDEX_BYTES`)."""
    return raw.decode("utf-8", errors=INDEX_BYTES).splitlines() if raw else []


def link_target(line: str) -> str | None:
    """The topic file an index line links to (``None``: not a link to a relative ``.md``)."""
    match = _LINK.search(line)
    if match is None:
        return None
    target = match.group(1)
    if "://" in target or target.startswith(("/", "#")):
        return None
    return target


def edited(
    lines: Sequence[str],
    rel: str | None,
    line: str | None,
    docs: Sequence[MemoryDoc],
    exists: Callable[[str], bool],
) -> list[str]:
    """``lines`` with the line linking to ``rel`` replaced by ``line`` (dropped when
    ``line`` is None; appended when there is none), and repaired: ``docs`` (the
    folder's memories) each keep a line, and a line whose target does not ``exists`` is
    dropped."""
    out: list[str] = []
    placed = False
    linked: set[str] = set()
    for existing in lines:
        target = link_target(existing)
        if target is not None and target == rel:
            if line is not None and not placed:
                out.append(line)
                placed = True
            continue
        if target is not None and not exists(target):
            continue  # a line to a removed file (a crash between unlink and index)
        if target is not None:
            linked.add(target)
        out.append(existing)
    missing = [
        index_line(d.name, d.rel_path, d.description)
        for d in sorted(docs, key=lambda d: (d.mtime, d.rel_path))
        if d.rel_path not in linked and d.rel_path != rel
    ]
    if rel is not None and line is not None and not placed:
        missing.append(line)
    if missing:
        while out and not out[-1].strip():
            out.pop()
        out.extend(missing)
    return out


def index_text(lines: Sequence[str]) -> str:
    """The index file's text of ``lines``."""
    return "\n".join(lines) + "\n" if lines else ""


class IndexDraft:
    """The index's lines across the writes of one batch, after the first write's
    :func:`edited` (which repaired them): each later write replaces the lines linking to
    its file (the first takes the new line, the others go) or appends one, and a removal
    drops them, at a cost that does not depend on the number of lines."""

    def __init__(self, lines: Sequence[str]) -> None:
        self._lines: list[str | None] = list(lines)
        self._at: dict[str, list[int]] = {}
        for number, text in enumerate(lines):
            target = link_target(text)
            if target is not None:
                self._at.setdefault(target, []).append(number)

    def set(self, rel: str, line: str) -> None:
        """What :func:`edited` does for a write of ``rel`` to lines it already repaired."""
        places = self._at.get(rel)
        if places:
            first, *others = places
            self._lines[first] = line
            for number in others:
                self._lines[number] = None
            self._at[rel] = [first]
            return
        while self._lines and (self._lines[-1] is None or not self._lines[-1].strip()):
            self._lines.pop()
        self._lines.append(line)
        self._at[rel] = [len(self._lines) - 1]

    def drop(self, rel: str) -> None:
        """What :func:`edited` does for a removal of ``rel`` from lines it repaired."""
        for number in self._at.pop(rel, ()):
            self._lines[number] = None

    def lines(self) -> list[str]:
        """The lines as they now are."""
        return [text for text in self._lines if text is not None]

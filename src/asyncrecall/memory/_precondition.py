"""Preconditions of writes: what a writer read of a memory, checked again when it writes.

A write the model asked for (extraction, consolidation) was planned on a snapshot that
may be seconds old; someone may have saved or forgotten that memory meanwhile. Such a
write passes ``expected``: the :class:`~asyncrecall.memory.MemoryDoc` it read (the
memory must still say exactly that), ``None`` (the name must not exist), or
:data:`ANYTHING` (no precondition: the user's own saves). The store checks it under its
lock (a folder) or in the write's transaction (a database) and raises
:class:`~asyncrecall.MemoryConflictError`, writing nothing, when it fails.
"""

from __future__ import annotations

import enum
from typing import Final, TypeAlias

from asyncrecall._exceptions import MemoryConflictError
from asyncrecall.memory._types import MemoryDoc

__all__ = ["ANYTHING", "Anything", "Expected", "check_expected", "same_content"]


class Anything(enum.Enum):
    """The type of :data:`ANYTHING`."""

    ANYTHING = "anything"


#: No precondition: write whatever the memory holds now.
ANYTHING: Final = Anything.ANYTHING

#: What a write expects to find: the memory as read, ``None`` (absent), or anything.
Expected: TypeAlias = "MemoryDoc | Anything | None"


def same_content(a: MemoryDoc, b: MemoryDoc) -> bool:
    """Whether two reads of a memory say the same: name, description, type and body."""
    return (a.name, a.description, a.type, a.body.strip("\n")) == (
        b.name,
        b.description,
        b.type,
        b.body.strip("\n"),
    )


def check_expected(expected: Expected, current: MemoryDoc | None, *, name: str) -> None:
    """:class:`MemoryConflictError` unless ``current`` is what ``expected`` says."""
    if expected is ANYTHING:
        return
    if expected is None:
        if current is not None:
            raise MemoryConflictError(f"memory {name!r} was created meanwhile; nothing written")
        return
    assert isinstance(expected, MemoryDoc)
    if current is None:
        raise MemoryConflictError(f"memory {name!r} was removed meanwhile; nothing written")
    if not same_content(expected, current):
        raise MemoryConflictError(f"memory {name!r} changed since it was read; nothing written")

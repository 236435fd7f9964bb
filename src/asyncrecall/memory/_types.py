"""Values of the memory package: a memory document and the result of a recall."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeAlias

__all__ = [
    "EMPTY_RECALL",
    "MEMORY_TYPES",
    "MemoryDoc",
    "MemoryType",
    "RecallResult",
]

MemoryType: TypeAlias = Literal["user", "feedback", "project", "reference"]

#: The valid ``type`` values of a topic file, in the order help texts list them.
MEMORY_TYPES: Final[tuple[MemoryType, ...]] = ("user", "feedback", "project", "reference")


@dataclass(frozen=True, slots=True)
class MemoryDoc:
    """One topic file of the memory folder, parsed.

    ``path`` is absolute; ``rel_path`` is the POSIX path relative to the memory folder
    and is what selectors, manifests and ``excluded_paths`` speak. ``mtime`` and
    ``size`` are the file's at the time it was read. ``revision`` tells apart two
    contents with the same path, size and ``mtime``: 0 for a file, the row version for
    a database row (a rewrite by another process may keep size and ``mtime``).
    ``origin`` lists where its writes came from (``user`` for a memory without
    provenance: see :mod:`asyncrecall.memory._provenance`); ``quarantined``: it is held
    by an untrusted write (model text after tool output, an untrusted import, an MCP
    client's save) that the user has not confirmed since, so recall leaves it out
    (unless quarantine is turned off).
    """

    path: Path
    rel_path: str
    name: str
    description: str
    type: MemoryType
    body: str
    mtime: float
    size: int
    revision: int = 0
    origin: str = "user"
    quarantined: bool = False

    def __hash__(self) -> int:
        # Equal documents have equal paths and fingerprints; hashing those alone (the
        # path's hash is cached) spares hashing every field each time a memory keys a
        # cache (the manifest's lines: every side query, every memory).
        return hash((self.path, self.size, self.mtime, self.revision))

    @property
    def fingerprint(self) -> tuple[int, float, int]:
        """What a cache of anything computed from this memory (term counts, vectors)
        is keyed by, beside its path: it changes whenever the content does."""
        return (self.size, self.mtime, self.revision)

    @property
    def title(self) -> str:
        """The heading shown for this memory: its ``name``."""
        return self.name


@dataclass(frozen=True, slots=True)
class RecallResult:
    """What one recall produced.

    ``prompt`` is the memory block ("" when nothing was selected); ``strategy`` names
    the selector that produced ``selected`` (``none``, ``lexical``, ``model`` ...);
    ``fallback_reason`` is set when the configured selector failed and another one
    (or none) answered instead; ``manifest_left_out`` counts the candidates the
    selector's bounded manifest did not list (the model selector's: 200 files, 25 KB).
    ``reason`` says why nothing was selected, when it is known: ``too_short`` (nothing
    to recall in the query), ``no_candidates`` (no memory offered), ``no_terms`` (only
    stop words), ``no_match`` (no memory shares a term), ``names_unknown`` (it names
    something no memory mentions), ``below_threshold`` (too little of it is covered, or
    nothing close enough), ``selector_failed``, ``chose_none`` (the model selector).
    """

    prompt: str
    selected: tuple[MemoryDoc, ...]
    strategy: str
    fallback_reason: str | None = None
    manifest_left_out: int = 0
    reason: str | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """The relative paths of the selected files, in order."""
        return tuple(doc.rel_path for doc in self.selected)


#: The result of a recall that selected nothing and asked nobody.
EMPTY_RECALL: Final[RecallResult] = RecallResult("", (), "none")

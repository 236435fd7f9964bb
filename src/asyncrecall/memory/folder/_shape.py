"""What the folder wing's helpers use of :class:`~asyncrecall.memory.MemoryStore`.

The store imports its helpers (extraction's backend and gate, export and import) to hand
them out; they see it through :class:`FolderShape`, so none imports the store back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from asyncrecall.memory._history import FolderHistory
from asyncrecall.memory._precondition import Expected
from asyncrecall.memory._provenance import Source
from asyncrecall.memory._store_protocol import MemoryStoreProtocol
from asyncrecall.memory._types import MemoryDoc, MemoryType

__all__ = ["FolderShape"]


class FolderShape(MemoryStoreProtocol, Protocol):
    """A memory folder as its helpers use it (``MemoryStore`` satisfies it)."""

    root: Path
    history: FolderHistory

    @property
    def index_path(self) -> Path: ...

    def find(self, name: str) -> MemoryDoc | None: ...

    def save_memory(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        extra: Mapping[str, Any] | None = ...,
        expected: Expected = ...,
        origin: str = ...,
        write_id: str = ...,
        sources: Sequence[Source] | None = ...,
    ) -> MemoryDoc: ...

    def provenance_of(self, doc: MemoryDoc) -> tuple[Source, ...]: ...

    def forget(
        self,
        name_or_rel_path: str,
        *,
        expected: Expected = ...,
        origin: str = ...,
        write_id: str = ...,
    ) -> MemoryDoc: ...

    def locked(self) -> AbstractContextManager[None]: ...

    def repair_index(self) -> bool: ...

    def _read_index_bytes(self) -> bytes | None: ...

"""What the folder wing's helpers use of :class:`~asyncrecall.memory.FolderStore`.

The store imports its helpers (extraction's backend and gate, export and import) to hand
them out; they see it through :class:`FolderShape`, so none imports the store back.
"""

from __future__ import annotations

from abc import abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from asyncrecall.memory._history import FolderHistory
from asyncrecall.memory._store import Store

if TYPE_CHECKING:
    from asyncrecall.memory.folder._batch import SaveBatch

__all__ = ["FolderShape"]


class FolderShape(Store):
    """A memory folder as its helpers use it: a :class:`Store` with a root, a history
    file and a lock (``FolderStore`` is the one implementation)."""

    root: Path
    history: FolderHistory

    @property
    @abstractmethod
    def index_path(self) -> Path: ...

    @abstractmethod
    def locked(self) -> AbstractContextManager[None]: ...

    @abstractmethod
    def repair_index(self) -> bool: ...

    @abstractmethod
    def save_batch(self) -> AbstractContextManager[SaveBatch]: ...

    @abstractmethod
    def _read_index_bytes(self) -> bytes | None: ...

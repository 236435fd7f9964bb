"""What the PostgreSQL wing's helpers use of :class:`~asyncrecall.memory.PostgresStore`.

The store imports its helpers (extraction's backend and gate, export and import) to hand
them out; they see it through :class:`PostgresShape`, so none imports the store back.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from psycopg import Connection

from asyncrecall.memory._precondition import ANYTHING, Expected
from asyncrecall.memory._provenance import Source
from asyncrecall.memory._store import LIBRARY_ORIGIN, Store
from asyncrecall.memory._types import MemoryDoc, MemoryType

__all__ = ["PostgresShape"]

_T = TypeVar("_T")


class PostgresShape(Store):
    """A PostgreSQL store as its helpers use it: a :class:`Store` with a URL, a
    namespace, transactions and revision-conditional writes (``PostgresStore`` is the
    one implementation)."""

    url: str

    @property
    @abstractmethod
    def namespace(self) -> str: ...

    @abstractmethod
    def connect(self) -> None: ...

    @abstractmethod
    def transact(self, work: Callable[[Connection[Any]], _T]) -> _T: ...

    @abstractmethod
    def save_memory(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        expected: Expected = ANYTHING,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
        sources: Sequence[Source] | None = None,
        extra: Mapping[str, Any] | None = None,
        updated_at: float | None = None,
        created_at: float | None = None,
    ) -> MemoryDoc: ...

    @abstractmethod
    def save_if(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        expected_revision: int | None,
        updated_at: float | None = None,
        extra: Mapping[str, Any] | None = None,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
        sources: Sequence[Source] | None = None,
    ) -> MemoryDoc | None: ...

    @abstractmethod
    def forget_if(
        self,
        name: str,
        *,
        expected_revision: int,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
    ) -> MemoryDoc | None: ...

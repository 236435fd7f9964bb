"""What the PostgreSQL wing's helpers use of :class:`~asyncrecall.memory.PostgresMemoryStore`.

The store imports its helpers (extraction's backend and gate, export and import) to hand
them out; they see it through :class:`PostgresShape`, so none imports the store back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from psycopg import Connection

from asyncrecall.memory._provenance import Source
from asyncrecall.memory._store_protocol import MemoryStoreProtocol
from asyncrecall.memory._types import MemoryDoc, MemoryType

__all__ = ["PostgresShape"]

_T = TypeVar("_T")


class PostgresShape(MemoryStoreProtocol, Protocol):
    """A PostgreSQL store as its helpers use it (``PostgresMemoryStore`` satisfies it)."""

    @property
    def url(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    def connect(self) -> None: ...

    def transact(self, work: Callable[[Connection[Any]], _T]) -> _T: ...

    def find(self, name: str) -> MemoryDoc | None: ...

    def save_memory(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        updated_at: float | None = ...,
        created_at: float | None = ...,
        extra: Mapping[str, Any] | None = ...,
        origin: str = ...,
        write_id: str = ...,
        sources: Sequence[Source] | None = ...,
    ) -> MemoryDoc: ...

    def save_if(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        expected_revision: int | None,
        extra: Mapping[str, Any] | None = ...,
        origin: str = ...,
        write_id: str = ...,
        sources: Sequence[Source] | None = ...,
    ) -> MemoryDoc | None: ...

    def provenance_of(self, doc: MemoryDoc) -> tuple[Source, ...]: ...

    def forget(
        self, name_or_rel_path: str, *, origin: str = ..., write_id: str = ...
    ) -> MemoryDoc: ...

    def forget_if(
        self, name: str, *, expected_revision: int, origin: str = ..., write_id: str = ...
    ) -> MemoryDoc | None: ...

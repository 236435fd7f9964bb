"""What recall, the agent and the CLI need from a memory store, and which URLs name a database.

Two stores satisfy :class:`MemoryStoreProtocol`:

- :class:`~asyncrecall.memory.MemoryStore`, the memory folder (one person, one machine);
- :class:`~asyncrecall.memory.PostgresMemoryStore`, a table in PostgreSQL shared by
  any number of worker processes (``--store postgresql://...``).

Reading and writing are synchronous (the CLI and the agent's memory tool call them);
:meth:`MemoryStoreProtocol.candidates` is the one coroutine: what recall offers a
selector for a query. The folder scans its newest files in a worker thread; the
database runs a full-text search on its own connection pool. Either way the work runs
inside the recall task, which the turn never awaits. ``inline_scan`` says whether
:meth:`~MemoryStoreProtocol.scan` is cheap enough to run on the event loop (a warm
folder scan is; a database round trip is not).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol, runtime_checkable

from asyncrecall.memory._types import MemoryDoc, MemoryType

__all__ = ["POSTGRES_SCHEMES", "MemoryStoreProtocol", "is_postgres_url"]

#: The URL schemes of ``--store`` that name a PostgreSQL database.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


@runtime_checkable
class MemoryStoreProtocol(Protocol):
    """A place memories live: listed, read, saved, forgotten, and offered to recall."""

    #: Whether :meth:`scan` may run on the event loop (no network round trip). Such a
    #: store offers its scan as the candidates: recall takes :meth:`scan_cached`'s
    #: answer in its own step when there is one, and calls :meth:`candidates` otherwise.
    inline_scan: bool

    @property
    def location(self) -> str:
        """Where the memories are, for messages: a folder, or a database and namespace."""
        ...

    def scan(self, *, limit: int | None = ...) -> list[MemoryDoc]:
        """The memories, newest first, at most ``limit`` (``None``: all)."""
        ...

    def scan_cached(
        self, *, limit: int | None = ..., budget_bytes: int = ...
    ) -> list[MemoryDoc] | None:
        """:meth:`scan`'s answer if it needs no reading beyond ``budget_bytes`` (0: none at
        all), else ``None``."""
        ...

    def warm_scan(self) -> list[MemoryDoc]:
        """:meth:`scan` for warm-up paths (a folder starts from its persisted parses and
        writes them back)."""
        ...

    def get(self, name_or_rel_path: str) -> MemoryDoc:
        """The memory with this relative path or name, or :class:`MemoryStoreError`."""
        ...

    def save_memory(
        self, name: str, description: str, type: MemoryType | str, content: str
    ) -> MemoryDoc:
        """Create or update the memory called ``name``; returns it as stored."""
        ...

    def forget(self, name_or_rel_path: str) -> MemoryDoc:
        """Remove a memory; returns what was removed."""
        ...

    def index_for_prompt(self) -> str:
        """The index (``MEMORY.md`` or its equivalent) for the system prompt, cut to size."""
        ...

    async def candidates(self, query: str, *, exclude: Collection[str] = ()) -> list[MemoryDoc]:
        """The memories recall offers a selector for ``query`` (``exclude``: paths to leave out
        if the store can; recall filters them again). Never raises for an unreachable store:
        it logs a warning and returns no candidates."""
        ...


def is_postgres_url(store: str) -> bool:
    """Whether a ``--store`` value names a PostgreSQL database."""
    return store.startswith(POSTGRES_SCHEMES)

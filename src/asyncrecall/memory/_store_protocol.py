"""What recall, the agent and the CLI need from a memory store, and how one is chosen.

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

from asyncrecall._exceptions import ConfigError
from asyncrecall._settings import Settings
from asyncrecall.memory._types import MemoryDoc, MemoryType

__all__ = ["POSTGRES_SCHEMES", "MemoryStoreProtocol", "is_postgres_url", "open_memory_store"]

#: The URL schemes of ``--store`` that name a PostgreSQL database.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


@runtime_checkable
class MemoryStoreProtocol(Protocol):
    """A place memories live: listed, read, saved, forgotten, and offered to recall."""

    #: Whether :meth:`scan` may run on the event loop (no network round trip).
    inline_scan: bool

    @property
    def location(self) -> str:
        """Where the memories are, for messages: a folder, or a database and namespace."""
        ...

    def scan(self, *, limit: int | None = ...) -> list[MemoryDoc]:
        """The memories, newest first, at most ``limit`` (``None``: all)."""
        ...

    def scan_cached(self, *, limit: int | None = ...) -> list[MemoryDoc] | None:
        """:meth:`scan`'s answer if it needs no reading at all, else ``None`` (never reads)."""
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


def open_memory_store(settings: Settings) -> MemoryStoreProtocol:
    """The store ``settings`` name: the database of ``store`` (``--store`` /
    ``ASYNCRECALL_STORE``), else the project's memory folder.

    A database that cannot be reached or whose schema is newer than this code is a
    :class:`ConfigError` (one line; the CLI exits 2).
    """
    from asyncrecall.memory._location import resolve_memory_dir

    url = settings.store
    if not url:
        from asyncrecall.memory._store import MemoryStore

        return MemoryStore(resolve_memory_dir(settings))
    if not is_postgres_url(url):
        raise ConfigError(
            f"--store must be a postgresql:// URL, got {url.split('://')[0]!r}; "
            "for a folder use --memory-dir"
        )
    from asyncrecall.memory._postgres import PostgresMemoryStore, default_namespace

    namespace = settings.namespace or default_namespace(settings.project)
    return PostgresMemoryStore.open(url, namespace=namespace)

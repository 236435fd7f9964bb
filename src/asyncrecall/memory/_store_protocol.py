"""Which ``--store`` URLs name a database, and the deprecated name of the store interface.

The interface itself is :class:`~asyncrecall.memory.Store` (``_store``);
``MemoryStoreProtocol`` is its old name, kept for one release: using it warns.
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["POSTGRES_SCHEMES", "is_postgres_url"]

#: The URL schemes of ``--store`` that name a PostgreSQL database.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(store: str) -> bool:
    """Whether a ``--store`` value names a PostgreSQL database."""
    return store.startswith(POSTGRES_SCHEMES)


def __getattr__(name: str) -> Any:
    """``MemoryStoreProtocol``: the old name of :class:`~asyncrecall.memory.Store`."""
    if name == "MemoryStoreProtocol":
        warnings.warn(
            "MemoryStoreProtocol is deprecated: use asyncrecall.memory.Store",
            DeprecationWarning,
            stacklevel=2,
        )
        from asyncrecall.memory._store import Store

        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

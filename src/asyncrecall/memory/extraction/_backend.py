"""Where extraction and consolidation keep their state, for any memory store.

Extraction and consolidation speak to a store through :class:`ExtractionBackend` (declared
with the store interface, :mod:`asyncrecall.memory._store`): the
store's memories (``save`` with provenance, ``forget``), the provenance of a memory
(``source_offsets``), and the per-session state (the cursor and the write journal, see
:mod:`asyncrecall.memory.extraction._state`). Two backends:

- ``FolderBackend`` (``folder/_extraction``), for :class:`~asyncrecall.memory.FolderStore`:
  provenance in each topic file's front matter, state in ``<memory folder>.state/``;
- ``PostgresBackend`` (``postgres/_extraction``), for
  :class:`~asyncrecall.memory.PostgresStore`: provenance and state in tables of
  the same database, per namespace.

Each store hands out its own (:meth:`Store.extraction_backend`,
:meth:`Store.consolidation_gate`), so nothing here imports a store;
:func:`extraction_backend` and :func:`consolidation_gate` ask it. The protocol the extractor runs
is the same on both: journal, then the memory writes (idempotent), then :meth:`commit`
(the cursor moves and the journal is dropped), so nothing is processed twice and
nothing is skipped, whatever the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from asyncrecall.memory._store import ExtractionBackend, Gate, Store

__all__ = [
    "LOCK_STALE_S",
    "MIN_HOURS",
    "MIN_SESSIONS",
    "ExtractionBackend",
    "Gate",
    "consolidation_gate",
    "extraction_backend",
]


def extraction_backend(store: Store, *, state_dir: Path | None = None) -> ExtractionBackend:
    """The backend of ``store``, which the store's own wing implements (its
    ``extraction_backend()``: a folder's, a PostgreSQL store's).

    ``state_dir`` (folder only) replaces ``<memory folder>.state``.
    """
    return store.extraction_backend(state_dir=state_dir)


# -- automatic consolidation: when it is due, one at a time ----------------------------------

#: An automatic consolidation runs once this many hours and sessions have passed.
MIN_HOURS: Final = 24.0
MIN_SESSIONS: Final = 5
#: A database's consolidation lock this old (seconds) was left by a crashed run.
LOCK_STALE_S: Final = 3600.0


def consolidation_gate(store: Store, **kwargs: Any) -> Gate:
    """The gate of ``store``, which its wing implements (its ``consolidation_gate()``:
    files beside a folder, a row in a database; ``kwargs``: ``min_hours``,
    ``min_sessions``, ``clock``)."""
    return store.consolidation_gate(**kwargs)

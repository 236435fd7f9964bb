"""The memory folder, scanning, selectors and recall. Knows nothing of the agent.

Every store implements :class:`Store`, the one store interface. A project's memory is a
folder of Markdown topic files plus an index, ``MEMORY.md`` (:class:`FolderStore`);
:class:`PostgresStore` keeps them in PostgreSQL for fleets of workers (the ``postgres``
extra).
:class:`Recaller` recalls the memories relevant to a query with a
:class:`Selector` (:class:`ModelSelector`: one side query to a fast model;
:class:`LexicalSelector`: BM25, local; :class:`EmbeddingSelector` and
:class:`HybridSelector`: an embedded model, the ``local`` extra;
:class:`SemanticInstantSelector`: the instant pass with that model's cached vectors) and
formats them as the memory block the agent puts in front of the main model.
:class:`MemoryExtractor` and :func:`consolidate` write memories from a conversation
(``docs/extraction.md``).
"""

from __future__ import annotations

import warnings

# A name imported ``as`` itself is not public: the package's other layers (the agent,
# the prefetcher, the MCP server, the command line) and its tests take it from here,
# but it is out of ``__all__`` and may change without notice.
from asyncrecall.memory._attribution import Fingerprint as Fingerprint
from asyncrecall.memory._attribution import ForeignText as ForeignText
from asyncrecall.memory._budget import SESSION_BYTES as SESSION_BYTES
from asyncrecall.memory._budget import nothing_to_recall as nothing_to_recall
from asyncrecall.memory._document import safe_file_stem as safe_file_stem
from asyncrecall.memory._limits import INDEX_MAX_BYTES as INDEX_MAX_BYTES
from asyncrecall.memory._limits import INDEX_MAX_LINES as INDEX_MAX_LINES
from asyncrecall.memory._limits import MAX_FILE_BYTES as MAX_FILE_BYTES
from asyncrecall.memory._limits import SCAN_LIMIT as SCAN_LIMIT
from asyncrecall.memory._location import canonical_project_root as canonical_project_root
from asyncrecall.memory._location import resolve_memory_dir as resolve_memory_dir
from asyncrecall.memory._prompt import BODY_LIMIT as BODY_LIMIT
from asyncrecall.memory._prompt import format_manifest as format_manifest
from asyncrecall.memory._prompt import format_memory_block as format_memory_block
from asyncrecall.memory._prompt import neutralise_tags as neutralise_tags
from asyncrecall.memory._provenance import Source
from asyncrecall.memory._recall import DEFAULT_LIMIT as DEFAULT_LIMIT
from asyncrecall.memory._recall import Recaller
from asyncrecall.memory._selector import InstantSelector, Selector
from asyncrecall.memory._store import (
    LIBRARY_ORIGIN,
    ChangeWatch,
    ExtractionBackend,
    Gate,
    Store,
    StoreChange,
)
from asyncrecall.memory._store_protocol import is_postgres_url as is_postgres_url
from asyncrecall.memory._types import EMPTY_RECALL as EMPTY_RECALL
from asyncrecall.memory._types import MEMORY_TYPES as MEMORY_TYPES
from asyncrecall.memory._types import MemoryDoc, MemoryType, RecallResult
from asyncrecall.memory._vetting import Verdict as Verdict
from asyncrecall.memory._vetting import held_reason as held_reason
from asyncrecall.memory._vetting import vet as vet
from asyncrecall.memory.extraction._consolidate import ConsolidationResult, consolidate
from asyncrecall.memory.extraction._extract import (
    ExtractionResult,
    MemoryExtractor,
    TranscriptTurn,
)
from asyncrecall.memory.folder._extraction import ConsolidationGate as ConsolidationGate
from asyncrecall.memory.folder._extraction import read_source_offsets as read_source_offsets
from asyncrecall.memory.folder._store import FolderStore
from asyncrecall.memory.selectors._embedding import EmbeddingSelector, HybridSelector
from asyncrecall.memory.selectors._embedding import embedding_available as embedding_available
from asyncrecall.memory.selectors._instant import SemanticInstantSelector
from asyncrecall.memory.selectors._instant import (
    semantic_pass_available as semantic_pass_available,
)
from asyncrecall.memory.selectors._lexical import LexicalSelector
from asyncrecall.memory.selectors._model import ModelSelector

__all__ = [
    "LIBRARY_ORIGIN",
    "ChangeWatch",
    "ConsolidationResult",
    "EmbeddingSelector",
    "ExtractionBackend",
    "ExtractionResult",
    "FolderStore",
    "Gate",
    "HybridSelector",
    "InstantSelector",
    "LexicalSelector",
    "MemoryDoc",
    "MemoryExtractor",
    "MemoryType",
    "ModelSelector",
    "PostgresStore",
    "RecallResult",
    "Recaller",
    "Selector",
    "SemanticInstantSelector",
    "Source",
    "Store",
    "StoreChange",
    "TranscriptTurn",
    "consolidate",
]

#: Old names kept for one release: each access warns (``DeprecationWarning``).
_DEPRECATED = {
    "MemoryManager": "Recaller",
    "MemoryStore": "FolderStore",
    "MemoryStoreProtocol": "Store",
    "PostgresMemoryStore": "PostgresStore",
}


def __getattr__(name: str) -> object:
    """``PostgresStore`` is imported on first use: psycopg is an optional extra."""
    if name == "PostgresStore":
        try:
            from asyncrecall.memory.postgres._store import PostgresStore
        except ModuleNotFoundError as exc:  # pragma: no cover - the extra is installed in CI
            raise ImportError(
                "PostgresStore needs psycopg: pip install 'asyncrecall[postgres]'"
            ) from exc
        return PostgresStore
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        warnings.warn(
            f"asyncrecall.memory.{name} is deprecated and goes in the next release: "
            f"use asyncrecall.memory.{new} (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[new] if new in globals() else __getattr__(new)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

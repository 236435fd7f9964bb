"""The memory folder, scanning, selectors and recall. Knows nothing of the agent.

Every store implements :class:`Store`, the one store interface. A project's memory is a
folder of Markdown topic files plus an index, ``MEMORY.md`` (:class:`FolderStore`);
:class:`PostgresStore` keeps them in PostgreSQL for fleets of workers (the ``postgres``
extra).
:class:`MemoryManager` recalls the memories relevant to a query with a
:class:`Selector` (:class:`ModelSelector`: one side query to a fast model;
:class:`LexicalSelector`: BM25, local) and formats them as the memory block the agent
puts in front of the main model (:func:`format_memory_block`).
"""

from __future__ import annotations

from asyncrecall.memory._attribution import Fingerprint, ForeignText
from asyncrecall.memory._budget import (
    FILE_CHARS,
    FILE_LINES,
    MANIFEST_BYTES,
    MANIFEST_FILES,
    SESSION_BYTES,
    nothing_to_recall,
)
from asyncrecall.memory._document import safe_file_stem
from asyncrecall.memory._limits import (
    INDEX_MAX_BYTES,
    INDEX_MAX_LINES,
    INDEX_NAME,
    MAX_FILE_BYTES,
    SCAN_LIMIT,
)
from asyncrecall.memory._location import canonical_project_root, resolve_memory_dir
from asyncrecall.memory._prompt import (
    BODY_LIMIT,
    format_manifest,
    format_memory_block,
    neutralise_tags,
)
from asyncrecall.memory._provenance import ORIGINS, Source, is_quarantined
from asyncrecall.memory._recall import DEFAULT_LIMIT, MemoryManager
from asyncrecall.memory._selector import InstantSelector, Selector, validate_selection
from asyncrecall.memory._store import (
    LIBRARY_ORIGIN,
    ChangeWatch,
    ExtractionBackend,
    Gate,
    Store,
    StoreChange,
)
from asyncrecall.memory._store_protocol import is_postgres_url
from asyncrecall.memory._types import (
    EMPTY_RECALL,
    MEMORY_TYPES,
    MemoryDoc,
    MemoryType,
    RecallResult,
)
from asyncrecall.memory._vetting import Verdict, held_reason, vet
from asyncrecall.memory.extraction._consolidate import ConsolidationResult, consolidate
from asyncrecall.memory.extraction._extract import (  # issue 14
    ExtractionResult,
    MemoryExtractor,
    MemoryProposal,
    Refusal,
    TranscriptTurn,
)
from asyncrecall.memory.folder._extraction import ConsolidationGate, read_source_offsets
from asyncrecall.memory.folder._store import FolderStore
from asyncrecall.memory.selectors._embedding import (
    EmbeddingSelector,
    HybridSelector,
    embedding_available,
)
from asyncrecall.memory.selectors._lexical import LexicalSelector
from asyncrecall.memory.selectors._model import ModelSelector

__all__ = [
    "BODY_LIMIT",
    "DEFAULT_LIMIT",
    "EMPTY_RECALL",
    "FILE_CHARS",
    "FILE_LINES",
    "INDEX_MAX_BYTES",
    "INDEX_MAX_LINES",
    "INDEX_NAME",
    "LIBRARY_ORIGIN",
    "MANIFEST_BYTES",
    "MANIFEST_FILES",
    "MAX_FILE_BYTES",
    "MEMORY_TYPES",
    "ORIGINS",
    "SCAN_LIMIT",
    "SESSION_BYTES",
    "ChangeWatch",
    "ConsolidationGate",
    "ConsolidationResult",
    "EmbeddingSelector",
    "ExtractionBackend",
    "ExtractionResult",
    "Fingerprint",
    "FolderStore",
    "ForeignText",
    "Gate",
    "HybridSelector",
    "InstantSelector",
    "LexicalSelector",
    "MemoryDoc",
    "MemoryExtractor",
    "MemoryManager",
    "MemoryProposal",
    "MemoryType",
    "ModelSelector",
    "PostgresStore",
    "RecallResult",
    "Refusal",
    "Selector",
    "Source",
    "Store",
    "StoreChange",
    "TranscriptTurn",
    "Verdict",
    "canonical_project_root",
    "consolidate",
    "embedding_available",
    "format_manifest",
    "format_memory_block",
    "held_reason",
    "is_postgres_url",
    "is_quarantined",
    "neutralise_tags",
    "nothing_to_recall",
    "read_source_offsets",
    "resolve_memory_dir",
    "safe_file_stem",
    "validate_selection",
    "vet",
]


#: The old names, kept for one release: using one warns (``DeprecationWarning``).
_DEPRECATED = {
    "MemoryStore": "FolderStore",
    "MemoryStoreProtocol": "Store",
    "PostgresMemoryStore": "PostgresStore",
}


def __getattr__(name: str) -> object:
    """``PostgresStore`` is imported on first use: psycopg is an optional extra. The
    deprecated names warn and give the new ones."""
    if name in _DEPRECATED:
        import warnings

        new = _DEPRECATED[name]
        warnings.warn(
            f"{name} is deprecated: use asyncrecall.memory.{new}", DeprecationWarning, stacklevel=2
        )
        return globals()[new] if new in globals() else __getattr__(new)
    if name == "PostgresStore":
        try:
            from asyncrecall.memory.postgres._store import PostgresStore
        except ModuleNotFoundError as exc:  # pragma: no cover - the extra is installed in CI
            raise ImportError(
                "PostgresStore needs psycopg: pip install 'asyncrecall[postgres]'"
            ) from exc
        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

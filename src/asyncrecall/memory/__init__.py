"""The memory folder, scanning, selectors and recall. Knows nothing of the agent.

A project's memory is a folder of Markdown topic files plus an index, ``MEMORY.md``
(:class:`MemoryStore`); :class:`PostgresMemoryStore` keeps them in PostgreSQL for
fleets of workers (the ``postgres`` extra), behind the same :class:`MemoryStoreProtocol`.
:class:`Recaller` recalls the memories relevant to a query with a
:class:`Selector` (:class:`ModelSelector`: one side query to a fast model;
:class:`LexicalSelector`: BM25, local) and formats them as the memory block the agent
puts in front of the main model (:func:`format_memory_block`).
"""

from __future__ import annotations

import warnings

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
from asyncrecall.memory._recall import DEFAULT_LIMIT, Recaller
from asyncrecall.memory._selector import InstantSelector, Selector, validate_selection
from asyncrecall.memory._store_protocol import MemoryStoreProtocol, is_postgres_url
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
from asyncrecall.memory.folder._store import MemoryStore
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
    "MANIFEST_BYTES",
    "MANIFEST_FILES",
    "MAX_FILE_BYTES",
    "MEMORY_TYPES",
    "ORIGINS",
    "SCAN_LIMIT",
    "SESSION_BYTES",
    "ConsolidationGate",
    "ConsolidationResult",
    "EmbeddingSelector",
    "ExtractionResult",
    "Fingerprint",
    "ForeignText",
    "HybridSelector",
    "InstantSelector",
    "LexicalSelector",
    "MemoryDoc",
    "MemoryExtractor",
    "MemoryProposal",
    "MemoryStore",
    "MemoryStoreProtocol",
    "MemoryType",
    "ModelSelector",
    "PostgresMemoryStore",
    "RecallResult",
    "Recaller",
    "Refusal",
    "Selector",
    "Source",
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

#: Old names kept for one release: each access warns (``DeprecationWarning``).
_DEPRECATED = {"MemoryManager": "Recaller"}


def __getattr__(name: str) -> object:
    """``PostgresMemoryStore`` is imported on first use: psycopg is an optional extra."""
    if name == "PostgresMemoryStore":
        try:
            from asyncrecall.memory.postgres._store import PostgresMemoryStore
        except ModuleNotFoundError as exc:  # pragma: no cover - the extra is installed in CI
            raise ImportError(
                "PostgresMemoryStore needs psycopg: pip install 'asyncrecall[postgres]'"
            ) from exc
        return PostgresMemoryStore
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        warnings.warn(
            f"asyncrecall.memory.{name} is deprecated and goes in the next release: "
            f"use asyncrecall.memory.{new} (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

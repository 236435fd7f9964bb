"""The ONNX messages the query pass writes by hand are ones onnxruntime reads: a small
model of every kind of field they use (symbolic and fixed sizes, uint8, int64 and float
tensors, a scalar, negative and float attributes, an operator of another domain) runs
and gives numpy's answer."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")

import numpy as np
import onnxruntime

from asyncrecall.memory.selectors import _onnx_proto as proto


def test_varints_are_protobufs() -> None:
    assert proto._varint(0) == b"\x00"
    assert proto._varint(300) == b"\xac\x02"
    assert proto._varint(-1) == b"\xff" * 9 + b"\x01"  # an int64's two's complement


def test_a_model_of_every_field_runs_in_onnxruntime() -> None:
    rng = np.random.default_rng(3)
    weights = rng.integers(0, 256, size=(6, 4), dtype=np.uint8)
    gain, shift = rng.standard_normal(8).astype(np.float32), np.zeros(8, np.float32)
    nodes = [
        proto.node("MatMulInteger", ["x", "w", "x_zero", "w_zero"], ["product"]),
        proto.node("Cast", ["product"], ["real"], to=proto.FLOAT),
        proto.node("Concat", ["real", "real"], ["wide"], axis=-1),
        proto.node("LayerNormalization", ["wide", "gain", "shift"], ["normal"], axis=-1,
                   epsilon=1e-3),
        proto.node("ReduceSum", ["normal", "axes"], ["summed"], keepdims=1),
        proto.node("FusedMatMul", ["summed", "square"], ["out"], domain="com.microsoft",
                   alpha=2.0),
    ]  # fmt: skip
    initializers = [
        proto.tensor("w", weights),
        proto.tensor("x_zero", np.uint8(3)),
        proto.tensor("w_zero", np.full(4, 128, np.uint8)),
        proto.tensor("gain", gain),
        proto.tensor("shift", shift),
        proto.tensor("axes", np.array([0], np.int64)),
        proto.tensor("square", np.eye(8, dtype=np.float32)),
    ]
    model = proto.model(
        nodes,
        initializers,
        [proto.value_info("x", proto.UINT8, ["rows", 6])],
        [proto.value_info("out", proto.FLOAT, [1, 8])],
        name="every_field",
        opsets={"": 17, "com.microsoft": 1},
        ir_version=8,
    )
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = rng.integers(0, 256, size=(5, 6), dtype=np.uint8)
    (out,) = session.run(None, {"x": x})

    real = (x.astype(np.int64) - 3) @ (weights.astype(np.int64) - 128)
    wide = np.concatenate([real, real], axis=-1).astype(np.float64)
    centred = wide - wide.mean(axis=-1, keepdims=True)
    normal = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-3) * gain + shift
    expected = 2.0 * normal.sum(axis=0, keepdims=True)
    assert out.shape == (1, 8)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_a_tensor_of_a_type_it_does_not_write_is_refused() -> None:
    with pytest.raises(TypeError, match="float64"):
        proto.tensor("t", np.zeros(2))
    with pytest.raises(TypeError, match="an int or a float"):
        proto.node("Cast", ["a"], ["b"], to=True)

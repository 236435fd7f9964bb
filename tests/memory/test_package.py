"""The package's surface and layering (building a manager from settings is tested in
tests/test_memory_config.py: it lives above this package)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import asyncrecall.memory as memory
from asyncrecall.memory import LexicalSelector


def test_all_is_sorted_and_resolves() -> None:
    """``__all__`` is sorted (constants, classes, functions: ruff's RUF022 order) and every
    name resolves; tests/test_public_api.py pins the names and what else is importable."""

    def order(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert memory.__all__ == sorted(memory.__all__, key=order)
    for name in memory.__all__:
        assert hasattr(memory, name)


def test_memory_never_imports_the_agent_or_the_cli() -> None:
    """Layering: ``asyncrecall.memory`` knows nothing of ``agent`` or ``cli``."""
    code = (
        "import sys, asyncrecall.memory, asyncrecall.memory.selectors._lexical;"
        "asyncrecall.memory.selectors._lexical.tokenize('warm up');"
        "bad = sorted(m for m in sys.modules"
        " if m.startswith(('asyncrecall.agent', 'asyncrecall.cli')));"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_only_the_lexical_selector_runs_inline_on_the_event_loop() -> None:
    """The embedding selectors load a model on first use: they must not claim to be
    instant, or their first recall would block the event loop before the first request."""
    from asyncrecall.memory import EmbeddingSelector, HybridSelector, InstantSelector

    assert isinstance(LexicalSelector(), InstantSelector)
    assert not isinstance(HybridSelector(), InstantSelector)
    assert not isinstance(EmbeddingSelector(), InstantSelector)


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("asyncrecall.memory", "MemoryStore", "FolderStore"),
        ("asyncrecall.memory", "PostgresMemoryStore", "PostgresStore"),
        ("asyncrecall.memory", "MemoryStoreProtocol", "Store"),
        ("asyncrecall", "MemoryStore", "FolderStore"),
        ("asyncrecall.memory.folder._store", "MemoryStore", "FolderStore"),
        ("asyncrecall.memory.postgres._store", "PostgresMemoryStore", "PostgresStore"),
        ("asyncrecall.memory._store_protocol", "MemoryStoreProtocol", "Store"),
    ],
)
def test_the_old_store_names_warn_and_give_the_new_ones(module: str, old: str, new: str) -> None:
    """The stores' old names are kept for one release: each use warns
    (``DeprecationWarning``, an error in this suite) and gives the new class."""
    import importlib

    import asyncrecall.memory

    package = importlib.import_module(module)
    for _ in range(2):  # every use warns, not only the first
        with pytest.warns(DeprecationWarning, match=f"{old} is deprecated.*use .*{new}"):
            value = getattr(package, old)
        assert value is getattr(asyncrecall.memory, new)
    assert old not in getattr(package, "__all__", ())

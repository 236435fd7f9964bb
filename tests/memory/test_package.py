"""The package's surface and layering, and building the manager from settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import asyncrecall.memory as memory
from asyncrecall import ConfigError, Settings
from asyncrecall.memory import LexicalSelector, ModelSelector, build_memory_manager
from asyncrecall.testing import ScriptedModel


def test_all_is_sorted_and_complete() -> None:
    """``__all__`` is sorted (constants, classes, functions: ruff's RUF022 order) and complete."""

    def order(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert memory.__all__ == sorted(memory.__all__, key=order)
    public = {
        name
        for name, value in vars(memory).items()
        if not name.startswith("_")
        and getattr(value, "__module__", "").startswith("asyncrecall.memory")
    }
    assert public <= set(memory.__all__)
    for name in memory.__all__:
        assert hasattr(memory, name)


def test_memory_never_imports_the_agent_or_the_cli() -> None:
    """Layering: ``asyncrecall.memory`` knows nothing of ``agent`` or ``cli``."""
    code = (
        "import sys, asyncrecall.memory, asyncrecall.memory._lexical;"
        "asyncrecall.memory._lexical.tokenize('warm up');"
        "bad = sorted(m for m in sys.modules"
        " if m.startswith(('asyncrecall.agent', 'asyncrecall.cli')));"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _settings(tmp_path: Path, **kw: object) -> Settings:
    return Settings(home=tmp_path, project=tmp_path, memory_dir=tmp_path / "m", **kw)  # type: ignore[arg-type]


def test_without_an_endpoint_the_best_embedded_selector(tmp_path: Path) -> None:
    """No endpoint: hybrid when the embedded models are installed, else lexical."""
    from asyncrecall.memory import HybridSelector, embedding_available

    manager = build_memory_manager(_settings(tmp_path), side_model=None)
    expected = HybridSelector if embedding_available() else LexicalSelector
    assert isinstance(manager.selector, expected)
    assert manager.store.root == tmp_path / "m"
    lexical = build_memory_manager(_settings(tmp_path, selector="lexical"), side_model=None)
    assert isinstance(lexical.selector, LexicalSelector)


def test_model_with_a_side_model(tmp_path: Path) -> None:
    side = ScriptedModel(name="side")
    manager = build_memory_manager(_settings(tmp_path, base_url="http://x/v1"), side_model=side)
    assert isinstance(manager.selector, ModelSelector) and manager.selector.model is side
    assert isinstance(manager.selector.fallback, LexicalSelector)
    assert manager.selector.timeout is None


def test_model_without_a_side_model_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a side model"):
        build_memory_manager(_settings(tmp_path, selector="model"), side_model=None)


@pytest.mark.parametrize("name", ["embedding", "hybrid"])
def test_embedding_selectors_are_built_when_installed(tmp_path: Path, name: str) -> None:
    from asyncrecall.memory import EmbeddingSelector, HybridSelector, embedding_available

    if not embedding_available():
        with pytest.raises(ConfigError, match=r"asyncrecall\[local\]"):
            build_memory_manager(_settings(tmp_path, selector=name), side_model=None)
        return
    manager = build_memory_manager(_settings(tmp_path, selector=name), side_model=None)
    expected = EmbeddingSelector if name == "embedding" else HybridSelector
    assert isinstance(manager.selector, expected)


def test_only_the_lexical_selector_runs_inline_on_the_event_loop() -> None:
    """The embedding selectors load a model on first use: they must not claim to be
    instant, or their first recall would block the event loop before the first request."""
    from asyncrecall.memory import EmbeddingSelector, HybridSelector, InstantSelector

    assert isinstance(LexicalSelector(), InstantSelector)
    assert not isinstance(HybridSelector(), InstantSelector)
    assert not isinstance(EmbeddingSelector(), InstantSelector)

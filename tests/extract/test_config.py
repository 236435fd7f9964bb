"""When extraction is on: by default with an endpoint side model, off with the embedded
one, ``--no-extract`` / ``--extract`` and ``ASYNCRECALL_EXTRACT`` decide when given."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncrecall.agent._extraction import is_embedded
from asyncrecall.cli._session import build_extraction, open_session
from asyncrecall.cli._settings import Settings, load_settings
from asyncrecall.memory import FolderStore, LexicalSelector, Recaller
from asyncrecall.testing import ScriptedModel

from .conftest import SideModel


def test_flags_and_environment(tmp_path: Path) -> None:
    assert load_settings({}, env={}, cwd=tmp_path).extract is None
    assert load_settings({"extract": False}, env={}, cwd=tmp_path).extract is False
    assert load_settings({}, env={"ASYNCRECALL_EXTRACT": "on"}, cwd=tmp_path).extract is True
    from asyncrecall.cli._common import common_parser, settings_from_args

    parser = common_parser()
    assert settings_from_args(parser.parse_args(["--no-extract"]), cwd=tmp_path).extract is False
    assert settings_from_args(parser.parse_args(["--extract"]), cwd=tmp_path).extract is True


async def test_on_with_an_endpoint_off_with_no_extract(settings: Settings, side: SideModel) -> None:
    on = open_session(settings)
    off = open_session(settings.with_overrides(extract=False))
    no_memory = open_session(settings.with_overrides(memory_enabled=False))
    try:
        assert on.extraction is not None and on.agent.extraction is on.extraction
        assert off.extraction is None and off.agent.extraction is None
        assert no_memory.extraction is None
    finally:
        for session in (on, off, no_memory):
            await session.aclose()


def test_off_with_the_embedded_model_unless_forced(tmp_path: Path) -> None:
    """The tiny embedded model's proposals are not worth writing: off unless --extract."""
    pytest.importorskip("llama_cpp")
    from asyncrecall.models import LocalModel

    local = LocalModel()  # loads nothing until used
    memory_manager = Recaller(FolderStore(tmp_path / "m"), LexicalSelector())
    settings = Settings(project=tmp_path)
    assert is_embedded(local) and not is_embedded(ScriptedModel())
    assert build_extraction(settings, memory_manager, local) is None
    forced = settings.with_overrides(extract=True)
    assert build_extraction(forced, memory_manager, local) is not None
    assert build_extraction(settings, memory_manager, ScriptedModel()) is not None

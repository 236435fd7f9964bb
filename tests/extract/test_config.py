"""When extraction is on: by default with an endpoint side model, off with the embedded
one, ``--no-extract`` / ``--extract`` and ``ASYNCRECALL_EXTRACT`` decide when given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asyncrecall._session import build_extraction, open_session
from asyncrecall._settings import Settings, load_settings
from asyncrecall.agent._extraction import is_embedded
from asyncrecall.memory import LexicalSelector, MemoryManager, MemoryStore, read_source_offsets
from asyncrecall.testing import LocalServer, ScriptedModel

from .conftest import HANG_GUARD, SideModel, memory


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
    memory_manager = MemoryManager(MemoryStore(tmp_path / "m"), LexicalSelector())
    settings = Settings(project=tmp_path)
    assert is_embedded(local) and not is_embedded(ScriptedModel())
    assert build_extraction(settings, memory_manager, local) is None
    forced = settings.with_overrides(extract=True)
    assert build_extraction(forced, memory_manager, local) is not None
    assert build_extraction(settings, memory_manager, ScriptedModel()) is not None


def test_run_extracts_before_it_exits(
    local_server: LocalServer, side: SideModel, settings: Settings, tmp_path: Path
) -> None:
    """``asyncrecall run`` (a real process): the extraction after the query is drained at
    exit, so the memory file is there when the command returns."""
    side.add(memory("Deploy day", [0, 1], content="We deploy on fridays."))
    local_server.script("main", "noted")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "run", "we deploy on fridays",
         "--base-url", local_server.base_url, "--api-key", "test", "--model", "main",
         "--side-model", "side", "--project", str(settings.project),
         "--memory-dir", str(settings.memory_dir), "--output-format", "json"],
        capture_output=True, text=True, env=env, timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "noted" in done.stdout
    (doc,) = MemoryStore(settings.memory_dir).scan()  # type: ignore[arg-type]
    assert doc.name == "Deploy day"
    (offsets,) = read_source_offsets(doc.path).values()
    assert offsets == (0, 1)

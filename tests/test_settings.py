"""Settings: flags > environment > project settings file > home settings file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from asyncrecall import ConfigError
from asyncrecall.cli._settings import load_settings
from asyncrecall.cli._trust_store import record_trust


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".asyncrecall").mkdir(parents=True)
    return root


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    root.mkdir()
    return root


def test_precedence_flags_then_env_then_project_file_then_home_file(
    project: Path, home: Path
) -> None:
    """With the project's file trusted (tests/test_trust.py: what applies before)."""
    (home / "settings.toml").write_text(
        'model = "home-model"\nside-model = "home-side"\nbase_url = "http://home/v1"\n'
        'selector = "lexical"\n'
    )
    project_file = project / ".asyncrecall" / "settings.toml"
    project_file.write_text('model = "project-model"\nside_model = "project-side"\n')
    record_trust(home, project_file, project_file.read_bytes())
    env = {"ASYNCRECALL_HOME": str(home), "ASYNCRECALL_SIDE_MODEL": "env-side"}

    settings = load_settings({"project": str(project)}, env=env)
    assert settings.model == "project-model"  # project file beats home file
    assert settings.side_model == "env-side"  # environment beats files
    assert settings.base_url == "http://home/v1"  # only the home file sets it
    assert settings.selector == "lexical"

    flagged = load_settings({"project": str(project), "side_model": "flag-side"}, env=env)
    assert flagged.side_model == "flag-side"  # flags beat everything


def test_openai_variables_are_the_fallback_for_endpoint_and_key(project: Path) -> None:
    env = {"OPENAI_BASE_URL": "http://openai/v1", "OPENAI_API_KEY": "k1"}
    settings = load_settings({"project": str(project)}, env=env)
    assert (settings.base_url, settings.api_key) == ("http://openai/v1", "k1")
    env["ASYNCRECALL_BASE_URL"] = "http://ours/v1"
    assert load_settings({"project": str(project)}, env=env).base_url == "http://ours/v1"


def test_defaults_and_derived_values(project: Path, home: Path) -> None:
    settings = load_settings({"project": str(project)}, env={"ASYNCRECALL_HOME": str(home)})
    assert settings.home == home and settings.project == project.resolve()
    assert settings.max_turns == 100 and settings.memory_enabled
    assert settings.recall_mode == "async+lexical" and settings.output_format == "text"
    # No endpoint: the best embedded selector (hybrid needs the `local` extra).
    expected = "hybrid" if importlib.util.find_spec("wordllama") else "lexical"
    assert settings.effective_selector == expected
    with_endpoint = settings.with_overrides(base_url="http://x/v1", model="m")
    assert with_endpoint.effective_selector == "model"
    assert with_endpoint.effective_side_model == "m"
    assert with_endpoint.require_endpoint() == ("http://x/v1", "m")


def test_memory_can_be_turned_off_by_environment_or_flag(project: Path) -> None:
    assert not load_settings(
        {"project": str(project)}, env={"ASYNCRECALL_MEMORY": "0"}
    ).memory_enabled
    assert not load_settings(
        {"project": str(project), "memory_enabled": False}, env={}
    ).memory_enabled


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"max_turns": -1}, "--max-turns must be 0 or more"),
        ({"max_session_turns": 0}, "--max-session-turns must be 1 or more"),
        ({"session_token_limit": "many"}, "--session-token-limit must be a whole number"),
        ({"selector": "psychic"}, "--selector must be one of"),
        ({"output_format": "xml"}, "--output-format must be one of"),
    ],
)
def test_bad_values_name_the_setting(project: Path, flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings({"project": str(project), **flags}, env={})


def test_missing_endpoint_or_model_names_what_to_set(project: Path) -> None:
    settings = load_settings({"project": str(project)}, env={})
    with pytest.raises(ConfigError, match="--base-url"):
        settings.require_endpoint()
    with pytest.raises(ConfigError, match="--model"):
        settings.with_overrides(base_url="http://x/v1").require_endpoint()


def test_bad_settings_files_are_clear_errors(project: Path, home: Path) -> None:
    env = {"ASYNCRECALL_HOME": str(home)}
    (home / "settings.toml").write_text("model = \n")
    with pytest.raises(ConfigError, match="cannot read settings file"):
        load_settings({"project": str(project)}, env=env)
    (home / "settings.toml").write_text('colour = "blue"\n')
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        load_settings({"project": str(project)}, env=env)
    (home / "settings.toml").write_text("memory = false\n")
    assert not load_settings({"project": str(project)}, env=env).memory_enabled
    with pytest.raises(ConfigError, match="bad-value"):
        (home / "settings.toml").write_text('memory = "bad-value"\n')
        load_settings({"project": str(project)}, env=env)


def test_a_missing_project_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings({"project": str(tmp_path / "nowhere")}, env={})


def test_recall_budgets_environment_wins_over_the_file(project: Path, home: Path) -> None:
    """Each budget is a setting; the environment wins over a settings file,
    and the defaults are the library's (60 KB a session, 1,200 characters / 200 lines
    a file, 200 candidates / 25 KB a manifest, 5 files a message, 3 instant)."""
    defaults = load_settings({"project": str(project)}, env={"ASYNCRECALL_HOME": str(home)})
    assert (
        defaults.recall_files,
        defaults.instant_files,
        defaults.recall_session_bytes,
        defaults.recall_file_chars,
        defaults.recall_file_lines,
        defaults.manifest_files,
        defaults.manifest_bytes,
        defaults.skip_trivial,
    ) == (5, 3, 60_000, 1200, 200, 200, 25_000, True)
    project_file = project / ".asyncrecall" / "settings.toml"
    project_file.write_text(
        "recall-session-bytes = 1000\nmanifest_files = 50\nskip_trivial = false\n"
    )
    record_trust(home, project_file, project_file.read_bytes())
    env = {"ASYNCRECALL_HOME": str(home), "ASYNCRECALL_RECALL_SESSION_BYTES": "2000"}
    settings = load_settings({"project": str(project)}, env=env)
    assert settings.recall_session_bytes == 2000
    assert settings.manifest_files == 50 and settings.skip_trivial is False
    with pytest.raises(ConfigError, match="recall_file_chars must be 1 or more"):
        load_settings(
            {"project": str(project)},
            env={"ASYNCRECALL_HOME": str(home), "ASYNCRECALL_RECALL_FILE_CHARS": "0"},
        )

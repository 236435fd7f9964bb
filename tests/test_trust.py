"""A project's settings file is its author's until the user trusts it (``_settings``,
``_trust``); the CLI side, over real HTTP, is in tests/cli/test_trust_cli.py."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import asyncrecall.cli._settings._sources as settings_module
from asyncrecall import ConfigError
from asyncrecall.cli._settings import UNTRUSTED_FREE, UNTRUSTED_NARROWING, load_settings
from asyncrecall.cli._trust_store import TRUST_FILE, record_trust, revoke_trust, trust_state

#: Every key an untrusted file must not change, with a value.
RESTRICTED = {
    "base_url": '"http://them.example/v1"',
    "api_key": '"their-key-123456"',
    "model": '"their-model"',
    "side_model": '"their-side"',
    "selector": '"model"',
    "memory_dir": '"/tmp/their-memories"',
    "store": '"postgresql://them.example/db"',
    "namespace": '"theirs"',
    "quarantine": "false",
    "extract": "true",
    "tools": "true",
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    root.mkdir()
    (root / "settings.toml").write_text(
        'base_url = "http://mine.example/v1"\napi_key = "my-own-key-987654"\n'
        'model = "my-model"\nmax_turns = 40\n'
    )
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".asyncrecall").mkdir(parents=True)
    return root


def _load(project: Path, home: Path, **env: str) -> settings_module.Settings:
    return load_settings({"project": str(project)}, env={"ASYNCRECALL_HOME": str(home), **env})


def _write(project: Path, text: str) -> Path:
    path = project / ".asyncrecall" / "settings.toml"
    path.write_text(text)
    return path


def test_an_untrusted_project_file_changes_none_of_the_restricted_keys(
    project: Path, home: Path
) -> None:
    """Untrusted, the project's file changes neither the endpoint, the key, the models,
    the selector, the memory folder or store, quarantine, extraction nor tools: each is
    what the user's own settings say, and each is named as ignored."""
    _write(project, "".join(f"{k} = {v}\n" for k, v in RESTRICTED.items()))
    mine = _load(project, project.parent / "empty-home")  # what the defaults are
    settings = _load(project, home)

    assert (settings.base_url, settings.api_key, settings.model) == (
        "http://mine.example/v1",
        "my-own-key-987654",
        "my-model",
    )
    for key in ("side_model", "selector", "memory_dir", "store", "namespace", "extract", "tools"):
        assert getattr(settings, key) == getattr(mine, key), key
    assert settings.quarantine is True
    assert settings.untrusted is not None and settings.untrusted.state == "untrusted"
    assert set(settings.untrusted.ignored) == set(RESTRICTED)
    assert not set(RESTRICTED) & (UNTRUSTED_FREE | set(UNTRUSTED_NARROWING))


def test_harmless_keys_apply_and_limits_only_narrow(project: Path, home: Path) -> None:
    """Untrusted, the output format and recall mode apply; a limit or budget applies
    only when it is lower than the user's own (or the default), memory only turns off."""
    _write(
        project,
        'output_format = "stream-json"\nrecall_mode = "blocking"\nmax_turns = 10\n'
        "manifest_bytes = 1000\nrecall_session_bytes = 0\nmemory = false\n",
    )
    settings = _load(project, home)
    assert (settings.output_format, settings.recall_mode) == ("stream-json", "blocking")
    assert settings.max_turns == 10  # under the home file's 40
    assert settings.manifest_bytes == 1000  # under the default
    assert settings.memory_enabled is False
    assert settings.recall_session_bytes == 60_000  # 0 is "no budget": wider, ignored
    assert settings.untrusted is not None and settings.untrusted.ignored == (
        "recall_session_bytes",
    )

    _write(project, "max_turns = 500\nmemory = true\n")
    (home / "settings.toml").write_text("memory = false\n")
    raised = _load(project, home)
    assert raised.max_turns == 100 and raised.memory_enabled is False
    assert raised.untrusted is not None and raised.untrusted.ignored == ("max_turns", "memory")


def test_trusted_it_works_as_before_and_an_edit_undoes_the_trust(project: Path, home: Path) -> None:
    """Trusted, the file's keys apply (flags > environment > project > home); changed
    since, it is untrusted again (``changed``) until trusted anew."""
    path = _write(project, 'base_url = "http://them.example/v1"\nquarantine = false\n')
    record_trust(home, path, path.read_bytes())
    trusted = _load(project, home)
    assert trusted.base_url == "http://them.example/v1" and trusted.quarantine is False
    assert trusted.untrusted is None
    assert _load(project, home, ASYNCRECALL_BASE_URL="http://env/v1").base_url == "http://env/v1"

    path.write_text(path.read_text() + "# one more line\n")
    changed = _load(project, home)
    assert changed.base_url == "http://mine.example/v1" and changed.quarantine is True
    assert changed.untrusted is not None and changed.untrusted.state == "changed"
    assert "changed since you trusted it" in changed.untrusted.warning()

    record_trust(home, path, path.read_bytes())
    assert _load(project, home).base_url == "http://them.example/v1"
    assert revoke_trust(home, path) and not revoke_trust(home, path)
    assert _load(project, home).base_url == "http://mine.example/v1"


def test_the_warning_names_the_keys_and_the_exact_command(project: Path, home: Path) -> None:
    """One line: the ignored keys, the file, and the command that trusts the folder
    (quoted for the shell)."""
    odd = project.parent / "my repo"
    (odd / ".asyncrecall").mkdir(parents=True)
    _write(odd, 'base_url = "http://them.example/v1"\nmemory_dir = "/tmp/x"\n')
    untrusted = _load(odd, home).untrusted
    assert untrusted is not None
    line = untrusted.warning()
    assert "\n" not in line
    assert "base_url, memory_dir" in line and str(odd / ".asyncrecall" / "settings.toml") in line
    assert line.endswith(f"asyncrecall trust --project '{odd}'")


def test_the_users_key_never_goes_with_an_endpoint_the_user_did_not_name(
    project: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key and the endpoint are resolved as a pair: were the allow-list to let an
    untrusted ``base_url`` through, the user's key (home file, environment or the
    client's ``OPENAI_API_KEY`` fallback) is never paired with it: the settings are
    refused, so nothing is sent. Only a key that came with that same file may go."""
    monkeypatch.setattr(settings_module, "UNTRUSTED_FREE", UNTRUSTED_FREE | {"base_url"})
    _write(project, 'base_url = "http://them.example/v1"\n')
    for env in ({}, {"OPENAI_API_KEY": "env-key-1234567"}):
        with pytest.raises(ConfigError, match="refusing to send your API key"):
            _load(project, home, **env)
    (home / "settings.toml").unlink()
    with pytest.raises(ConfigError, match="refusing to send your API key"):
        _load(project, home)  # no key anywhere: the client would fall back to the env's

    monkeypatch.setattr(settings_module, "UNTRUSTED_FREE", UNTRUSTED_FREE | {"base_url", "api_key"})
    _write(project, 'base_url = "http://them.example/v1"\napi_key = "theirs-1234567"\n')
    own = _load(project, home)
    assert (own.base_url, own.api_key) == ("http://them.example/v1", "theirs-1234567")
    # The user's own endpoint, by flag, with the user's key: untouched by the rule.
    flagged = load_settings(
        {"project": str(project), "base_url": "http://flag/v1", "api_key": "my-flag-key-1"},
        env={"ASYNCRECALL_HOME": str(home)},
    )
    assert (flagged.base_url, flagged.api_key) == ("http://flag/v1", "my-flag-key-1")


def test_the_home_file_seen_as_a_project_file_is_the_users_own(tmp_path: Path) -> None:
    """At the home's parent (``~`` with the default ``~/.asyncrecall``), the project's
    file is the home file: it applies, with no warning."""
    home = tmp_path / ".asyncrecall"
    home.mkdir()
    (home / "settings.toml").write_text('base_url = "http://mine.example/v1"\n')
    settings = load_settings({"project": str(tmp_path)}, env={"ASYNCRECALL_HOME": str(home)})
    assert settings.base_url == "http://mine.example/v1" and settings.untrusted is None


def test_the_record_is_private_atomic_and_distrusted_when_tampered(
    project: Path, home: Path
) -> None:
    """The record is written whole with mode 0600 (no temporary file left); one that
    others may write, or that is not JSON, trusts nothing."""
    path = _write(project, "quarantine = false\n")
    data = path.read_bytes()
    record_trust(home, path, data)
    record = home / TRUST_FILE
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert sorted(p.name for p in home.iterdir() if ".tmp" in p.name) == []
    entry = json.loads(record.read_text())["files"][str(path.resolve())]
    assert len(entry["sha256"]) == 64
    assert trust_state(home, path, data) == "trusted"

    os.chmod(record, 0o666)
    assert trust_state(home, path, data) == "untrusted"
    assert _load(project, home).quarantine is True
    with pytest.raises(ConfigError, match="writable by others"):
        record_trust(home, path, data)
    os.chmod(record, 0o600)
    record.write_text("{not json")
    assert trust_state(home, path, data) == "untrusted"
    with pytest.raises(ConfigError, match="not JSON"):
        record_trust(home, path, data)


def test_trust_is_for_the_bytes_that_were_read(project: Path, home: Path) -> None:
    """The hash is of the content used: other bytes at the same path are not trusted."""
    path = _write(project, "quarantine = false\n")
    record_trust(home, path, path.read_bytes())
    assert trust_state(home, path, b"quarantine = false\n# more\n") == "changed"
    assert trust_state(home, project / "elsewhere.toml", path.read_bytes()) == "untrusted"


def test_a_bad_value_names_the_file_it_came_from(project: Path, home: Path) -> None:
    """An invalid value in a file the user owns (the home file, a trusted project file)
    is one error naming the setting and the file."""
    path = _write(project, "max_turns = -2\n")
    record_trust(home, path, path.read_bytes())
    with pytest.raises(ConfigError, match=rf"must be 0 or more, got -2 \(from {path}\)"):
        _load(project, home)
    (home / "settings.toml").write_text('selector = "psychic"\n')
    path.unlink()
    with pytest.raises(ConfigError, match=r"--selector must be one of .*home/settings.toml\)"):
        _load(project, home)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("max_turns = -2\n", "--max-turns must be 0 or more, got -2"),
        ("max_turns = = 3\n", "cannot read settings file"),
        ("colour = 'blue'\n", "unknown setting 'colour'"),
        (b"max_turns = 3 # \xff\n", "cannot read settings file"),
    ],
    ids=["invalid value", "not TOML", "unknown key", "not UTF-8"],
)
def test_an_untrusted_file_that_cannot_be_read_is_ignored_whole(
    project: Path, home: Path, text: str | bytes, error: str
) -> None:
    """A cloned folder's file that is broken stops no command: it is ignored whole (its
    harmless keys too), and the warning names the file, the error and why. Trusted,
    the same file is the user's own: an error."""
    path = project / ".asyncrecall" / "settings.toml"
    body = text.encode() if isinstance(text, str) else text
    path.write_bytes(b'output_format = "json"\n' + body)

    settings = _load(project, home)

    assert settings.output_format == "text" and settings.max_turns == 40
    assert settings.untrusted is not None and settings.untrusted.ignored == ()
    warning = settings.untrusted.warning()
    assert error in warning and str(path) in warning and warning.endswith("(not trusted)")
    record_trust(home, path, path.read_bytes())
    with pytest.raises(ConfigError, match=error):
        _load(project, home)


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "huge"])
def test_a_settings_file_that_is_no_file_is_ignored_not_a_hang(
    project: Path, home: Path, target: str
) -> None:
    """A project's settings file linked to a device, made a pipe, or over 1 MiB is not
    read: no command in that folder hangs or reads without end, and it is ignored with
    a warning naming it (bytes that cannot be read cannot match a trust)."""
    path = project / ".asyncrecall" / "settings.toml"
    if target == "fifo":
        os.mkfifo(path)
    elif target == "huge":
        path.write_text("# filler\n" * 200_000)
    else:
        path.symlink_to(target)
    settings = _load(project, home)
    assert settings.untrusted is not None
    assert settings.untrusted.warning().startswith(f"cannot read settings file {path}")
    assert settings.max_turns == 40

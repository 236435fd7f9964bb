"""Where settings come from: flags, the environment, the project's file as far as the
user trusts it, the user's home file; :func:`load_settings` resolves them.

The project's file came with the folder: its author wrote it, not the user. Until the
user trusts it (``asyncrecall trust``, see :mod:`asyncrecall.cli._trust_store`; an edit undoes
the trust), only the keys of :data:`UNTRUSTED_FREE` and :data:`UNTRUSTED_NARROWING`
apply from it; the others are ignored and named in ``Settings.untrusted``, which the
command line prints as one warning. And whatever a layer holds, the endpoint and the
key are resolved as a pair (:func:`_endpoint_pair`): a base URL from a layer the user
does not own never gets a key it did not bring itself.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._settings._values import (
    DEFAULTS,
    ENV_VARIABLES,
    PARSERS,
    Settings,
    UntrustedSettings,
    path_value,
)
from asyncrecall.cli._trust_store import trust_state

__all__ = [
    "UNTRUSTED_FREE",
    "UNTRUSTED_NARROWING",
    "SettingsFile",
    "home_folder",
    "load_settings",
    "project_settings_file",
]


#: What a project's settings file may set before the user trusts it: how ``run`` and
#: ``chat`` print, and how recall is scheduled. Nothing here says where text or keys
#: go (``base_url``, ``api_key``, ``store``, ``namespace``, ``memory_dir``), who reads
#: them (``model``, ``side_model``, ``selector``), or what memory keeps and shows
#: (``quarantine``, ``extract``, ``tools``): those wait for the user's trust.
UNTRUSTED_FREE: Final = frozenset({"output_format", "recall_mode"})


def _unlimited_if(*empty: object) -> Callable[[Any], float]:
    """A limit's size for comparison: the value, or infinity for the ones meaning none."""
    return lambda value: math.inf if value is None or value in empty else float(value)


#: What a project's settings file may only narrow before the user trusts it, with each
#: value's size (a lower size is narrower): limits and budgets it may lower, never
#: raise (they bound what the user's key pays for and how much memory is sent), memory
#: it may turn off, the skip of trivial prompts on. Narrower than what the user's own
#: file (or the default) sets, the value applies; otherwise it is ignored.
UNTRUSTED_NARROWING: Final[Mapping[str, Callable[[Any], float]]] = {
    "max_turns": _unlimited_if(),
    "max_session_turns": _unlimited_if(),
    "session_token_limit": _unlimited_if(),
    "memory_enabled": lambda on: 1.0 if on else 0.0,
    "skip_trivial": lambda on: 0.0 if on else 1.0,
    "recall_files": _unlimited_if(),
    "instant_files": _unlimited_if(),
    "recall_session_bytes": _unlimited_if(0),
    "recall_file_chars": _unlimited_if(),
    "recall_file_lines": _unlimited_if(),
    "manifest_files": _unlimited_if(),
    "manifest_bytes": _unlimited_if(),
}


@dataclass(frozen=True)
class SettingsFile:
    """A settings file as read: its bytes (what trust is given to) and its settings."""

    path: Path
    data: bytes
    values: Mapping[str, Any]

    @classmethod
    def read(cls, path: Path) -> SettingsFile | None:
        """The file at ``path``, or ``None`` when there is none; a :class:`ConfigError`
        naming it when it cannot be read, is not TOML or names an unknown setting."""
        data = _read_settings_bytes(path)
        return None if data is None else cls.parse(path, data)

    @classmethod
    def parse(cls, path: Path, data: bytes) -> SettingsFile:
        """The settings in ``data``, read from ``path``; a :class:`ConfigError` naming it
        when they are not TOML or name an unknown setting."""
        try:
            table = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read settings file {path}: {exc}") from exc
        values: dict[str, Any] = {}
        for key, value in table.items():
            name = key.replace("-", "_")
            if name == "memory":  # `memory = false` reads naturally in a file
                name = "memory_enabled"
            if name not in PARSERS:
                raise ConfigError(f"unknown setting {key!r} in {path}")
            values[name] = value
        return cls(path, data, values)

    def validate(self) -> None:
        """Parse every value: a :class:`ConfigError` naming the first invalid one."""
        for name, value in self.values.items():
            try:
                PARSERS[name](value)
            except ConfigError as exc:
                raise ConfigError(f"{exc} (in {self.path})") from exc


#: A settings file larger than this is refused (a few lines are what one holds).
MAX_SETTINGS_BYTES: Final = 1 << 20


def _read_settings_bytes(path: Path) -> bytes | None:
    """The bytes of the settings file at ``path``, ``None`` when there is none; a
    :class:`ConfigError` naming it when it cannot be read."""
    try:
        return _read_regular(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # its strerror: the error's filename may be a descriptor
        raise ConfigError(f"cannot read settings file {path}: {exc.strerror or exc}") from exc


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path``: a folder's author could make it a
    link to a device, a pipe, or something huge, which would hang or swamp every
    command run there."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError("not a regular file")
        data = handle.read(MAX_SETTINGS_BYTES + 1)
    if len(data) > MAX_SETTINGS_BYTES:
        raise OSError(f"larger than {MAX_SETTINGS_BYTES} bytes")
    return data


def _shown(name: str) -> str:
    return "memory" if name == "memory_enabled" else name


def home_folder(env: Mapping[str, str] | None = None) -> Path:
    """``$ASYNCRECALL_HOME``, else ``~/.asyncrecall``: the user's own settings and records."""
    env = os.environ if env is None else env
    try:
        return path_value(env.get("ASYNCRECALL_HOME") or "~/.asyncrecall")
    except RuntimeError as exc:  # Path.expanduser: no HOME, no password entry
        raise ConfigError(
            "cannot find a home folder for asyncrecall: set HOME or ASYNCRECALL_HOME"
        ) from exc


def project_settings_file(project: Path, home: Path) -> Path | None:
    """Where ``project``'s settings file is; ``None`` when that is the user's own home
    settings file (a project at the home's parent: it is read once, as the user's)."""
    path = project / ".asyncrecall" / "settings.toml"
    if _same_file(path, home / "settings.toml"):
        return None
    return path


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there
        return False


@dataclass(frozen=True)
class _Layer:
    """One source of settings. ``owned``: the user wrote it (flags, the environment,
    the home file, a trusted project file)."""

    name: str
    values: Mapping[str, Any]
    owned: bool


def _endpoint_pair(picked: Mapping[str, _Layer]) -> None:
    """The key goes only where the user said: a base URL from a layer the user does not
    own is refused unless that same layer brings its own key (the user's key, from
    flags, environment or the home file, is never paired with it, nor is the client's
    fallback to ``OPENAI_API_KEY`` when no key is set)."""
    endpoint = picked.get("base_url")
    if endpoint is None or endpoint.owned:
        return
    if picked.get("api_key") is not endpoint:
        raise ConfigError(
            f"the base URL in {endpoint.name} is not one you named: refusing to send your "
            "API key or prompts there (pass --base-url, or trust that file)"
        )


def _project_layer(
    path: Path, project: Path, home: Path, below: Mapping[str, Any]
) -> tuple[_Layer | None, UntrustedSettings | None]:
    """What of the project's settings file at ``path`` applies, and what the user is
    told of it. A trusted file applies whole, and its errors are the user's to mend
    (a :class:`ConfigError`); an untrusted one that cannot be read, is not TOML, or holds
    an unknown key or an invalid value is ignored whole, with its error in the warning:
    a cloned folder's file must not stop every command run there. A file that cannot
    be read cannot be matched with a trust either."""
    try:
        data = _read_settings_bytes(path)
    except ConfigError as exc:
        return None, UntrustedSettings(
            path=path, project=project, state="untrusted", ignored=(), error=str(exc)
        )
    if data is None:
        return None, None
    state = trust_state(home, path, data)
    if state == "trusted":
        return _Layer(str(path), SettingsFile.parse(path, data).values, owned=True), None
    try:
        file = SettingsFile.parse(path, data)
        file.validate()
        layer, ignored = _untrusted_layer(file, state, below)
    except ConfigError as exc:
        return None, UntrustedSettings(
            path=path, project=project, state=state, ignored=(), error=str(exc)
        )
    if not ignored:
        return layer, None
    return layer, UntrustedSettings(path=path, project=project, state=state, ignored=ignored)


def _untrusted_layer(
    file: SettingsFile, state: Literal["untrusted", "changed"], below: Mapping[str, Any]
) -> tuple[_Layer, tuple[str, ...]]:
    """What of an untrusted project file applies, and the keys ignored. ``below``: the
    values of the user's own file under it (narrowing keys are compared with them, or
    with the defaults)."""
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for name, value in file.values.items():
        if name in UNTRUSTED_FREE:
            kept[name] = value
        elif name in UNTRUSTED_NARROWING:
            size = UNTRUSTED_NARROWING[name]
            try:
                mine = PARSERS[name](value)
            except ConfigError as exc:
                raise ConfigError(f"{exc} (from {file.path})") from exc
            if size(mine) <= size(_baseline(name, below)):
                kept[name] = value
            else:
                ignored.append(_shown(name))
        else:
            ignored.append(_shown(name))
    return _Layer(f"{file.path} ({state})", kept, owned=False), tuple(ignored)


def _baseline(name: str, below: Mapping[str, Any]) -> Any:
    """The value of ``name`` without the project's file: the home file's, else the default."""
    if name in below:
        try:
            return PARSERS[name](below[name])
        except ConfigError:
            pass  # reported when (if) it applies
    return DEFAULTS[name]


def load_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Resolve settings from flags (``None`` values are unset), environment and files
    (the project's as far as the user trusts it: see the module's docstring)."""
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    env = os.environ if env is None else env
    project = path_value(flags.pop("project", None) or (cwd or Path.cwd())).resolve()
    if not project.is_dir():
        what = "is not a folder" if project.exists() else "does not exist"
        raise ConfigError(f"project folder {project} {what}")
    home = home_folder(env)
    for name in flags:
        if name not in PARSERS:
            raise ConfigError(f"unknown setting {name!r}")

    from_env: dict[str, Any] = {}
    for name, variables in ENV_VARIABLES.items():
        for variable in variables:
            value = env.get(variable)
            if value:
                from_env[name] = value
                break
    home_path = home / "settings.toml"
    home_file = SettingsFile.read(home_path)
    home_values = home_file.values if home_file is not None else {}
    layers = [
        _Layer("flags", flags, owned=True),
        _Layer("the environment", from_env, owned=True),
    ]
    untrusted = None
    where = project_settings_file(project, home)
    if where is not None:
        layer, untrusted = _project_layer(where, project, home, home_values)
        if layer is not None:
            layers.append(layer)
    layers.append(_Layer(str(home_path), home_values, owned=True))

    picked: dict[str, _Layer] = {}
    for layer in layers:  # the first layer holding a key wins
        for name in layer.values:
            picked.setdefault(name, layer)
    _endpoint_pair(picked)
    parsed = {name: _parse(name, layer) for name, layer in picked.items()}
    return Settings(home=home, project=project, untrusted=untrusted, **parsed)


def _parse(name: str, layer: _Layer) -> Any:
    try:
        return PARSERS[name](layer.values[name])
    except ConfigError as exc:
        if layer.name == "flags":
            raise
        raise ConfigError(f"{exc} (from {layer.name})") from exc

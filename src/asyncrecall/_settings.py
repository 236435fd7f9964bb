"""Settings: flags win over environment variables, which win over settings files.

Files, first found wins per key: ``<project>/.asyncrecall/settings.toml``, then
``$ASYNCRECALL_HOME/settings.toml``. Keys in files are the flag names with ``_`` or
``-`` (``base_url`` or ``base-url``).

The project's file came with the folder: its author wrote it, not the user. Until the
user trusts it (``asyncrecall trust``, see :mod:`asyncrecall._trust`; an edit undoes
the trust), only the keys of :data:`UNTRUSTED_FREE` and :data:`UNTRUSTED_NARROWING`
apply from it; the others are ignored and named in :attr:`Settings.untrusted`, which
the command line prints as one warning. And whatever a layer holds, the endpoint and
the key are resolved as a pair (:func:`_endpoint_pair`): a base URL from a layer the
user does not own never gets a key it did not bring itself.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shlex
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, get_args

from asyncrecall._exceptions import ConfigError
from asyncrecall._trust import trust_state
from asyncrecall._urls import http_base_url

if TYPE_CHECKING:
    # The agent's type; imported for annotations only, so that reading settings (every
    # ``memory`` command does) never loads the agent.
    from asyncrecall.agent import RecallMode

__all__ = [
    "RECALL_MODES",
    "UNTRUSTED_FREE",
    "UNTRUSTED_NARROWING",
    "OutputFormat",
    "SelectorName",
    "Settings",
    "SettingsFile",
    "UntrustedSettings",
    "home_folder",
    "load_settings",
    "project_settings_file",
    "trust_command",
]

SelectorName: TypeAlias = Literal["model", "lexical", "embedding", "hybrid"]
OutputFormat: TypeAlias = Literal["text", "json", "stream-json"]
#: The values of :data:`asyncrecall.agent.RecallMode` (a test pins them equal).
RECALL_MODES: tuple[str, ...] = ("async", "blocking", "async+wait100", "async+lexical")

_DEFAULT_MAX_TURNS = 100


@dataclass(frozen=True, kw_only=True)
class UntrustedSettings:
    """A project settings file the user has not trusted, or that changed since, and the
    keys of it that were ignored for that."""

    path: Path
    project: Path
    state: Literal["untrusted", "changed"]
    ignored: tuple[str, ...]

    def warning(self) -> str:
        """One line for stderr: what was ignored, why, and the command that trusts it."""
        why = "it changed since you trusted it" if self.state == "changed" else "not trusted"
        return (
            f"ignoring {', '.join(self.ignored)} in {self.path} ({why}); "
            f"if you trust this folder's settings: {trust_command(self.project)}"
        )


def trust_command(project: Path) -> str:
    """The command line that trusts ``project``'s settings file, ready to paste."""
    return f"asyncrecall trust --project {shlex.quote(str(project))}"


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything a command needs to know, resolved once."""

    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    side_model: str | None = None
    selector: SelectorName | None = None
    memory_dir: Path | None = None
    home: Path = field(default_factory=lambda: Path("~/.asyncrecall").expanduser())
    memory_enabled: bool = True
    project: Path = Path(".")
    max_session_turns: int | None = None
    session_token_limit: int | None = None
    max_turns: int = _DEFAULT_MAX_TURNS
    output_format: OutputFormat = "text"
    recall_mode: RecallMode = "async+lexical"
    store: str | None = None  # a postgresql:// URL: memories in a database (issue 13)
    namespace: str | None = None  # the database store's namespace (default: the project)
    #: ``--tools``: offer the tools even to the tiny embedded model (``None``: automatic).
    tools: bool | None = None
    #: Background memory extraction (issue 14): None = on with an endpoint side model.
    extract: bool | None = None
    #: Keep quarantined memories (newest write untrusted: model text after tool output,
    #: unconfirmed) out of recall and the prompt's index (issue 25).
    quarantine: bool = True
    # Recall's budgets (issue 24; their defaults are the library's, see memory/_budget.py).
    #: Files that reach the model for one user message, instant pass and model pick together.
    recall_files: int = 5
    #: Files the instant lexical pass may put on the first request (within recall_files).
    instant_files: int = 2
    #: Bytes of memory blocks per session before recall stops; 0: no budget.
    recall_session_bytes: int = 60_000
    #: Characters and lines of a memory's body put in the block (a note names the file).
    recall_file_chars: int = 1200
    recall_file_lines: int = 200
    #: Candidates and bytes of the model selector's manifest at most.
    manifest_files: int = 200
    manifest_bytes: int = 25_000
    #: Start no recall for a prompt with nothing to recall (one word, a bare "yes"/"ok").
    skip_trivial: bool = True
    #: The project's settings file when keys of it were ignored (not trusted, or changed).
    untrusted: UntrustedSettings | None = field(default=None, compare=False)

    @property
    def effective_side_model(self) -> str | None:
        """The side query's model: ``--side-model``, else the main model."""
        return self.side_model or self.model

    @property
    def effective_selector(self) -> SelectorName:
        """``--selector``; else ``model`` with an endpoint; else the best embedded selector:
        ``hybrid`` when the ``local`` extra is installed, ``lexical`` otherwise."""
        if self.selector is not None:
            return self.selector
        if self.base_url is not None:
            return "model"
        return "hybrid" if _installed("wordllama") else "lexical"

    def tools_enabled(self, *, embedded: bool) -> bool:
        """Whether the main model is offered the tools: ``--tools`` (or ``tools = true``)
        forces them; otherwise every model gets them but the tiny embedded one, which
        only loops on tool calls (it still gets its memory, in the prompt)."""
        return self.tools if self.tools is not None else not embedded

    def effective_recall_mode(self, *, embedded: bool) -> RecallMode:
        """``--recall-mode`` (default ``async+lexical``: in ``bench recall`` it delivers
        the most gold memory at zero wait); and a plain ``async`` on a main model
        without tools, which has no later point for a recall to land (no tool results),
        gets the instant lexical pass too."""
        if self.recall_mode == "async" and embedded and not self.tools_enabled(embedded=True):
            return "async+lexical"
        return self.recall_mode

    def require_endpoint(self) -> tuple[str, str]:
        """The base URL and main model, or a :class:`ConfigError` naming what is missing."""
        if not self.base_url:
            raise ConfigError(
                "no endpoint configured: pass --base-url or set ASYNCRECALL_BASE_URL "
                "(or OPENAI_BASE_URL)"
            )
        if not self.model:
            raise ConfigError("no model configured: pass --model or set ASYNCRECALL_MODEL")
        return self.base_url, self.model

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    def memory_folder(self) -> Path:
        """The memory folder these settings name (not created: see ``MemoryStore.ensure``)."""
        from asyncrecall.memory._location import resolve_memory_dir

        return resolve_memory_dir(home=self.home, project=self.project, memory_dir=self.memory_dir)


def _installed(package: str) -> bool:
    """Whether ``package`` can be imported (found, not imported)."""
    return importlib.util.find_spec(package) is not None


def _positive_int(name: str, *, allow_zero: bool = False) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        try:
            number = int(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{name} must be a whole number, got {value!r}") from exc
        if number < 0 or (number == 0 and not allow_zero):
            low = "0 or more" if allow_zero else "1 or more"
            raise ConfigError(f"{name} must be {low}, got {number}")
        return number

    return parse


def _choice(name: str, choices: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value)
        if text not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {text!r}")
        return text

    return parse


def _bool(name: str) -> Callable[[Any], bool]:
    def parse(value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in {"1", "true", "yes", "on"}:
            return True
        if text in {"0", "false", "no", "off"}:
            return False
        raise ConfigError(f"{name} must be true or false, got {value!r}")

    return parse


def _path(value: Any) -> Path:
    return Path(str(value)).expanduser()


def _text(value: Any) -> str:
    return str(value)


_PARSERS: dict[str, Callable[[Any], Any]] = {
    "base_url": http_base_url,
    "api_key": _text,
    "model": _text,
    "side_model": _text,
    "selector": _choice("--selector", get_args(SelectorName)),
    "memory_dir": _path,
    "memory_enabled": _bool("memory"),
    "max_session_turns": _positive_int("--max-session-turns"),
    "session_token_limit": _positive_int("--session-token-limit"),
    "max_turns": _positive_int("--max-turns", allow_zero=True),
    "output_format": _choice("--output-format", get_args(OutputFormat)),
    "store": _text,
    "namespace": _text,
    "recall_mode": _choice("--recall-mode", RECALL_MODES),
    "tools": _bool("--tools"),
    "extract": _bool("extract"),  # issue 14
    "quarantine": _bool("quarantine"),  # issue 25
    # issue 24: recall's budgets
    "recall_files": _positive_int("recall_files"),
    "instant_files": _positive_int("instant_files", allow_zero=True),
    "recall_session_bytes": _positive_int("recall_session_bytes", allow_zero=True),
    "recall_file_chars": _positive_int("recall_file_chars"),
    "recall_file_lines": _positive_int("recall_file_lines"),
    "manifest_files": _positive_int("manifest_files"),
    "manifest_bytes": _positive_int("manifest_bytes"),
    "skip_trivial": _bool("skip_trivial"),
}

# Environment variables, first set wins.
_ENV: dict[str, tuple[str, ...]] = {
    "base_url": ("ASYNCRECALL_BASE_URL", "OPENAI_BASE_URL"),
    "api_key": ("ASYNCRECALL_API_KEY", "OPENAI_API_KEY"),
    "model": ("ASYNCRECALL_MODEL",),
    "side_model": ("ASYNCRECALL_SIDE_MODEL",),
    "selector": ("ASYNCRECALL_SELECTOR",),
    "memory_dir": ("ASYNCRECALL_MEMORY_DIR",),
    "memory_enabled": ("ASYNCRECALL_MEMORY",),
    "store": ("ASYNCRECALL_STORE",),
    "namespace": ("ASYNCRECALL_NAMESPACE",),
    "extract": ("ASYNCRECALL_EXTRACT",),  # issue 14
    "quarantine": ("ASYNCRECALL_QUARANTINE",),  # issue 25
    # issue 24: recall's budgets
    "recall_files": ("ASYNCRECALL_RECALL_FILES",),
    "instant_files": ("ASYNCRECALL_INSTANT_FILES",),
    "recall_session_bytes": ("ASYNCRECALL_RECALL_SESSION_BYTES",),
    "recall_file_chars": ("ASYNCRECALL_RECALL_FILE_CHARS",),
    "recall_file_lines": ("ASYNCRECALL_RECALL_FILE_LINES",),
    "manifest_files": ("ASYNCRECALL_MANIFEST_FILES",),
    "manifest_bytes": ("ASYNCRECALL_MANIFEST_BYTES",),
    "skip_trivial": ("ASYNCRECALL_SKIP_TRIVIAL",),
}


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
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise ConfigError(f"cannot read settings file {path}: {exc}") from exc
        try:
            table = tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read settings file {path}: {exc}") from exc
        values: dict[str, Any] = {}
        for key, value in table.items():
            name = key.replace("-", "_")
            if name == "memory":  # `memory = false` reads naturally in a file
                name = "memory_enabled"
            if name not in _PARSERS:
                raise ConfigError(f"unknown setting {key!r} in {path}")
            values[name] = value
        return cls(path, data, values)

    def validate(self) -> None:
        """Parse every value: a :class:`ConfigError` naming the first invalid one."""
        for name, value in self.values.items():
            try:
                _PARSERS[name](value)
            except ConfigError as exc:
                raise ConfigError(f"{exc} (in {self.path})") from exc


def _shown(name: str) -> str:
    return "memory" if name == "memory_enabled" else name


def home_folder(env: Mapping[str, str] | None = None) -> Path:
    """``$ASYNCRECALL_HOME``, else ``~/.asyncrecall``: the user's own settings and records."""
    env = os.environ if env is None else env
    return _path(env.get("ASYNCRECALL_HOME") or "~/.asyncrecall")


def project_settings_file(project: Path, home: Path) -> Path | None:
    """Where ``project``'s settings file is; ``None`` when that is the user's own home
    settings file (a project at the home's parent: it is read once, as the user's)."""
    path = project / ".asyncrecall" / "settings.toml"
    if _same_file(path, home / "settings.toml"):
        return None
    return path


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
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
            if size(_PARSERS[name](value)) <= size(_baseline(name, below)):
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
            return _PARSERS[name](below[name])
        except ConfigError:
            pass  # reported when (if) it applies
    return _DEFAULTS[name]


_DEFAULTS: Final[Mapping[str, Any]] = {
    f.name: f.default for f in fields(Settings) if f.default is not MISSING
}


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
    project = _path(flags.pop("project", None) or (cwd or Path.cwd())).resolve()
    if not project.is_dir():
        raise ConfigError(f"project folder {project} does not exist")
    home = home_folder(env)
    for name in flags:
        if name not in _PARSERS:
            raise ConfigError(f"unknown setting {name!r}")

    from_env: dict[str, Any] = {}
    for name, variables in _ENV.items():
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
    project_file = SettingsFile.read(where) if where is not None else None
    if project_file is not None:
        state = trust_state(home, project_file.path, project_file.data)
        if state == "trusted":
            layers.append(_Layer(str(project_file.path), project_file.values, owned=True))
        else:
            layer, ignored = _untrusted_layer(project_file, state, home_values)
            layers.append(layer)
            if ignored:
                untrusted = UntrustedSettings(
                    path=project_file.path, project=project, state=state, ignored=ignored
                )
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
        return _PARSERS[name](layer.values[name])
    except ConfigError as exc:
        if layer.name == "flags":
            raise
        raise ConfigError(f"{exc} (from {layer.name})") from exc

"""What a setting is: :class:`Settings`, each key's parser, its environment variables.

Where settings come from, and how far a project's own file is believed: ``_sources``.
"""

from __future__ import annotations

import importlib.util
import shlex
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, get_args

from asyncrecall._exceptions import ConfigError
from asyncrecall._urls import http_base_url

if TYPE_CHECKING:
    # The agent's type; imported for annotations only, so that reading settings (every
    # ``memory`` command does) never loads the agent.
    from asyncrecall.agent import RecallMode

__all__ = [
    "DEFAULTS",
    "ENV_VARIABLES",
    "PARSERS",
    "RECALL_MODES",
    "OutputFormat",
    "SelectorName",
    "Settings",
    "UntrustedSettings",
    "path_value",
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
    #: Why the whole file was ignored: it cannot be read, is not TOML, or holds an
    #: unknown key or an invalid value (``ignored`` is then empty).
    error: str | None = None

    def warning(self) -> str:
        """One line for stderr: what was ignored, why, and the command that trusts it."""
        why = "it changed since you trusted it" if self.state == "changed" else "not trusted"
        if self.error is not None:
            return f"{self.error}; the whole file is ignored ({why})"
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
    store: str | None = None  # a postgresql:// URL: memories in a database
    namespace: str | None = None  # the database store's namespace (default: the project)
    #: ``--tools``: offer the tools even to the tiny embedded model (``None``: automatic).
    tools: bool | None = None
    #: Background memory extraction: None = on with an endpoint side model.
    extract: bool | None = None
    #: Where ``run`` and ``chat`` append their recall events as JSON lines (``None``: no
    #: log); ``asyncrecall console`` reads it (``cli._event_log``).
    event_log: Path | None = None
    #: Keep quarantined memories (held by an untrusted write the user has not confirmed
    #: since: ``memory._provenance``) out of recall and the prompt's index.
    quarantine: bool = True
    # Recall's budgets (their defaults are the library's, see memory/_budget.py).
    #: Files that reach the model for one user message, instant pass and model pick together.
    recall_files: int = 5
    #: Files the instant lexical pass may put on the first request (within recall_files).
    instant_files: int = 3
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
    #: With the ``local`` extra, the instant pass of a session that outlives its first
    #: request reads meaning too (the embedded encoder's vectors, loaded into the
    #: process) where no memory shares the query's words; without the extra, nothing.
    semantic_instant: bool = True
    #: OpenTelemetry export (``cli._telemetry``): None = when the OTEL_* endpoint
    #: variables are set; True = always (the SDK required); False = never.
    otel: bool | None = None
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
        """The memory folder these settings name (not created: see ``FolderStore.ensure``)."""
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


def path_value(value: Any) -> Path:
    return Path(str(value)).expanduser()


def _text(value: Any) -> str:
    return str(value)


PARSERS: dict[str, Callable[[Any], Any]] = {
    "base_url": http_base_url,
    "api_key": _text,
    "model": _text,
    "side_model": _text,
    "selector": _choice("--selector", get_args(SelectorName)),
    "memory_dir": path_value,
    "memory_enabled": _bool("memory"),
    "max_session_turns": _positive_int("--max-session-turns"),
    "session_token_limit": _positive_int("--session-token-limit"),
    "max_turns": _positive_int("--max-turns", allow_zero=True),
    "output_format": _choice("--output-format", get_args(OutputFormat)),
    "store": _text,
    "namespace": _text,
    "recall_mode": _choice("--recall-mode", RECALL_MODES),
    "tools": _bool("--tools"),
    "extract": _bool("extract"),
    "event_log": path_value,
    "quarantine": _bool("quarantine"),
    # recall's budgets
    "recall_files": _positive_int("recall_files"),
    "instant_files": _positive_int("instant_files", allow_zero=True),
    "recall_session_bytes": _positive_int("recall_session_bytes", allow_zero=True),
    "recall_file_chars": _positive_int("recall_file_chars"),
    "recall_file_lines": _positive_int("recall_file_lines"),
    "manifest_files": _positive_int("manifest_files"),
    "manifest_bytes": _positive_int("manifest_bytes"),
    "skip_trivial": _bool("skip_trivial"),
    "semantic_instant": _bool("semantic_instant"),
    "otel": _bool("otel"),
}

# Environment variables, first set wins.
ENV_VARIABLES: dict[str, tuple[str, ...]] = {
    "base_url": ("ASYNCRECALL_BASE_URL", "OPENAI_BASE_URL"),
    "api_key": ("ASYNCRECALL_API_KEY", "OPENAI_API_KEY"),
    "model": ("ASYNCRECALL_MODEL",),
    "side_model": ("ASYNCRECALL_SIDE_MODEL",),
    "selector": ("ASYNCRECALL_SELECTOR",),
    "memory_dir": ("ASYNCRECALL_MEMORY_DIR",),
    "memory_enabled": ("ASYNCRECALL_MEMORY",),
    "store": ("ASYNCRECALL_STORE",),
    "namespace": ("ASYNCRECALL_NAMESPACE",),
    "extract": ("ASYNCRECALL_EXTRACT",),
    "event_log": ("ASYNCRECALL_EVENT_LOG",),
    "quarantine": ("ASYNCRECALL_QUARANTINE",),
    # recall's budgets
    "recall_files": ("ASYNCRECALL_RECALL_FILES",),
    "instant_files": ("ASYNCRECALL_INSTANT_FILES",),
    "recall_session_bytes": ("ASYNCRECALL_RECALL_SESSION_BYTES",),
    "recall_file_chars": ("ASYNCRECALL_RECALL_FILE_CHARS",),
    "recall_file_lines": ("ASYNCRECALL_RECALL_FILE_LINES",),
    "manifest_files": ("ASYNCRECALL_MANIFEST_FILES",),
    "manifest_bytes": ("ASYNCRECALL_MANIFEST_BYTES",),
    "skip_trivial": ("ASYNCRECALL_SKIP_TRIVIAL",),
    "semantic_instant": ("ASYNCRECALL_SEMANTIC_INSTANT",),
    "otel": ("ASYNCRECALL_OTEL",),
}


#: Each setting's default, for the keys that have a plain one.
DEFAULTS: Final[Mapping[str, Any]] = {
    f.name: f.default for f in fields(Settings) if f.default is not MISSING
}

"""Writing asyncrecall's hooks into an agent's settings file, and taking them out.

Claude Code and Qwen Code read the same settings shape::

    {"hooks": {"UserPromptSubmit": [{"matcher": "", "hooks": [{"type": "command",
                                                              "command": "..."}]}]}}

Installing merges our entries into what is there (every other key and every other hook
is kept as it was) and writes the file atomically (a temporary file in the same folder,
then a rename), so an agent reading it never sees half a file. An entry is ours when
its command runs our hook client (:data:`MARKER`); uninstalling removes exactly those,
and the groups and events they leave empty.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from asyncrecall._exceptions import ConfigError

__all__ = [
    "AGENTS",
    "CLIENTS",
    "EVENTS",
    "MARKER",
    "Agent",
    "Client",
    "HookStatus",
    "hook_command",
    "install",
    "settings_path",
    "status",
    "uninstall",
]

Agent = Literal["claude-code", "qwen-code"]
AGENTS: Final[tuple[Agent, ...]] = ("claude-code", "qwen-code")

#: The hook events we install, each with the client's argument and the hook's timeout
#: in seconds (the agent kills a hook that runs longer; ours answer in milliseconds).
EVENTS: Final[tuple[str, ...]] = (
    "SessionStart",
    "UserPromptSubmit",
    "PostToolUse",
    "Stop",
    "SessionEnd",
)
#: Events whose hook has nothing to say to the model, run in the background (both agents'
#: ``async``): the start only warms the service, so it need not hold the first request.
_BACKGROUND: Final = frozenset({"SessionStart"})
#: The tool events take a matcher; ``*`` matches every tool.
_TOOL_EVENTS: Final = frozenset({"PostToolUse"})
_TIMEOUT_S: Final = 5

#: What a command of ours contains: the path of a hook client inside the package (the
#: Perl one, ``_client.pl``, or the Python one, ``_client.py``).
MARKER: Final = str(Path("asyncrecall", "cli", "hooks", "_client."))

Client = Literal["auto", "perl", "python"]
CLIENTS: Final[tuple[Client, ...]] = ("auto", "perl", "python")

_FOLDERS: Final[dict[Agent, str]] = {"claude-code": ".claude", "qwen-code": ".qwen"}


def settings_path(agent: Agent, *, user: bool, project: Path, home: Path | None = None) -> Path:
    """The agent's settings file: the user's (``~/.claude/settings.json``,
    ``~/.qwen/settings.json``) or the project's (``<project>/.claude/settings.json``)."""
    base = (home or Path.home()) if user else project
    return base / _FOLDERS[agent] / "settings.json"


def hook_command(event: str, agent: Agent, client: Client = "auto") -> str:
    """The command the agent runs for ``event``. ``perl`` (``auto``: when a ``perl`` is on
    ``PATH``): the Perl client, which starts in a few milliseconds and hands what it cannot
    do to the Python one; ``python``: this interpreter, isolated and without ``site``, on
    the Python client."""
    folder = Path(__file__).resolve().parent
    perl = shutil.which("perl") if client != "python" else None
    if client == "perl" and perl is None:
        raise ConfigError("no perl on PATH: install it, or use --client python")
    if perl is not None:
        return shlex.join([perl, str(folder / "_client.pl"), agent, event, sys.executable])
    return shlex.join([sys.executable, "-I", "-S", str(folder / "_client.py"), agent, event])


def _current(event: str, agent: Agent) -> set[str]:
    """The commands this installation writes for ``event`` (either client)."""
    commands = {hook_command(event, agent, "python")}
    if shutil.which("perl"):
        commands.add(hook_command(event, agent, "perl"))
    return commands


def _ours(hook: object) -> bool:
    return isinstance(hook, dict) and MARKER in str(hook.get("command", ""))


@dataclass(frozen=True, slots=True)
class HookStatus:
    """What a settings file holds of ours: the events hooked, and whether each
    command is the one this installation would write (``current``)."""

    path: Path
    exists: bool
    events: tuple[str, ...]
    current: bool


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}): fix or move it first") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object: fix or move it first")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise ConfigError(f"{path}: its 'hooks' is not an object: fix or move it first")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, temporary = tempfile.mkstemp(prefix=".settings.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=2, ensure_ascii=False)
            file.write("\n")
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _without_ours(hooks: dict[str, Any]) -> dict[str, Any]:
    """``hooks`` with our commands removed, and the groups and events left empty by it."""
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept[event] = groups
            continue
        left = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                left.append(group)
                continue
            remaining = [hook for hook in inner if not _ours(hook)]
            if remaining:
                left.append({**group, "hooks": remaining})
            elif len(remaining) == len(inner):
                left.append(group)  # a group that was empty before: not ours to drop
        if left or not groups:
            kept[event] = left
    return kept


def install(path: Path, agent: Agent, client: Client = "auto") -> HookStatus:
    """Merge our hooks into the settings file at ``path`` (replacing older ones of ours)."""
    data = _read(path)
    hooks = _without_ours(data.get("hooks") or {})
    for event in EVENTS:
        hook: dict[str, Any] = {
            "type": "command",
            "command": hook_command(event, agent, client),
            "timeout": _TIMEOUT_S,
        }
        if event in _BACKGROUND:
            hook["async"] = True
        group: dict[str, Any] = {"hooks": [hook]}
        if event in _TOOL_EVENTS:
            group = {"matcher": "*", **group}
        groups = hooks.get(event)
        hooks[event] = [*groups, group] if isinstance(groups, list) else [group]
    data["hooks"] = hooks
    _write(path, data)
    return status(path, agent)


def uninstall(path: Path) -> bool:
    """Remove our hooks from the settings file at ``path``; whether any were there."""
    if not path.exists():
        return False
    data = _read(path)
    hooks = data.get("hooks")
    if not hooks:
        return False
    kept = _without_ours(hooks)
    if kept == hooks:
        return False
    if kept:
        data["hooks"] = kept
    else:
        del data["hooks"]
    _write(path, data)
    return True


def status(path: Path, agent: Agent) -> HookStatus:
    """Which of our hooks the settings file at ``path`` holds."""
    data = _read(path) if path.exists() else {}
    found: list[str] = []
    current = True
    for event, groups in (data.get("hooks") or {}).items():
        for group in groups if isinstance(groups, list) else ():
            for hook in group.get("hooks", ()) if isinstance(group, dict) else ():
                if _ours(hook):
                    found.append(event)
                    current = current and hook.get("command") in _current(event, agent)
    return HookStatus(
        path=path,
        exists=path.exists(),
        events=tuple(dict.fromkeys(found)),
        current=current and set(found) == set(EVENTS),
    )

"""``asyncrecall hooks``: zero-wait recall inside Claude Code and Qwen Code.

``install`` writes command hooks into the agent's settings (``SessionStart``,
``UserPromptSubmit``, ``PostToolUse``, ``Stop``, ``SessionEnd``); each runs the hook
client (``_client.py``: a few built-in modules, answering in milliseconds), which asks
the per-user recall service (``_service.py``) over a Unix socket. ``uninstall`` removes
only those entries; ``status`` says what is installed and whether the service runs.

Exit codes: 0 done (``status``: our hooks are installed, as this installation writes
them); 1 ``status`` finds them missing or from another installation, or a file could not
be written; 2 bad usage, or a settings file that is not valid JSON (nothing is written
then).
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any, cast

from asyncrecall.cli.hooks._install import (
    AGENTS,
    CLIENTS,
    Agent,
    Client,
    install,
    settings_path,
    status,
    uninstall,
)

__all__ = ["register"]


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    del common  # no endpoint or agent flags: the hooks take the agent's environment
    parser = subparsers.add_parser(
        "hooks",
        help="recall inside Claude Code or Qwen Code, through their hooks",
        description="Install asyncrecall's hooks in Claude Code or Qwen Code: memory on the "
        "first request when it is ready at once, else with the tool results.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, summary in (
        ("install", "write the hooks into the agent's settings (merged with what is there)"),
        ("uninstall", "remove asyncrecall's hooks (and nothing else) from the settings"),
        ("status", "say whether the hooks are installed and the recall service runs"),
    ):
        sub = actions.add_parser(action, help=summary, description=summary)
        sub.add_argument("--agent", choices=AGENTS, required=True)
        where = sub.add_mutually_exclusive_group()
        where.add_argument("--user", action="store_true", help="the user's settings (the default)")
        where.add_argument(
            "--project",
            nargs="?",
            const=".",
            metavar="DIR",
            help="the project's settings (.claude/ or .qwen/ in DIR, default: here)",
        )
        if action == "install":
            sub.add_argument(
                "--client",
                choices=CLIENTS,
                default="auto",
                help="the hook client: perl (starts in a few milliseconds), python, or auto "
                "(perl when there is one on PATH, the default)",
            )
        sub.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    agent = cast(Agent, args.agent)
    project = Path(args.project or ".").expanduser().resolve()
    path = settings_path(agent, user=args.project is None, project=project)
    if args.action == "install":
        found = install(path, agent, cast(Client, args.client))
        _say(f"installed {agent} hooks in {path}: {', '.join(found.events)}")
        return 0
    if args.action == "uninstall":
        removed = uninstall(path)
        _say(f"removed {agent} hooks from {path}" if removed else f"no asyncrecall hooks in {path}")
        return 0
    found = status(path, agent)
    running = _service_running()
    service = "the recall service is running" if running else "the recall service is not running"
    if not found.events:
        _say(f"not installed in {path}; {service}")
        return 1
    if not found.current:
        _say(
            f"installed in {path} by another installation or partly "
            f"({', '.join(found.events)}): run install again; {service}"
        )
        return 1
    _say(f"installed in {path}: {', '.join(found.events)}; {service}")
    return 0


def _service_running() -> bool:
    from asyncrecall.cli.hooks._service import socket_path

    path = socket_path()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")

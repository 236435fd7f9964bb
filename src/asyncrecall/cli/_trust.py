"""``asyncrecall trust``: let a folder's own ``.asyncrecall/settings.toml`` apply.

A project's settings file is its author's until the user trusts it (what applies
before: :mod:`asyncrecall.cli._settings`). ``trust`` records the file's content (SHA-256)
under its resolved path in ``$ASYNCRECALL_HOME/trusted.json``
(:mod:`asyncrecall.cli._trust_store`); any edit makes it untrusted again. ``--revoke`` forgets
it; ``--status`` says where it stands, first word ``trusted``, ``changed``,
``untrusted`` or ``none``.

Exit codes: 0 done (``--status``: trusted, or no settings file); 1 (``--status`` only)
untrusted, or changed since trusted; 2 bad usage, or a settings file that cannot be
read or holds an invalid setting (nothing is recorded then).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._settings import (
    SettingsFile,
    home_folder,
    load_settings,
    project_settings_file,
    trust_command,
)
from asyncrecall.cli._trust_store import content_hash, record_trust, revoke_trust, trust_state

__all__ = ["register"]


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    del common  # no endpoint, memory or agent flags apply
    parser = subparsers.add_parser(
        "trust",
        help="let this folder's .asyncrecall/settings.toml apply",
        description="Trust the project's .asyncrecall/settings.toml as it is now: until "
        "then only its output format, recall mode and narrower limits apply. An edit "
        "needs trust again.",
    )
    parser.add_argument("--project", metavar="DIR", help="project root (default: current folder)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--revoke", action="store_true", help="forget the trust in this folder")
    what.add_argument(
        "--status",
        action="store_true",
        help="say whether the file is trusted, changed since, or untrusted (exit 1 if not trusted)",
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    project = Path(args.project or ".").expanduser().resolve()
    if not project.is_dir():
        raise ConfigError(f"project folder {project} does not exist")
    home = home_folder()
    path = project_settings_file(project, home)
    if path is None:
        _say(f"none: {home / 'settings.toml'} is your own settings file: it always applies")
        return 0
    if args.revoke:
        done = revoke_trust(home, path)
        _say(f"{'no longer trusted' if done else 'was not trusted'}: {path}")
        return 0
    found = SettingsFile.read(path)
    if args.status:
        return _status(home, project, path, found)
    if found is None:
        raise ConfigError(f"no settings file at {path}: nothing to trust")
    found.validate()
    ignored = _ignored(project)
    record_trust(home, path, found.data)
    sets = f"its {', '.join(ignored)} now apply" if ignored else "nothing of it was ignored"
    _say(f"trusted: {path} (sha256 {content_hash(found.data)[:12]}); {sets}")
    return 0


def _ignored(project: Path) -> tuple[str, ...]:
    """The keys of ``project``'s settings file ignored as things stand."""
    untrusted = load_settings({"project": str(project)}).untrusted
    return untrusted.ignored if untrusted is not None else ()


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")


def _status(home: Path, project: Path, path: Path, found: SettingsFile | None) -> int:
    if found is None:
        _say(f"none: no settings file at {path}")
        return 0
    state = trust_state(home, path, found.data)
    if state == "trusted":
        _say(f"trusted: {path}")
        return 0
    ignored = _ignored(project)
    what = f"ignored until trusted: {', '.join(ignored)}" if ignored else "nothing ignored"
    why = "changed since you trusted it; " if state == "changed" else ""
    _say(f"{state}: {path} ({why}{what}; to trust it: {trust_command(project)})")
    return 1

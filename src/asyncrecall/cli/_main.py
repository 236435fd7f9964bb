"""Entry point of the ``asyncrecall`` command.

Each command lives in its own module exposing ``register(subparsers, common)``; the
parser it adds sets ``handler``, a function ``(args) -> int`` returning the exit code.
Exit codes: 0 success; 1 a model, endpoint or memory error, or an empty answer; 2 bad
usage or configuration; 3 a query stopped before an answer (loop detected, a limit);
130 interrupted or cancelled; 128 + N ended by signal N (129 ``SIGHUP``, 143
``SIGTERM``: what ``run`` or ``chat`` owed is handed on first; 141 ``run`` or ``chat``
whose output was closed early, as by ``| head``, see ``cli._render``). A failure prints
one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any, NoReturn

from asyncrecall import __version__
from asyncrecall._exceptions import AsyncRecallError, ConfigError
from asyncrecall.cli._common import (
    common_parser,
    end_process,
    pause_collection,
    redacted,
    resume_collection,
)
from asyncrecall.cli._reader import start_reading_memory
from asyncrecall.cli._signals import die_cleanly

__all__ = ["main"]

# Command modules, imported only when chosen: `asyncrecall memory list` does not pay for the agent.
_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("run", "asyncrecall.cli._run", "one user query, headless"),
    ("chat", "asyncrecall.cli._chat", "interactive session (one query per line when piped)"),
    ("memory", "asyncrecall.cli._memory", "the memory folder of the current project"),
    ("demo", "asyncrecall.cli._demo", "offline demo: blocking vs async recall"),
    ("bench", "asyncrecall.cli._bench", "benchmarks: latency, quality, overhead"),
    ("mcp", "asyncrecall.cli._mcp", "serve the memory store to MCP clients (stdio, or --http)"),
    ("trust", "asyncrecall.cli._trust", "let this folder's .asyncrecall/settings.toml apply"),
)


def _chosen(argv: Sequence[str]) -> str | None:
    """The command named on the command line (its first word that is not a flag)."""
    return next((a for a in argv if not a.startswith("-")), None)


class _Parser(argparse.ArgumentParser):
    """A parser that takes no abbreviated flags (``--mem`` for ``--memory-dir``): the
    early reader of the memory folder (``asyncrecall.cli._reader``) reads flags by their
    full names, and the two must agree on what the command line says. Its
    sub-commands' parsers are of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


def _build_parser(wanted: str | None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="asyncrecall",
        description="An agent with long-term memory whose recall never adds latency.",
    )
    parser.add_argument("--version", action="version", version=f"asyncrecall {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = common_parser()
    for name, module_name, summary in _COMMANDS:
        if name == wanted:
            register: Callable[..., None] = import_module(module_name).register
            register(subparsers, common)
        else:
            # Only the chosen command is imported: `--version`, `--help` and a typo
            # stay instant (the agent and the OpenAI SDK cost about a second).
            subparsers.add_parser(name, help=summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code. Called without ``argv`` (the
    ``asyncrecall`` command, ``python -m asyncrecall``), ``run`` and ``chat`` end the
    process themselves, as soon as the answer is complete (see :func:`end_process`)."""
    if argv is None:
        if _chosen(sys.argv[1:]) in _SESSION_COMMANDS:
            die_cleanly()  # until the session's loop bridges the signals (cli._signals)
        end_process(_main(sys.argv[1:]))
    return _main(argv)


def _main(argv: Sequence[str]) -> int:
    argv = list(argv)
    command = _chosen(argv)
    if command in _SESSION_COMMANDS:
        pause_collection()  # resumed once the session is built
    try:
        return _command(argv, command)
    finally:
        resume_collection()  # every way out before that, and main(argv) from Python


class _Quiet(_Parser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def _run_question(argv: list[str]) -> str | None:
    """``run``'s question when it is on the command line (not ``-``: standard input),
    read with the command's own flags; ``None`` when unclear (the command reports it)."""
    parser = _Quiet(add_help=False, parents=[common_parser()])
    parser.add_argument("command")
    parser.add_argument("prompt", nargs="?")
    try:
        args, _ = parser.parse_known_args(argv)
    except (ValueError, argparse.ArgumentError):
        return None
    prompt = args.prompt
    return prompt if isinstance(prompt, str) and prompt != "-" else None


#: The commands that build an agent session (and import the OpenAI SDK to do it).
_SESSION_COMMANDS = frozenset({"run", "chat"})


def _command(argv: list[str], command: str | None) -> int:
    # Before the command's imports (the OpenAI SDK: about half a second): the memory
    # folder is read meanwhile, in a thread, or with run's question in a reader process
    # (see asyncrecall.cli._reader).
    start_reading_memory(argv, _run_question(argv) if command == "run" else None)
    parser = _build_parser(command)
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return handler(args)
    except ConfigError as exc:
        sys.stderr.write(f"asyncrecall: {redacted(str(exc))}\n")
        return 2
    except AsyncRecallError as exc:
        sys.stderr.write(f"asyncrecall: {redacted(str(exc))}\n")
        return 1
    except OSError as exc:  # a file or socket refused outside the library's own errors
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"asyncrecall: {exc.strerror or exc}{where}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("asyncrecall: interrupted\n")
        return 130

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
from typing import Any

from asyncrecall import __version__
from asyncrecall._exceptions import AsyncRecallError, ConfigError
from asyncrecall.cli._common import (
    common_parser,
    end_process,
    pause_collection,
    quiet_output,
    redacted,
    resume_collection,
    settings_from_args,
)
from asyncrecall.cli._reader import start_reading_memory
from asyncrecall.cli._signals import EXIT_OUTPUT_CLOSED, die_cleanly

__all__ = ["main"]

# Command modules, imported only when chosen: `asyncrecall memory list` does not pay for
# the agent. A module's own import is light (its ``register``); what its handler runs
# (the session, the agent, the OpenAI SDK) is imported when the handler runs.
_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("run", "asyncrecall.cli._run", "one user query, headless"),
    ("chat", "asyncrecall.cli._chat", "interactive session (one query per line when piped)"),
    ("memory", "asyncrecall.cli._memory", "the memory folder of the current project"),
    ("demo", "asyncrecall.cli._demo", "offline demo: blocking vs async recall"),
    ("bench", "asyncrecall.cli._bench", "benchmarks: latency, quality, overhead"),
    ("mcp", "asyncrecall.cli._mcp", "serve the memory store to MCP clients (stdio, or --http)"),
    ("console", "asyncrecall.cli._console", "your memories in a local web page"),
    ("trust", "asyncrecall.cli._trust", "let this folder's .asyncrecall/settings.toml apply"),
    ("hooks", "asyncrecall.cli.hooks", "recall inside Claude Code or Qwen Code (their hooks)"),
)


def _chosen(argv: Sequence[str]) -> str | None:
    """The command named on the command line (its first word that is not a flag)."""
    return next((a for a in argv if not a.startswith("-")), None)


class _Parser(argparse.ArgumentParser):
    """A parser that takes no abbreviated flags (``--mem`` for ``--memory-dir``): a flag
    is spelled out, so a later flag can never change what an earlier command line
    meant. Its sub-commands' parsers are of this class too."""

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


#: The commands that build an agent session (and import the OpenAI SDK to do it).
_SESSION_COMMANDS = frozenset({"run", "chat"})


def _command(argv: list[str], command: str | None) -> int:
    parser = _build_parser(command)
    args = parser.parse_args(argv)  # the one reading of the command line
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        if command in _SESSION_COMMANDS:
            _read_ahead(args, command)
        return handler(args)
    except ConfigError as exc:
        sys.stderr.write(f"asyncrecall: {redacted(str(exc))}\n")
        return 2
    except AsyncRecallError as exc:
        sys.stderr.write(f"asyncrecall: {redacted(str(exc))}\n")
        return 1
    except BrokenPipeError:  # the output's reader went away (| head): quiet, as run is
        quiet_output(sys.stdout)
        return EXIT_OUTPUT_CLOSED
    except OSError as exc:  # a file or socket refused outside the library's own errors
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"asyncrecall: {exc.strerror or exc}{where}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("asyncrecall: interrupted\n")
        return 130


def _read_ahead(args: argparse.Namespace, command: str) -> None:
    """Before the command's imports (the OpenAI SDK: about half a second): the memory
    folder is read meanwhile, in a thread, or with run's question in a reader process
    (see :mod:`asyncrecall.cli._reader`). The settings resolved here are the command's
    (:func:`settings_from_args` resolves them once)."""
    prompt = getattr(args, "prompt", None) if command == "run" else None
    question = prompt if isinstance(prompt, str) and prompt != "-" else None
    start_reading_memory(settings_from_args(args), question)

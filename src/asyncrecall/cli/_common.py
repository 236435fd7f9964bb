"""The shared flags, grouped by what they are for, and how they become :class:`Settings`.

:func:`settings_from_args` also prints the one warning of a project settings file
whose keys were ignored (not trusted), and remembers the configured API
key so that :func:`redacted` takes it out of every error line the command prints.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from asyncrecall._redact import redact
from asyncrecall.cli._settings import Settings, load_settings
from asyncrecall.cli._signals import EXIT_OUTPUT_CLOSED

__all__ = [
    "agent_flags",
    "common_parser",
    "end_process",
    "endpoint_flags",
    "exit_soon",
    "folder_flags",
    "pause_collection",
    "quiet_output",
    "redacted",
    "resume_collection",
    "settings_from_args",
    "stdout_console",
    "store_flags",
    "user_waits",
]


def common_parser() -> argparse.ArgumentParser:
    """A parent parser with every shared flag (``run``, ``chat``, ``bench``), placed after
    the command's name. Commands for which only some make sense take those parents
    instead: :func:`folder_flags`, :func:`endpoint_flags`, :func:`agent_flags`."""
    return argparse.ArgumentParser(
        add_help=False, parents=[endpoint_flags(), folder_flags(memory=True), agent_flags()]
    )


def endpoint_flags() -> argparse.ArgumentParser:
    """The endpoint and the recall's selector (``run``, ``chat``, ``memory recall``)."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("endpoint")
    group.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint")
    group.add_argument("--api-key", metavar="KEY", help="API key (local servers accept any)")
    group.add_argument("--model", metavar="NAME", help="main model")
    group.add_argument(
        "--side-model", metavar="NAME", help="model for the recall side query (default: --model)"
    )
    group.add_argument(
        "--selector",
        choices=["model", "lexical", "embedding", "hybrid"],
        help="how recall picks memory files",
    )
    return parser


def folder_flags(*, memory: bool = False) -> argparse.ArgumentParser:
    """Which memory folder applies (every command that touches memory); with ``memory``,
    also ``--no-memory`` (commands that recall)."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("memory folder")
    group.add_argument("--memory-dir", metavar="DIR", help="use this folder as the memory folder")
    if memory:
        group.add_argument(
            "--no-memory",
            dest="memory_enabled",
            action="store_const",
            const=False,
            default=None,
            help="no recall, no memory prompt, no memory tool",
        )
    group.add_argument("--project", metavar="DIR", help="project root (default: current folder)")
    return parser


def store_flags() -> argparse.ArgumentParser:
    """A database store instead of the folder (``memory``, ``mcp``, ``console``, ``run``,
    ``chat``): ``--store``, ``--namespace``; read back by :func:`settings_from_args`."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("database store")
    group.add_argument(
        "--store",
        metavar="URL",
        help="keep memories in this PostgreSQL database (postgresql://...; "
        "default: ASYNCRECALL_STORE, else the memory folder)",
    )
    group.add_argument(
        "--namespace",
        metavar="NAME",
        help="the database store's namespace (default: the project's root folder)",
    )
    return parser


def agent_flags() -> argparse.ArgumentParser:
    """Limits, output and recall mode of the agent (``run``, ``chat``)."""
    parser = argparse.ArgumentParser(add_help=False)
    limits = parser.add_argument_group("limits and output")
    limits.add_argument("--max-session-turns", type=int, metavar="N", help="session turn limit")
    limits.add_argument(
        "--session-token-limit", type=int, metavar="N", help="stop when a prompt exceeds N tokens"
    )
    limits.add_argument(
        "--max-turns", type=int, metavar="N", help="model turns per user query (default 100)"
    )
    limits.add_argument(
        "--output-format", choices=["text", "json", "stream-json"], help="output of run and chat"
    )
    limits.add_argument(
        "--recall-mode",
        choices=["async", "blocking", "async+wait100", "async+lexical"],
        help="async+lexical (default: the design plus an instant lexical pass), async (the "
        "design alone), blocking (the old design), or async+wait100",
    )
    limits.add_argument(
        "--tools",
        action="store_const",
        const=True,
        default=None,
        help="offer the tools even to the tiny embedded model (it gets none by default)",
    )
    limits.add_argument(  # background memory extraction
        "--no-extract",
        dest="extract",
        action="store_const",
        const=False,
        default=None,
        help="no background memory extraction after each query",
    )
    limits.add_argument(
        "--extract",
        dest="extract",
        action="store_const",
        const=True,
        help="extract memories even with the embedded model (default: only with an endpoint)",
    )
    limits.add_argument(
        "--event-log",
        metavar="FILE",
        help="append the recall's events to FILE as JSON lines (asyncrecall console reads it)",
    )
    return parser


_SETTING_FLAGS = (
    "base_url",
    "api_key",
    "model",
    "side_model",
    "selector",
    "memory_dir",
    "memory_enabled",
    "project",
    "max_session_turns",
    "session_token_limit",
    "max_turns",
    "output_format",
    "store",
    "namespace",
    "recall_mode",
    "tools",
    "extract",
    "event_log",
)


def settings_from_args(args: argparse.Namespace, *, cwd: Path | None = None) -> Settings:
    """Resolve settings from parsed flags, the environment and settings files; warn (one
    line on stderr) of project settings that were ignored. Resolved once per parsed
    command line: a second call (the command's, after the entry's read-ahead) returns
    the same settings and warns no more."""
    resolved = getattr(args, _RESOLVED, None)
    if isinstance(resolved, Settings) and cwd is None:
        return resolved
    flags: dict[str, Any] = {name: getattr(args, name, None) for name in _SETTING_FLAGS}
    key = flags.get("api_key")
    if isinstance(key, str):
        _SECRETS.add(key)  # before anything can fail: a bad setting's line is redacted too
    settings = load_settings(flags, cwd=cwd)
    if settings.api_key:
        _SECRETS.add(settings.api_key)
    if settings.untrusted is not None:
        sys.stderr.write(f"asyncrecall: {settings.untrusted.warning()}\n")
        sys.stderr.flush()
    if cwd is None:
        setattr(args, _RESOLVED, settings)
    return settings


#: Where :func:`settings_from_args` keeps what it resolved on the parsed command line.
_RESOLVED = "_asyncrecall_settings"


#: The API keys this process was configured with (see :func:`redacted`).
_SECRETS: set[str] = set()


def redacted(text: str) -> str:
    """``text`` fit to print: without the configured API key and anything shaped like a
    key (see :func:`asyncrecall._redact.redact`). Every error line of the command line,
    and the error fields of its ``json`` and ``stream-json`` output, pass here."""
    for variable in ("ASYNCRECALL_API_KEY", "OPENAI_API_KEY"):
        if value := os.environ.get(variable):
            _SECRETS.add(value)
    return redact(text, _SECRETS)


@contextlib.contextmanager
def user_waits(settings: Settings) -> Iterator[None]:
    """The user waits for what is sent to the endpoint inside: background work of ours
    on it (the extraction worker an earlier command handed on) is not sent meanwhile,
    and what of it is out gives way (``models._traffic``: foreground)."""
    if not settings.base_url:
        yield
        return
    from asyncrecall.models._traffic import traffic

    with traffic(settings.base_url).foreground():
        yield


def exit_soon() -> None:
    """Let the process end without the interpreter's last collection (``run``, ``chat``).

    At exit CPython collects every object the ~1,000 modules of the agent and the OpenAI
    SDK made: a wait the user sees, after the answer is complete. Frozen objects are
    skipped (the process frees its memory by ending), and the exit is a small fraction
    of that.
    Call it only when the process is about to end: nothing is collected afterwards.
    The command line's own process then ends through :func:`end_process`.
    """
    gc.freeze()
    _ENDING["soon"] = True


_ENDING: dict[str, bool] = {"soon": False}


def pause_collection() -> None:
    """No cyclic garbage collection while ``run`` or ``chat`` imports and builds its
    session, until :func:`resume_collection`.

    Those imports (about 1,100 modules: the agent, the OpenAI SDK) and the models'
    clients set off some 230 collections that find next to nothing, a share of the
    imports' time worth saving, with memory on or off (measured with ``gc.callbacks``
    timing every collection while ``asyncrecall.cli._run``, ``asyncrecall.cli._session``
    and ``asyncrecall.models`` import and ``open_openai_models`` runs).
    """
    if gc.isenabled():
        gc.disable()
        _PAUSED["gc"] = True


def resume_collection() -> None:
    """Collect again, skipping every object that exists now (frozen: the modules and the
    session live as long as the process). Does nothing unless paused."""
    if _PAUSED.pop("gc", False):
        gc.freeze()
        gc.enable()


_PAUSED: dict[str, bool] = {}


def quiet_output(out: Any) -> None:
    """Point ``out``'s descriptor at the null device once its reader went away: what is
    still buffered in it, and the interpreter's last flush, go nowhere instead of
    failing again on stderr."""
    with contextlib.suppress(Exception):
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, out.fileno())
        finally:
            os.close(null)


def stdout_console(**options: Any) -> Any:
    """A rich console on standard output whose reader going away (``| head``) ends the
    command quietly with exit status 141, as ``run`` does (rich's own exits 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            quiet_output(sys.stdout)
            raise SystemExit(EXIT_OUTPUT_CLOSED)

    return _Console(**options)


def end_process(code: int) -> NoReturn:
    """End the command line's process with ``code`` once :func:`exit_soon` was called,
    doing what the interpreter's exit does for others (threads joined, ``atexit``
    handlers such as logging's and coverage's run, output flushed) and skipping its
    teardown of the modules: more CPU after the answer, for nothing. Any
    other command returns through ``sys.exit`` as usual."""
    if not _ENDING["soon"]:
        sys.exit(code)
    shutdown = getattr(threading, "_shutdown", None)  # what Py_FinalizeEx calls first
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # closed, or a broken pipe
            stream.flush()
    os._exit(code)

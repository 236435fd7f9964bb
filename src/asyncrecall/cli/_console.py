"""``asyncrecall console``: the memory store in the browser, on this machine.

A local web page over the store the other commands use (the memory folder, or
``--store``'s PostgreSQL namespace): the memories (search, filters, one memory with its
provenance and its history as diffs, revert in one click), the held inbox (confirm or
discard), recall traces from the event log (``--event-log``, ``cli._event_log``) and
the benchmarks' figures (``--figures DIR``). It listens on ``--host``:``--port``
(127.0.0.1, port chosen by the system with ``--port 0``) and answers only the holder of
the token in the URL it prints, through a loopback host name (``console._guard``).
Needs ``pip install 'asyncrecall[console]'``; without it, one line saying so and exit 2.
"""

from __future__ import annotations

import argparse
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._common import folder_flags, settings_from_args, store_flags
from asyncrecall.cli._telemetry import metrics_route, telemetry_for

__all__ = ["DEFAULT_PORT", "MISSING", "register"]

#: ``--port``'s default (``asyncrecall mcp --http`` takes 8765).
DEFAULT_PORT = 8766
MISSING = "asyncrecall console needs its extra: pip install 'asyncrecall[console]'"


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    del common  # the agent's limits and output format do not apply
    parser = subparsers.add_parser(
        "console",
        parents=[folder_flags(), store_flags()],
        help="your memories in a local web page",
        description="Serve a local web page over the memory store: search and read "
        "memories, their provenance and history, revert a write, confirm or discard held "
        "memories, see recall traces and benchmark figures. Only the URL it prints (with "
        "its token) opens it.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"the port ({DEFAULT_PORT}; 0: any free)"
    )
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument(
        "--event-log", metavar="FILE", help="the event log to show traces from (run --event-log)"
    )
    parser.add_argument(
        "--figures",
        metavar="DIR",
        help="the folder of benchmark figures to show (bench latency|recall --plot FILE)",
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from asyncrecall.cli.console import Console, create_app
    except ImportError as exc:
        raise ConfigError(f"{MISSING} ({exc})") from exc
    from asyncrecall.cli._memory import log_warnings_to_stderr
    from asyncrecall.cli._memory_config import open_memory_store

    settings = settings_from_args(args)
    figures = Path(args.figures).expanduser() if args.figures else None
    if figures is not None and not figures.is_dir():
        raise ConfigError(f"--figures: {figures} is not a folder")
    listener = _listen(args.host, args.port)
    log_warnings_to_stderr()
    store = open_memory_store(settings)
    token = secrets.token_urlsafe(24)
    console = Console(store=store, token=token, event_log=settings.event_log, figures=figures)
    with telemetry_for(settings, prometheus=True) as telemetry:
        # Endpoints beside the pages, behind the same Host and token checks (a program
        # sends the token as ``Authorization: Bearer``): Prometheus's, with the otel extra.
        routes: list[Any] = [metrics_route()] if telemetry is not None else []
        app = create_app(console, host=args.host, routes=routes)
        port = listener.getsockname()[1]
        url = f"http://{_shown(args.host)}:{port}/?token={token}"
        sys.stderr.write(f"asyncrecall console on {store.location}: {url}\n(Ctrl-C stops)\n")
        sys.stderr.flush()
        if not args.no_browser:
            import webbrowser

            webbrowser.open(url)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        try:
            uvicorn.Server(config).run(sockets=[listener])
        finally:
            listener.close()
            store.close()
    return 0


def _shown(host: str) -> str:
    """``host`` as it goes in a URL (the loopback's name for an any-address)."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port``; a :class:`ConfigError` (exit 2) when it
    cannot be had (in use, not an address of this machine, a privileged port)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}; pass --host ADDRESS") from exc
    family, kind, proto, _name, address = infos[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(128)
    except OSError as exc:
        listener.close()
        reason = (exc.strerror or str(exc)).lower()
        raise ConfigError(f"cannot listen on {host}:{port}: {reason}; pass --port N") from exc
    return listener

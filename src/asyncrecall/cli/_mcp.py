"""``asyncrecall mcp``: the memory store as a Model Context Protocol server.

Serves the project's memory folder (or ``--store``'s PostgreSQL namespace) to any MCP
client, over stdio (the default: the client starts this command) or streamable HTTP
(``--http``, on ``--host``:``--port``, path ``/mcp``). A client's writes are untrusted
unless ``--trust-client`` (see :func:`~asyncrecall.mcp_server.memory_server`). ``search``
recalls as the agent does, with the selector the settings name (``memory recall`` shows
the same). Needs ``pip install 'asyncrecall[mcp]'``. See :mod:`asyncrecall.mcp_server`
and ``docs/mcp.md``.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import TYPE_CHECKING, Any

from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._common import (
    endpoint_flags,
    folder_flags,
    settings_from_args,
    store_flags,
)
from asyncrecall.cli._memory_config import build_memory_manager
from asyncrecall.cli._telemetry import METRICS_PATH, metrics_endpoint, telemetry_for

if TYPE_CHECKING:
    from asyncrecall.cli._settings import Settings

__all__ = ["register"]

#: ``--http``'s default port (the MCP SDK's own default, 8000, is a common dev server's).
DEFAULT_PORT = 8765


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    del common  # the agent's limits and output format do not apply
    parser = subparsers.add_parser(
        "mcp",
        parents=[endpoint_flags(), folder_flags(), store_flags()],
        help="serve the memory store to MCP clients (stdio, or --http)",
        description="Serve the memory store over the Model Context Protocol: search, "
        "show, list, save and forget. Stdio by default (an MCP client starts this command). "
        "A client's writes are someone else's unless --trust-client: what it saves is held "
        "(not recalled) until `asyncrecall memory confirm NAME`, a change to a memory you "
        "keep waits beside it for your confirm, and it may forget only held memories.",
    )
    parser.add_argument(
        "--trust-client",
        action="store_true",
        help="count the client's saves as your agent's save_memory (recalled at once, "
        "replacing what a name held); a held memory still stays held until you confirm it",
    )
    transport = parser.add_argument_group("transport")
    transport.add_argument(
        "--http", action="store_true", help="streamable HTTP instead of stdio (path /mcp)"
    )
    transport.add_argument(
        "--host", default="127.0.0.1", help="--http: the address to listen on (127.0.0.1)"
    )
    transport.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"--http: the port ({DEFAULT_PORT})"
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if not settings.memory_enabled:
        raise ConfigError(
            "memory is disabled (ASYNCRECALL_MEMORY=0 or memory = false): nothing to serve"
        )
    if args.http:
        _check_free(args.host, args.port)
    try:
        from asyncrecall.mcp_server import memory_server
    except ImportError as exc:
        raise ConfigError(
            f"asyncrecall mcp needs the MCP SDK: pip install 'asyncrecall[mcp]' ({exc})"
        ) from exc
    from asyncrecall.cli._memory import log_warnings_to_stderr

    log_warnings_to_stderr()
    with telemetry_for(settings, prometheus=args.http) as telemetry:
        served = telemetry is not None and telemetry.prometheus
        return _serve(args, settings, memory_server, metrics=served)


def _serve(
    args: argparse.Namespace, settings: Settings, memory_server: Any, *, metrics: bool
) -> int:
    import anyio

    from asyncrecall.cli._memory import side_model

    side = side_model(settings)
    manager = build_memory_manager(settings, side_model=side)
    manager.start_warming()
    app = memory_server(manager, trust_client=args.trust_client)
    if metrics:  # Prometheus scrapes the same port
        app.custom_route(METRICS_PATH, methods=["GET"])(metrics_endpoint)

    async def serve() -> None:
        try:
            if args.http:
                await app.run_streamable_http_async(host=args.host, port=args.port)
            else:
                await app.run_stdio_async()
        finally:
            close_side = getattr(side, "aclose", None)
            if close_side is not None:
                await close_side()

    if args.http:
        also = f"metrics on {_address(args.host, args.port, METRICS_PATH)}; " if metrics else ""
        sys.stderr.write(f"serving MCP on {_address(args.host, args.port)} ({also}Ctrl-C stops)\n")
        sys.stderr.flush()
    try:
        anyio.run(serve)
    except SystemExit as exc:  # the HTTP server could not start after all (a race for the port)
        raise ConfigError(f"cannot listen on {args.host}:{args.port}: pass --port N") from exc
    finally:
        manager.store.close()
    return 0


def _address(host: str, port: int, path: str = "/mcp") -> str:
    """The URL a client connects to."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


def _check_free(host: str, port: int) -> None:
    """A :class:`ConfigError` (exit 2) when ``host``:``port`` cannot be listened on (in
    use, not an address of this machine, a privileged port), before anything starts."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}; pass --host ADDRESS") from exc
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
        try:
            probe.bind(address)
            probe.listen()
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            raise ConfigError(
                f"cannot listen on {host}:{port}: {reason}; pass --port N (another port)"
            ) from exc

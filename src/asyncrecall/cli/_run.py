"""``asyncrecall run PROMPT``: one user query, headless.

A hang-up or ``SIGTERM`` while it runs cancels the query (its recall with it); one
after the answer no longer matters to it. Either way what the session owes is handed
on before the process ends, and the exit status says which signal it was (see
``cli._signals``). Output whose reader went away (``| head -1``) ends it quietly once
the query is done (see ``cli._render``).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TYPE_CHECKING, Any

from asyncrecall._cancel import CancelSignal
from asyncrecall.cli._common import (
    exit_soon,
    resume_collection,
    settings_from_args,
    store_flags,
    user_waits,
)
from asyncrecall.cli._signals import TERMINATING, bridge, exit_status
from asyncrecall.cli._telemetry import query_span, telemetry_for

if TYPE_CHECKING:
    from asyncrecall.cli._session import Session
    from asyncrecall.cli._settings import Settings

__all__ = ["register"]

# The session, the agent and the printer (the OpenAI SDK, rich) are imported when the
# command runs, after the entry has started reading the memory folder (``cli._main``).


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "run",
        parents=[common, store_flags()],
        help="one user query, headless",
        description="Run one user query. Read-only tools and save_memory run without asking.",
    )
    parser.add_argument("prompt", nargs="?", help="the query ('-' or none: read standard input)")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    prompt = args.prompt
    if prompt in (None, "-"):
        if sys.stdin is None or sys.stdin.isatty():
            sys.stderr.write("asyncrecall: run needs a PROMPT (or text on standard input)\n")
            return 2
        prompt = sys.stdin.read()
    if not prompt.strip():
        sys.stderr.write("asyncrecall: the prompt is empty\n")
        return 2
    # The user waits from here to the answer: an earlier command's extraction worker
    # keeps its side queries off the endpoint until this process ends.
    with telemetry_for(settings), user_waits(settings):
        # The session is built before the event loop runs: importing the OpenAI SDK
        # takes about half a second, which would otherwise block the loop.
        session = open_session(settings, handoff=True, hold_recall=True)
        resume_collection()  # the imports are done (see cli._main)
        if session.extraction is not None:
            # One query, then exit: its extraction goes straight to the worker process.
            session.extraction.deferred = True
        try:
            return asyncio.run(run_once(session, settings, prompt))
        finally:
            exit_soon()


def open_session(settings: Settings, **options: Any) -> Session:
    """:func:`asyncrecall.cli._session.open_session`, imported when the command runs."""
    from asyncrecall.cli._session import open_session as open_

    return open_(settings, **options)


async def run_once(session: Session, settings: Settings, prompt: str) -> int:
    """Run ``prompt`` through ``session``; on exit a pending recall is cancelled."""
    from rich.markup import escape

    from asyncrecall.cli._event_log import open_event_log
    from asyncrecall.cli._render import (
        EXIT_CANCELLED,
        EXIT_OUTPUT_CLOSED,
        EventPrinter,
        exit_code,
    )

    printer = EventPrinter(settings.output_format)
    log = open_event_log(settings.event_log)
    if session.notice:
        printer.err.print(f"[dim]· {escape(session.notice)}[/dim]")
    turn = CancelSignal()
    ended_by: list[int] = []

    def terminate(signum: int) -> None:
        if ended_by and signum == signal.SIGINT:
            raise KeyboardInterrupt  # Ctrl-C again: stop waiting for the turn to unwind
        ended_by.append(signum)
        printer.cancel_status = exit_status(signum)
        turn.cancel("user")

    # Ctrl-C too: the turn is cancelled and ends as every failed turn does (its result
    # or error event, then the exit status), rather than by an exception through it.
    unbridge = bridge(asyncio.get_running_loop(), (*TERMINATING, signal.SIGINT), terminate)
    try:
        await session.start()
        if not turn.cancelled:
            log.user_message(prompt)
            with query_span(settings.model) as ended:
                async for event in session.agent.run_query(prompt, cancel=turn):
                    printer.show(event)
                    log.record(event)  # queued: written by the log's thread
                ended(printer.error.message if printer.error is not None else None)
    finally:
        log.close()
        try:
            await session.aclose()  # hands on what is owed; a signal meanwhile ends nothing
        finally:
            unbridge()
    if ended_by:
        return exit_status(ended_by[0])
    if printer.output_closed:  # | head: the reader has what it wanted; quiet
        return EXIT_OUTPUT_CLOSED
    if printer.error is not None:
        sys.stderr.write(f"asyncrecall: {printer.error.message}\n")
        return exit_code(printer.error)
    if printer.cancelled:
        sys.stderr.write("asyncrecall: cancelled\n")
        return EXIT_CANCELLED
    return 0

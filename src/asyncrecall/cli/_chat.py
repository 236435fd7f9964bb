"""``asyncrecall chat``: an interactive session, or one query per line when piped.

Ctrl-C cancels the running turn, and the recall side query with it (the caller's
cancel signal is bridged to the prefetch). A second Ctrl-C at an empty prompt exits.
A hang-up (the terminal closed) or ``SIGTERM`` cancels the running turn and ends the
chat as end of input does: what background extraction owes is handed on, and the exit
status says which signal it was (see ``cli._signals``). On a loop without
``add_signal_handler`` (Windows) the signals reach it through ``signal.signal``.
Output whose reader went away (``| head``) ends the chat after the running turn, as
end of input would (see ``cli._render``).
Lines ``/reset`` and ``/exit`` reset the chat and leave. On a terminal, a banner names
the model and the memory folder, and ``/help`` lists these commands (piped, every
line but ``/reset`` and ``/exit`` is a user query). On a POSIX terminal the prompt
reads keys itself (``cli._line_editor``): a paste of several lines is one query, sent
as a fenced block (someone else's text for memory). What background memory
extraction saves is shown as it happens (see ``_render``: a JSON line each in
stream-json, a dim line on stderr in text).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
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
    from asyncrecall.agent import ExtractionEvent
    from asyncrecall.cli._line_editor import TerminalPrompt
    from asyncrecall.cli._render import EventPrinter
    from asyncrecall.cli._session import Session
    from asyncrecall.cli._settings import Settings

# The session, the agent and the printer (the OpenAI SDK, rich) are imported when the
# command runs, after the entry has started reading the memory folder (``cli._main``).

__all__ = ["register"]


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "chat",
        parents=[common, store_flags()],
        help="interactive session (one query per line when piped)",
        description="Chat with the agent. Ctrl-C cancels a turn; twice at the prompt exits.",
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    # Built before the loop runs: importing the OpenAI SDK would block it (a slow import).
    try:
        from asyncrecall.cli._session import open_session

        with telemetry_for(settings):
            session = open_session(settings, handoff=True)
            resume_collection()  # the imports are done (see cli._main)
            return asyncio.run(chat(session, settings))
    finally:
        exit_soon()


class _LineReader:
    """Reads standard input in a daemon thread (it must never keep the process alive).

    Interactive, it shows the prompt and reads the next line only when asked
    (:meth:`want`), so the prompt appears after the answer, with the terminal's keys
    and pastes read by :class:`~asyncrecall.cli._line_editor.TerminalPrompt` where it
    can be; piped, it reads ahead.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, *, interactive: bool) -> None:
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._interactive = interactive
        self._wanted = threading.Event()
        self._loop = loop
        self._prompt: TerminalPrompt | None = None
        if interactive and sys.stdin is not None:
            from asyncrecall.cli._line_editor import TerminalPrompt

            with contextlib.suppress(OSError, ValueError):
                self._prompt = TerminalPrompt.open(sys.stdin.fileno(), sys.stderr)
        threading.Thread(target=self._read, name="asyncrecall-stdin", daemon=True).start()

    def want(self) -> None:
        self._wanted.set()

    def interrupted(self) -> bool:
        """``Ctrl-C``: the line typed so far, and lines not read yet (the rest of a
        paste the terminal did not mark), are dropped; whether there were any."""
        return self._prompt.clear() if self._prompt is not None else False

    def resumed(self, signum: int = 0) -> None:
        """Continued after ``Ctrl-Z``: the prompt takes the terminal back."""
        if self._prompt is not None:
            self._prompt.resumed()

    def suspend(self) -> None:
        """About to stop (``Ctrl-Z``): the terminal as it was, for the shell."""
        if self._prompt is not None:
            self._prompt.suspend()

    def aside(self) -> contextlib.AbstractContextManager[None]:
        """Around a notice printed while a line may be typed: off the line."""
        return self._prompt.aside() if self._prompt is not None else contextlib.nullcontext()

    def close(self) -> None:
        """Put the terminal back as it was."""
        if self._prompt is not None:
            self._prompt.close()

    def _read(self) -> None:
        while True:
            if self._interactive:
                self._wanted.wait()
                self._wanted.clear()
            line: str | None
            if self._prompt is not None:
                line = self._prompt.read_line("> ")
            else:
                if self._interactive:
                    sys.stderr.write("> ")
                    sys.stderr.flush()
                line = (sys.stdin.readline() if sys.stdin is not None else "") or None
            self._loop.call_soon_threadsafe(self.lines.put_nowait, line)
            if line is None:
                return


class _Interrupts:
    """What Ctrl-C means right now: cancel the turn, warn, or exit; and what a
    terminating signal does: cancel the turn and exit."""

    def __init__(self, printer: EventPrinter) -> None:
        self.turn: CancelSignal | None = None
        self.at_prompt = 0
        self.exit = asyncio.Event()
        #: The terminating signal that ended the chat, if one did.
        self.ended_by: int | None = None
        #: Where the next line is typed (its line so far is dropped at a Ctrl-C).
        self.reader: _LineReader | None = None
        self._printer = printer

    def terminate(self, signum: int) -> None:
        if self.ended_by is None:
            self.ended_by = signum
        if self.turn is not None:
            self.turn.cancel("user")
        self.exit.set()

    def __call__(self, signum: int | None = None) -> None:
        if self.exit.is_set():
            return
        typed = self.reader.interrupted() if self.reader is not None else False
        if self.turn is not None and not self.turn.cancelled:
            self.turn.cancel("user")
            self._printer.err.print("[yellow]^C turn cancelled[/yellow]")
            return
        # A Ctrl-C that drops a line typed is a first one: only one on an empty line exits.
        self.at_prompt = 1 if typed else self.at_prompt + 1
        if self.at_prompt >= 2:
            self.exit.set()
        else:
            self._printer.err.print("\n[dim](press Ctrl-C again to exit)[/dim]")
            self._printer.err.print("> ", end="")


def _job_control(loop: asyncio.AbstractEventLoop, reader: _LineReader) -> Callable[[], None]:
    """``Ctrl-Z`` puts the terminal back before the process stops, and ``fg`` gives the
    prompt its modes again (a shell that does not restore the terminal itself would
    otherwise be left without echo). Returns the remover."""
    stop, resume = getattr(signal, "SIGTSTP", None), getattr(signal, "SIGCONT", None)
    if stop is None or resume is None:
        return lambda: None
    removers: list[Callable[[], None]] = []

    def stopped(signum: int) -> None:
        reader.suspend()
        removers.pop()()  # the default action again: the process stops at the kill
        os.kill(os.getpid(), stop)
        removers.append(bridge(loop, (stop,), stopped))  # here once continued

    removers.append(bridge(loop, (resume,), reader.resumed))
    removers.append(bridge(loop, (stop,), stopped))

    def remove() -> None:
        for undo in reversed(removers):
            undo()

    return remove


_HELP = (
    "/help      this list\n"
    "/reset     forget this conversation (memory stays)\n"
    "/exit      leave (also /quit, Ctrl-D, or Ctrl-C twice at the prompt)\n"
    "Ctrl-C     cancel the running answer\n"
    "Anything else goes to the model; a paste of several lines is one message."
)


def _banner(session: Session) -> str:
    """The terminal's first line: the model, the memory folder, how to get help and out."""
    memory = session.memory.store.location if session.memory is not None else "off"
    return (
        f"asyncrecall chat · model {session.client.model.name} · memory {memory} · "
        "/help for commands, /exit or Ctrl-D to quit"
    )


async def chat(session: Session, settings: Settings) -> int:
    """Run a chat session until end of input, ``/exit`` or a second Ctrl-C."""
    loop = asyncio.get_running_loop()
    from rich.markup import escape

    from asyncrecall.cli._event_log import open_event_log
    from asyncrecall.cli._render import EXIT_OUTPUT_CLOSED, EventPrinter, exit_code

    printer = EventPrinter(settings.output_format)
    log = open_event_log(settings.event_log)
    if session.notice:
        printer.err.print(f"[dim]· {escape(session.notice)}[/dim]")
    interrupts = _Interrupts(printer)
    interactive = sys.stdin is not None and sys.stdin.isatty()
    unbridge = bridge(loop, (signal.SIGINT,), interrupts)
    unbridge_terminating = bridge(loop, TERMINATING, interrupts.terminate)
    reader = interrupts.reader = _LineReader(loop, interactive=interactive)
    unbridge_job_control = _job_control(loop, reader)
    if interactive:
        printer.err.print(_banner(session), markup=False, highlight=False, soft_wrap=True)
    if session.extraction is not None:  # what background extraction saved

        def show_background(event: ExtractionEvent) -> None:
            with reader.aside():
                printer.show_background(event)

        session.extraction.add_listener(show_background)
    # The worst failure of the session (a cancelled turn is the user's choice, not one).
    status = 0
    exit_wait = asyncio.ensure_future(interrupts.exit.wait())
    try:
        await session.start()
        while not interrupts.exit.is_set():
            reader.want()
            next_line = asyncio.ensure_future(reader.lines.get())
            await asyncio.wait({next_line, exit_wait}, return_when=asyncio.FIRST_COMPLETED)
            if not next_line.done():
                next_line.cancel()
                break
            line = next_line.result()
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/exit", "/quit"):
                break
            if text == "/reset":
                session.client.reset_chat()
                printer.err.print("[dim]· chat reset[/dim]")
                continue
            if interactive and text == "/help":
                printer.err.print(_HELP, markup=False, highlight=False)
                continue
            interrupts.turn = CancelSignal()
            interrupts.at_prompt = 0
            log.user_message(text)
            with user_waits(settings), query_span(settings.model) as ended:
                async for event in session.agent.run_query(text, cancel=interrupts.turn):
                    printer.show(event)
                    log.record(event)  # queued: written by the log's thread
                ended(printer.error.message if printer.error is not None else None)
            interrupts.turn = None
            if interrupts.ended_by is not None or printer.output_closed:
                break
            if printer.error is not None:
                sys.stderr.write(f"asyncrecall: {printer.error.message}\n")
                status = max(status, exit_code(printer.error))
                printer.error = None
    finally:
        unbridge_job_control()
        reader.close()
        log.close()
        exit_wait.cancel()
        unbridge()
        try:
            await session.aclose()  # a signal meanwhile is the bridge's: it ends nothing
        finally:
            unbridge_terminating()
    if interrupts.ended_by is not None:
        return exit_status(interrupts.ended_by)
    if printer.output_closed:  # its reader went away (| head): quiet
        return EXIT_OUTPUT_CLOSED
    return status

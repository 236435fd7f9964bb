"""How ``run`` and ``chat`` show agent events: text, one JSON object, or JSON lines.

Background memory extraction's events come between and after queries;
``chat`` shows them with :meth:`EventPrinter.show_background`: one JSON line each in
stream-json (its ``to_dict``, like every event), a short dim line on stderr in text
(held back while an answer is being written, so it never splits one), nothing in json
(one object per query).

An answer is printed once. A main request whose stream the server cut is sent again
(``request_retried``): what the cut stream said is void. In text to a terminal, each
request's text is written as it comes and, when it is cut, erased from the screen
before the answer sent again is written; to anything else (a pipe, a file: what
scripts read) each request's text is written when that request's stream has ended,
so the cut start never reaches it.

Output whose reader has gone (``asyncrecall run ... | head -1``: a broken pipe; a closed
terminal) is not an error of the query: the printer stops writing, the query goes on to
its end (so its extraction is still handed on), and the command exits quietly with
:data:`EXIT_OUTPUT_CLOSED` (141, 128 + ``SIGPIPE``: what a shell reports for a program
that the signal ended, as ``yes | head -1`` does).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from collections.abc import Mapping
from typing import Any, TextIO, TypeVar, cast

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape

from asyncrecall.agent import (
    AgentEvent,
    ContentEvent,
    ErrorEvent,
    ExtractionEvent,
    FinishedEvent,
    MemoryConsolidatedEvent,
    MemoryExtractedEvent,
    MemoryExtractionSkippedEvent,
    MemoryInjectedEvent,
    RequestRetriedEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from asyncrecall.cli._common import quiet_output, redacted
from asyncrecall.cli._settings import OutputFormat
from asyncrecall.cli._signals import EXIT_OUTPUT_CLOSED

__all__ = [
    "EXIT_CANCELLED",
    "EXIT_MODEL_ERROR",
    "EXIT_OUTPUT_CLOSED",
    "EXIT_STOPPED",
    "EventPrinter",
    "exit_code",
]

#: A model or endpoint error, or an empty answer.
EXIT_MODEL_ERROR = 1
#: The agent stopped the query before an answer: loop detection, a limit, a stop signal.
EXIT_STOPPED = 3
#: The user cancelled (Ctrl-C).
EXIT_CANCELLED = 130

_STOPPED_KINDS = frozenset(
    {"loop_detected", "max_turns", "max_session_turns", "session_token_limit_exceeded", "stopped"}
)


def exit_code(error: ErrorEvent) -> int:
    """The exit status for a failed query (the README's command table lists them)."""
    return EXIT_STOPPED if error.kind in _STOPPED_KINDS else EXIT_MODEL_ERROR


class EventPrinter:
    """Prints one user query's events in the chosen format; remembers the exit status."""

    def __init__(
        self,
        output_format: OutputFormat,
        *,
        out: TextIO | None = None,
        err: Console | None = None,
    ) -> None:
        self.format = output_format
        self.out = out or sys.stdout
        # No emoji codes: ``:smile:`` in a tool argument is text, and the first line with
        # a colon imported rich's emoji table on the way to the first request.
        self.err = err or Console(stderr=True, highlight=False, emoji=False)
        #: The last query's error, until the command reads it (one line on stderr).
        self.error: ErrorEvent | None = None
        #: Whether the last query was cancelled by the user.
        self.cancelled = False
        #: The exit status a cancelled turn reports: the user's Ctrl-C unless the
        #: command was ended by another signal (128 + its number).
        self.cancel_status = EXIT_CANCELLED
        #: Whether the output's reader went away (nothing is written after that).
        self.output_closed = False
        self._events: list[dict[str, Any]] = []
        self._answer_started = False  # the answer's first text is out (after a separator)
        self._answers = 0  # answers printed so far (text mode separates them)
        self._held: list[str] = []  # background lines waiting for the answer to end
        #: The text of the request streaming now: on the screen (a terminal), else held.
        self._request_text: list[str] = []
        isatty = getattr(self.out, "isatty", None)
        self._live = bool(isatty()) if callable(isatty) else False

    @property
    def _wrote_text(self) -> bool:
        """An answer is being written (or held to be written)."""
        return self._answer_started or bool(self._request_text)

    def show(self, event: AgentEvent) -> None:
        event = scrubbed(event)
        if isinstance(event, ErrorEvent):
            self.error = event
        elif isinstance(event, FinishedEvent):
            self.cancelled = event.reason == "cancelled"
        if self.format == "stream-json":
            self._line(event.to_dict())
        elif self.format == "json":
            self._events.append(event.to_dict())
            if isinstance(event, FinishedEvent):
                self._line(self._summary(event))
        else:
            self._text(event)

    def show_background(self, event: ExtractionEvent) -> None:
        """An event of background work (memory extraction), between or during queries."""
        event = scrubbed(event)
        if self.format == "stream-json":
            self._line(event.to_dict())
        elif self.format == "text":
            line = background_line(event)
            if line is None:
                return
            if self._wrote_text:
                self._held.append(line)  # the answer is being written: after it
            else:
                self.err.print(line)

    def _line(self, data: dict[str, Any]) -> None:
        self._emit(json.dumps(data, ensure_ascii=False, default=str) + "\n")

    def _emit(self, text: str) -> None:
        """``text`` to the output, flushed; once its reader has gone, nothing."""
        if self.output_closed:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except OSError:  # a broken pipe (EPIPE), a terminal that hung up (EIO)
            self.output_closed = True
            quiet_output(self.out)

    def _summary(self, finished: FinishedEvent) -> dict[str, Any]:
        injected = [e for e in self._events if e["type"] == "memory_injected"]
        summary = {
            "type": "result",
            "result": finished.text,
            "finish_reason": finished.reason,
            "turns": finished.turns,
            "is_error": self.error is not None or finished.reason == "cancelled",
            "error": self.error.message if self.error is not None else None,
            "exit_code": self._exit_code(finished),
            "memory": {"injected": injected, "paths": list(finished.memory_paths)},
            "events": self._events,
        }
        self._events = []
        return summary

    def _exit_code(self, finished: FinishedEvent) -> int:
        if self.error is not None:
            return exit_code(self.error)
        return self.cancel_status if finished.reason == "cancelled" else 0

    def _write(self, text: str) -> None:
        if not text:
            return
        blank = "\n" if not self._answer_started and self._answers else ""
        self._answer_started = True
        self._emit(blank + text)  # a blank line between two answers (piped chat)

    def _request_ended(self) -> None:
        """The streaming request's text stands: written now if it was held."""
        text, self._request_text = "".join(self._request_text), []
        if not self._live:
            self._write(text)

    def _retract(self) -> None:
        """The streaming request was cut: its text is void (erased from the terminal)."""
        text, self._request_text = "".join(self._request_text), []
        if not self._live or not text:
            return
        width = max(1, shutil.get_terminal_size().columns)
        rows = sum(max(1, -(-cell_len(line) // width)) for line in text.split("\n"))
        # To the start of the line, clear it, and the same for each row above it.
        self._emit("\r\x1b[2K" + "\x1b[1A\x1b[2K" * (rows - 1))

    def _text(self, event: AgentEvent) -> None:
        if isinstance(event, ContentEvent):
            self._request_text.append(event.text)
            if self._live:
                self._write(event.text)
            return
        if isinstance(event, RequestRetriedEvent):
            self._retract()
            self.err.print(
                "[dim]· the server cut the answer to serve our side query: sent again[/dim]"
            )
            return
        self._request_ended()
        if isinstance(event, ToolCallEvent):
            raw: object = event.args
            items = event.args.items() if isinstance(raw, Mapping) else ()
            args = ", ".join(f"{k}={v!r}" for k, v in items) if items else repr(raw)
            # The model's words and the folder's names are text, never markup: "[/x]"
            # in an argument made rich raise and ended the command.
            self.err.print(f"[dim]· {escape(event.name)}({escape(args[:120])})[/dim]")
        elif isinstance(event, ToolResultEvent) and not event.ok:
            self.err.print(f"[dim]  ↳ error: {escape(str(event.error))}[/dim]")
        elif isinstance(event, MemoryInjectedEvent):
            where = "with your message" if event.point == "user_query" else "after a tool result"
            self.err.print(
                f"[dim]· memory: {escape(', '.join(event.paths))} ({where}, "
                f"recall {event.recall_ms:.0f} ms)[/dim]"
            )
        elif isinstance(event, ErrorEvent):
            pass  # the command prints the one-line reason once, on stderr
        elif isinstance(event, FinishedEvent):
            if self._answer_started:
                self._emit("\n")
                self._answers += 1
            self._answer_started = False
            held, self._held = self._held, []
            for line in held:
                self.err.print(line)


_E = TypeVar("_E")

#: The events whose text field may quote a server (or a file): redacted before printing.
_TEXT_FIELDS: dict[type[Any], str] = {
    ErrorEvent: "message",
    ToolResultEvent: "error",
    MemoryExtractionSkippedEvent: "detail",
}


def scrubbed(event: _E) -> _E:
    """``event`` with its error text :func:`~asyncrecall.cli._common.redacted` (the
    same event when there was nothing to take out)."""
    name = _TEXT_FIELDS.get(type(event))
    text = getattr(event, name, None) if name is not None else None
    if name is None or not isinstance(text, str):
        return event
    clean = redacted(text)
    if clean == text:
        return event
    return cast(_E, dataclasses.replace(cast(Any, event), **{name: clean}))


def background_line(event: ExtractionEvent) -> str | None:
    """The text-mode line of a background event (``None``: not worth a line)."""
    if isinstance(event, MemoryExtractedEvent):
        refused = f", {event.refused} refused" if event.refused else ""
        if not event.paths:
            return f"[dim]· memory: nothing saved{refused}[/dim]" if refused else None
        return (
            f"[dim]· memory: saved {len(event.paths)} "
            f"({escape(', '.join(event.paths))}){refused}[/dim]"
        )
    if isinstance(event, MemoryExtractionSkippedEvent):
        if event.reason != "error":
            return None  # saved by the agent, superseded, nothing new, cancelled: routine
        return f"[dim]· memory: extraction failed: {escape(event.detail)}[/dim]"
    if isinstance(event, MemoryConsolidatedEvent):
        changed = ", ".join([*event.written, *(f"-{p}" for p in event.removed)]) or "no change"
        return f"[dim]· memory: consolidated, {event.actions} action(s) ({escape(changed)})[/dim]"
    return None  # memory_extraction_started

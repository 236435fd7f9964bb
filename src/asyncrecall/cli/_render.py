"""How ``run`` and ``chat`` show agent events: text, one JSON object, or JSON lines."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from rich.console import Console

from asyncrecall._settings import OutputFormat
from asyncrecall.agent import (
    AgentEvent,
    ContentEvent,
    ErrorEvent,
    FinishedEvent,
    MemoryInjectedEvent,
    ToolCallEvent,
    ToolResultEvent,
)

__all__ = ["EventPrinter"]


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
        self.err = err or Console(stderr=True, highlight=False)
        self.error: str | None = None
        self._events: list[dict[str, Any]] = []
        self._wrote_text = False

    def show(self, event: AgentEvent) -> None:
        if isinstance(event, ErrorEvent):
            self.error = event.message
        if self.format == "stream-json":
            self._line(event.to_dict())
        elif self.format == "json":
            self._events.append(event.to_dict())
            if isinstance(event, FinishedEvent):
                self._line(self._summary(event))
        else:
            self._text(event)

    def _line(self, data: dict[str, Any]) -> None:
        self.out.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
        self.out.flush()

    def _summary(self, finished: FinishedEvent) -> dict[str, Any]:
        injected = [e for e in self._events if e["type"] == "memory_injected"]
        summary = {
            "type": "result",
            "result": finished.text,
            "finish_reason": finished.reason,
            "turns": finished.turns,
            "is_error": self.error is not None,
            "error": self.error,
            "memory": {"injected": injected, "paths": list(finished.memory_paths)},
            "events": self._events,
        }
        self._events = []
        return summary

    def _text(self, event: AgentEvent) -> None:
        if isinstance(event, ContentEvent):
            self.out.write(event.text)
            self.out.flush()
            self._wrote_text = True
        elif isinstance(event, ToolCallEvent):
            raw: object = event.args
            items = event.args.items() if isinstance(raw, Mapping) else ()
            args = ", ".join(f"{k}={v!r}" for k, v in items) if items else repr(raw)
            self.err.print(f"[dim]· {event.name}({args[:120]})[/dim]")
        elif isinstance(event, ToolResultEvent) and not event.ok:
            self.err.print(f"[dim]  ↳ error: {event.error}[/dim]")
        elif isinstance(event, MemoryInjectedEvent):
            where = "with your message" if event.point == "user_query" else "after a tool result"
            self.err.print(
                f"[dim]· memory: {', '.join(event.paths)} ({where}, "
                f"recall {event.recall_ms:.0f} ms)[/dim]"
            )
        elif isinstance(event, ErrorEvent):
            pass  # the command prints the one-line reason once, on stderr
        elif isinstance(event, FinishedEvent):
            if self._wrote_text:
                self.out.write("\n")
                self.out.flush()
            self._wrote_text = False
            if event.reason not in ("stop", "error", "cancelled"):
                self.err.print(f"[yellow]· stopped: {event.reason}[/yellow]")

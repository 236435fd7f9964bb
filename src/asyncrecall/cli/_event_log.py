"""The event log: the recall's events of ``run`` and ``chat``, as JSON lines in a file.

Turned on by the ``event_log`` setting (``--event-log FILE``, ``ASYNCRECALL_EVENT_LOG``);
``asyncrecall console`` reads it to show recall traces. Each line is one event's
stream-json object (its ``to_dict``) with three keys added: ``at`` (POSIX time the
event was seen), ``session`` (the process's session id) and ``query`` (the user
message's number in that session). A user message opens with a ``user_message`` line
(``text``: its first :data:`TEXT_CHARS` characters). Only what tells the recall's story
is kept (:data:`LOGGED`): no answer text, no tool arguments.

Nothing is written on the recall's path: :meth:`EventLog.record` puts the event (and
the time) on a queue, and a thread of the log's own makes the lines and appends what is
queued, many lines in one ``write`` to a file opened ``O_APPEND`` (whole lines, never
interleaved with another process's). When the file passes :data:`MAX_BYTES` it becomes
``FILE.1`` (the one before is dropped) under a lock file beside it, so two processes
never both rotate.
A log that cannot be written is reported once on stderr and then ignored: the agent's
work goes on.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, TypeAlias

from asyncrecall.prefetch._events import EventBase

__all__ = ["LOGGED", "MAX_BYTES", "TEXT_CHARS", "EventLog", "open_event_log", "read_events"]

#: The size past which the log is rotated (``FILE`` becomes ``FILE.1``).
MAX_BYTES: Final = 4 * 1024 * 1024
#: Characters of a user message kept in its ``user_message`` line.
TEXT_CHARS: Final = 200
#: The event types written (the rest, answer text and tool arguments, never are).
LOGGED: Final = frozenset(
    {
        "memory_recall_started",
        "memory_recall_skipped",
        "memory_recall_empty",
        "memory_injected",
        "memory_discarded",
        "memory_budget",
        "memory_instant_preempted",
        "request_sent",
        "request_retried",
        "error",
        "cancelled",
        "finished",
    }
)
#: Fields of logged events left out (``finished`` carries the whole answer).
_DROPPED: Final = frozenset({"text"})

_Item: TypeAlias = tuple[float, int, "EventBase | dict[str, Any]"]


class EventLog:
    """Appends one session's events to ``path`` from a thread of its own; :meth:`close`
    writes what is queued and ends the thread."""

    def __init__(self, path: Path, *, max_bytes: int = MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.session = uuid.uuid4().hex[:12]
        self._query = 0
        #: ``(at, query, event or a user message's fields)``; ``None`` ends the thread.
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._failed = False
        self._thread = threading.Thread(target=self._drain, name="asyncrecall-event-log")
        self._thread.daemon = True  # close() joins it; a crash must not hang the exit
        self._thread.start()

    def user_message(self, text: str) -> None:
        """A user message begins: the next events belong to it."""
        self._query += 1
        self._queue.put((time.time(), self._query, {"type": "user_message", "text": text}))

    def record(self, event: EventBase) -> None:
        """``event``, if it is one the log keeps: queued with the time, nothing more (the
        log's thread makes its line)."""
        if event.type in LOGGED:
            self._queue.put((time.time(), self._query, event))

    def close(self, timeout: float = 1.0) -> None:
        """Write what is queued, then end the thread. Waits ``timeout`` at most (the
        lines take a millisecond; a lock held elsewhere or a stalled disk must not hold
        up ``run``'s exit: what is still queued then is not written)."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _line(self, item: _Item) -> bytes:
        at, query, what = item
        if isinstance(what, EventBase):
            data = {k: v for k, v in what.to_dict().items() if k not in _DROPPED}
        else:
            data = {**what, "text": str(what.get("text", ""))[:TEXT_CHARS]}
        line = {"at": at, "session": self.session, "query": query, **data}
        return (json.dumps(line, ensure_ascii=False, default=str) + "\n").encode()

    def _drain(self) -> None:
        ended = False
        while not ended:
            batch = [self._queue.get()]
            while True:  # everything queued meanwhile goes in the same write
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            ended = None in batch
            data = b"".join(self._line(item) for item in batch if item is not None)
            if data and not self._failed:
                self._append(data)

    def _append(self, data: bytes) -> None:
        from filelock import FileLock

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(f"{self.path}.lock"):
                try:
                    size = self.path.stat().st_size
                except FileNotFoundError:
                    size = 0
                if size and size + len(data) > self.max_bytes:
                    os.replace(self.path, f"{self.path}.1")
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
        except OSError as exc:
            self._failed = True
            sys.stderr.write(f"asyncrecall: warning: event log {self.path}: {exc}; not written\n")


class _Off:
    """The log when none is asked for: every method does nothing."""

    def user_message(self, text: str) -> None:
        del text

    def record(self, event: EventBase) -> None:
        del event

    def close(self, timeout: float = 1.0) -> None:
        del timeout


def open_event_log(path: Path | None) -> EventLog | _Off:
    """The log the ``event_log`` setting names (its thread started), or one that keeps
    nothing when it names none."""
    return EventLog(path) if path is not None else _Off()


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """Every event of the log at ``path``, oldest first (``FILE.1`` then ``FILE``);
    a line that is not a JSON object (a torn last line) is skipped."""
    for part in (Path(f"{path}.1"), path):
        try:
            handle = part.open("rb")
        except FileNotFoundError:
            continue
        with handle:
            for raw in handle:
                try:
                    item = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(item, dict) and isinstance(item.get("type"), str):
                    yield item

"""``chat``'s prompt on a terminal: a line typed key by key, and what was pasted into it.

A terminal in its usual (canonical) mode hands a program one line per Enter, so a paste
of several lines reached ``chat`` as several queries, and nothing told typed text from
pasted text. On a POSIX terminal the prompt now reads keys itself (no canonical mode,
no kernel echo; ``Ctrl-C`` and ``Ctrl-Z`` still signal) and asks the terminal to mark
pastes (bracketed paste: the terminal sends ``ESC [200~`` before a paste and
``ESC [201~`` after it). Then:

- a paste of several lines, or longer than a line one types (:data:`BLOCK_CHARS`), is
  part of the one query being typed, shown as ``[pasted: N lines]`` and sent to the
  model as a fenced block on lines of its own (a fence longer than any run of
  backticks inside it). A fenced block is someone else's text wherever the user turn
  is read (``foreign_spans``, :mod:`asyncrecall.memory._attribution`), so a memory
  written from a paste is held for the user's word like one written from a file, and
  the model sees where the user's own words end;
- a short paste on one line (a path, a name, an address) is inserted as if typed;
- keys: characters (any but control characters: joiners and emoji newer than this
  Python's Unicode are text), Backspace, ``Ctrl-U`` (erase the line), ``Ctrl-W`` (the
  last word), Enter, ``Ctrl-D`` on an empty line (end of input); Tab, Esc and escape
  sequences (arrows) are ignored, ``Ctrl-\\`` is off (its core dump would leave the
  terminal in these modes).

:class:`LineEditor` is the pure part (keys in, echo and finished lines out).
:class:`TerminalPrompt` owns the terminal: the prompt's modes from the first line until
the chat ends (a paste while the model answers is marked too, and waits for the next
prompt), the terminal's own put back at exit and before ``Ctrl-Z`` stops the process
(for a shell that does not restore it), set again on ``fg`` with the line so far shown
again. ``Ctrl-C`` drops the line typed and any line read but not sent (the rest of a
paste the terminal did not mark). Elsewhere (Windows, a terminal that refuses
``termios``) ``chat`` reads lines as before.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import os
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, TextIO

__all__ = ["BLOCK_CHARS", "LineEditor", "Paste", "TerminalPrompt", "fenced"]

#: A paste on one line longer than this is someone else's text (a paragraph, a log
#: line), not a few words of the user's sentence.
BLOCK_CHARS: Final = 160

PASTE_START: Final = "\x1b[200~"
PASTE_END: Final = "\x1b[201~"
_BRACKETED_ON: Final = "\x1b[?2004h"
_BRACKETED_OFF: Final = "\x1b[?2004l"
_ERASE: Final = frozenset("\x7f\b")
_END_OF_INPUT: Final = "\x04"


@dataclass(frozen=True, slots=True)
class Paste:
    """A block pasted into the line (see the module doc)."""

    text: str

    @property
    def label(self) -> str:
        lines = self.text.strip("\n").count("\n") + 1
        return f"[pasted: {lines} line{'s' if lines > 1 else ''}]"


def fenced(text: str) -> str:
    """``text`` as a fenced block whose fence no run of backticks in it can close."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text.strip(chr(10))}\n{fence}"


def _width(char: str) -> int:
    """Columns ``char`` takes on a terminal."""
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


class LineEditor:
    """One line typed on a terminal, key by key (see the module doc). :meth:`feed` takes
    what the terminal sent, in any pieces, and returns what to echo; :attr:`done` holds
    the finished lines, in order (``None``: end of input)."""

    def __init__(self) -> None:
        self._items: list[str | Paste] = []
        self._pending = ""  # an escape sequence, or a paste, not complete yet
        self._dropping = False  # a paste cut by Ctrl-C: the rest of it is dropped too
        self.done: list[str | None] = []

    def clear(self) -> bool:
        """Forget the line typed so far and the lines not read yet (``Ctrl-C``); whether
        there was any."""
        had = bool(self._items or self._pending or self.done)
        self._dropping = self._dropping or self._pending.startswith(PASTE_START)
        self._items.clear()
        self._pending = ""
        self.done.clear()
        return had

    @property
    def escape_waiting(self) -> bool:
        """An Esc came last, outside a paste: the start of a key's sequence, or Esc
        pressed alone (the terminal tells which by what follows, and when)."""
        return self._pending == "\x1b"

    def drop_escape(self) -> None:
        """The waiting Esc was pressed alone: it is not the start of what comes next."""
        if self._pending == "\x1b":
            self._pending = ""

    def shown(self) -> str:
        """The line typed so far as the terminal shows it."""
        return "".join(item.label if isinstance(item, Paste) else item for item in self._items)

    def feed(self, data: str) -> str:
        """Take ``data`` from the terminal; returns the echo."""
        echo: list[str] = []
        data, self._pending = self._pending + data, ""
        if self._dropping:
            end = data.find(PASTE_END)
            if end < 0:
                self._pending = data[-len(PASTE_END) :]  # the marker may come cut in two
                return ""
            data, self._dropping = data[end + len(PASTE_END) :], False
        i = 0
        while i < len(data):
            if data.startswith(PASTE_START, i):
                end = data.find(PASTE_END, i + len(PASTE_START))
                if end < 0:
                    self._pending = data[i:]
                    break
                echo.append(self._paste(data[i + len(PASTE_START) : end]))
                i = end + len(PASTE_END)
                continue
            char = data[i]
            if char == "\x1b":
                length = _escape_length(data, i)
                if length is None:
                    self._pending = data[i:]
                    break
                i += length
                continue
            i += 1
            if char in "\r\n":
                echo.append("\n")
                self.done.append(self._finish())
            elif char in _ERASE:
                echo.append(self._erase(1))
            elif char == "\x15":  # Ctrl-U
                echo.append(self._erase(len(self._items)))
            elif char == "\x17":  # Ctrl-W
                echo.append(self._erase(self._last_word()))
            elif char == _END_OF_INPUT:
                if not self._items:
                    echo.append("\n")
                    self.done.append(None)
            elif unicodedata.category(char) != "Cc":  # joiners and newer emoji are text
                self._items.append(char)
                echo.append(char)
        return "".join(echo)

    def _paste(self, text: str) -> str:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        text = "".join(c for c in text if c in "\t\n" or unicodedata.category(c) != "Cc")
        if "\n" not in text.strip("\n") and len(text) <= BLOCK_CHARS:
            typed = text.strip("\n")
            self._items.extend(typed)
            return typed
        paste = Paste(text)
        self._items.append(paste)
        return paste.label

    def _erase(self, count: int) -> str:
        echo = []
        for _ in range(min(count, len(self._items))):
            item = self._items.pop()
            width = len(item.label) if isinstance(item, Paste) else _width(item)
            echo.append("\b \b" * width)
        return "".join(echo)

    def _last_word(self) -> int:
        """How many items ``Ctrl-W`` erases: the spaces before the cursor, then a word."""
        count = 0
        items = self._items
        while count < len(items) and items[-1 - count] == " ":
            count += 1
        while count < len(items) and items[-1 - count] not in (" ", "\t"):
            count += 1
            if isinstance(items[-count], Paste):
                break
        return count

    def _finish(self) -> str:
        """The line as the model reads it: each block fenced on lines of its own, the
        typed words around it on theirs."""
        items, self._items = self._items, []
        if not any(isinstance(item, Paste) for item in items):
            return "".join(items)  # type: ignore[arg-type]
        parts: list[str] = []
        for is_paste, group in itertools.groupby(items, lambda item: isinstance(item, Paste)):
            if is_paste:
                parts.extend(fenced(paste.text) for paste in group)  # type: ignore[union-attr]
            else:
                words = "".join(group).strip(" \t")  # type: ignore[arg-type]
                parts.extend([words] if words else [])
        return "\n".join(parts)


def _escape_length(data: str, i: int) -> int | None:
    """The length of the escape sequence at ``data[i]`` (``ESC [ ... final``, ``ESC O x``,
    ``ESC x``), or ``None`` when it is not complete yet."""
    if i + 1 >= len(data):
        return None
    kind = data[i + 1]
    if kind in "\r\n\x7f\x1b":
        return 1  # Esc pressed alone, then a key of its own
    if kind == "[":
        for j in range(i + 2, len(data)):
            if "\x40" <= data[j] <= "\x7e":
                return j - i + 1
        return None
    if kind == "O":
        return 3 if i + 2 < len(data) else None
    return 2


class TerminalPrompt:
    """Reads lines from the terminal on ``fd`` with a :class:`LineEditor`, echoing to
    ``out`` (see the module doc). :meth:`open` returns ``None`` where the terminal's
    modes cannot be set (not POSIX, not a terminal): read lines as before there.

    The terminal keeps the prompt's modes from the first line read until :meth:`close`
    (or :meth:`suspend`), answers included: a paste or keys typed while the model
    answers are marked and kept for the next line, not split by the terminal into lines
    nor echoed into the answer."""

    def __init__(self, fd: int, out: TextIO, saved: list[Any]) -> None:
        self._fd, self._out, self._saved = fd, out, saved
        self._editor = LineEditor()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lock = threading.Lock()
        self._closed = False
        self._raw = False  # the prompt's modes are set
        self._prompt: str | None = None  # the prompt of the line being read

    @classmethod
    def open(cls, fd: int, out: TextIO) -> TerminalPrompt | None:
        try:
            import termios
        except ImportError:
            return None
        try:
            if not (os.isatty(fd) and out.isatty()):
                return None
            saved = termios.tcgetattr(fd)
        except (OSError, ValueError, termios.error):
            return None
        return cls(fd, out, saved)

    def clear(self) -> bool:
        """Forget the line being typed and the lines not read yet (``Ctrl-C``); whether
        there was any."""
        with self._lock:
            return self._editor.clear()

    def read_line(self, prompt: str) -> str | None:
        """The next line (``None``: end of input, or the terminal went away)."""
        with self._lock:
            if self._closed:
                return None
            if not self._raw:
                self._set_raw()
            self._prompt = prompt
            self._write(prompt)
        try:
            while True:
                with self._lock:
                    if self._editor.done:
                        return self._editor.done.pop(0)
                try:
                    data = os.read(self._fd, 4096)
                except OSError:
                    return None
                if not data:
                    return None
                with self._lock:
                    echo = self._editor.feed(self._decoder.decode(data))
                    self._write(echo)
                    waiting = self._editor.escape_waiting
                if waiting and not _more(self._fd):
                    with self._lock:
                        self._editor.drop_escape()  # Esc pressed alone: nothing followed
        finally:
            self._prompt = None

    @contextlib.contextmanager
    def aside(self) -> Iterator[None]:
        """Around output printed while a line may be typed (a background notice): the
        line is cleared first and shown again after, so the notice does not land in
        it."""
        with self._lock:
            reading = self._prompt is not None
            if reading:
                self._write("\r\x1b[K")
            try:
                yield
            finally:
                if reading:
                    self._write(f"{self._prompt}{self._editor.shown()}")

    def suspend(self) -> None:
        """Before the process stops (``Ctrl-Z``): the terminal as it was, for the shell."""
        with self._lock:
            if self._raw:
                self._restore()

    def resumed(self) -> None:
        """The process was continued (``fg``): the shell had the terminal meanwhile and
        set its own modes. Set the prompt's again, and show the prompt and the line so
        far while one is read."""
        with self._lock:
            if self._closed or (self._prompt is None and not self._raw):
                return
            self._set_raw()
            if self._prompt is not None:
                self._write(f"\n{self._prompt}{self._editor.shown()}")

    def close(self) -> None:
        """Put the terminal back as it was (any thread; more than once is harmless)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._prompt is not None:
                self._write("\n")  # the shell's prompt on a line of its own
            if self._raw:
                self._restore()

    def _set_raw(self) -> None:
        """The prompt's modes: no canonical mode, no echo, bracketed paste; ``Ctrl-C``
        and ``Ctrl-Z`` still signal, ``Ctrl-\\`` does not (its core dump would leave
        the terminal so)."""
        import termios

        mode: list[Any] = [list(x) if isinstance(x, list) else x for x in self._saved]
        mode[3] &= ~(termios.ICANON | termios.ECHO | termios.IEXTEN)
        mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
        mode[6][termios.VQUIT] = bytes([_disabled(self._fd)])
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(self._fd, termios.TCSANOW, mode)
        self._write(_BRACKETED_ON)
        self._raw = True

    def _restore(self) -> None:
        import termios

        self._write(_BRACKETED_OFF)
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(self._fd, termios.TCSANOW, self._saved)
        self._raw = False

    def _write(self, text: str) -> None:
        if text:
            with contextlib.suppress(OSError, ValueError):
                self._out.write(text)
                self._out.flush()


#: How long a terminal takes, at most, to send the rest of a key's escape sequence.
_SEQUENCE_S: Final = 0.05


def _more(fd: int) -> bool:
    """Whether more input comes within :data:`_SEQUENCE_S`."""
    import select

    return bool(select.select([fd], [], [], _SEQUENCE_S)[0])


def _disabled(fd: int) -> int:
    """The value that turns a terminal's control character off (``_POSIX_VDISABLE``)."""
    try:
        found = os.fpathconf(fd, "PC_VDISABLE")
    except (OSError, ValueError, AttributeError):
        return 0
    return found if 0 <= found <= 255 else 0

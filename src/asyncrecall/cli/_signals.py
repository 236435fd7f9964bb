"""Signals of ``run`` and ``chat``: what ends them, and how a handler reaches the loop.

A terminal that closes sends ``SIGHUP``; a service manager, ``timeout`` or ``kill``
send ``SIGTERM``. Left to their default action they end the process at once, and what
it owed (the last query's extraction, see ``asyncrecall.cli._handoff_worker``) and the
files it made (``run``'s reader file, see ``asyncrecall.cli._reader``) are left behind.

A signal the command was started with ignored (``nohup`` ignores ``SIGHUP``) stays
ignored.

- Before the session's event loop runs (imports, the session's set-up) nothing is owed
  yet: :func:`die_cleanly` removes the reader files, then lets the signal end the
  process as it would have (the shell sees 128 + its number).
- While the loop runs, :func:`bridge` turns each signal into a call on the loop: the
  command cancels the running turn, hands on what it owes and returns
  :func:`exit_status` (128 + the signal's number: 129 for ``SIGHUP``, 143 for
  ``SIGTERM``).

:func:`bridge` uses ``loop.add_signal_handler`` where the loop has it, else (Windows,
where Ctrl-C would otherwise raise ``KeyboardInterrupt`` and end ``chat``)
``signal.signal`` with a handler that only schedules the call on the loop
(``call_soon_threadsafe``: the handler runs between two bytecodes of the main thread,
which may be inside the loop's own code). Either way, the handler that was there
before is put back when the bridge is removed.

A command without an event loop that owes a write when it ends (``memory import``: the
index of what it copied) runs that work inside :func:`unwinding`: the first ``SIGINT``
or terminating signal raises (``KeyboardInterrupt``, :class:`Ended`) where the work is,
so its ``finally`` clauses write what is owed, and later ones are ignored until the block
is left, so that nothing interrupts the unwinding.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # the command line imports this before anything heavy
    import asyncio

__all__ = [
    "EXIT_OUTPUT_CLOSED",
    "TERMINATING",
    "Ended",
    "bridge",
    "die_cleanly",
    "exit_status",
    "unwinding",
]

#: The signals that end a command and that it ends cleanly on: the terminal's hang-up,
#: a polite kill, and (Windows) Ctrl-Break.
TERMINATING: Final[tuple[signal.Signals, ...]] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGBREAK") if hasattr(signal, name)
)


#: The output's reader went away (a broken pipe): 128 + ``SIGPIPE``, on every platform.
EXIT_OUTPUT_CLOSED: Final = 141


def exit_status(signum: int) -> int:
    """The exit status of a command ended by signal ``signum``: 128 + its number, what a
    shell reports for a process the signal killed."""
    return 128 + signum


def die_cleanly(signals: Iterable[signal.Signals] = TERMINATING) -> None:
    """Until a bridge replaces them: on each of ``signals``, remove this process's
    reader files, then end by that signal's default action. Main thread only (elsewhere:
    nothing)."""
    for signum in signals:
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signum) is not signal.SIG_IGN:  # nohup's stays ignored
                signal.signal(signum, _die)


def _die(signum: int, frame: FrameType | None) -> None:
    from asyncrecall.cli._reader import discard_reader_files

    discard_reader_files()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


class Ended(BaseException):
    """A terminating signal arrived inside :func:`unwinding` (``signum``: which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"ended by signal {signum}")
        self.signum = signum


@contextlib.contextmanager
def unwinding(signals: Iterable[signal.Signals] = TERMINATING) -> Iterator[None]:
    """Inside the block (main thread; elsewhere nothing changes), the first ``SIGINT``
    raises ``KeyboardInterrupt`` and the first of ``signals`` raises :class:`Ended`;
    any signal after that is ignored until the block is left. A signal that is ignored
    (``nohup``'s ``SIGHUP``) stays ignored; the handlers before are put back."""
    raised = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal raised
        if raised:
            return
        raised = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Ended(signum)

    removers: list[Callable[[], None]] = []
    for signum in (signal.SIGINT, *signals):
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            previous = signal.getsignal(signum)
            if previous is not signal.SIG_IGN:
                signal.signal(signum, handler)
                removers.append(_restorer(signum, previous))
    try:
        yield
    finally:
        for undo in reversed(removers):
            with contextlib.suppress(Exception):
                undo()


def bridge(
    loop: asyncio.AbstractEventLoop,
    signals: Iterable[signal.Signals],
    callback: Callable[[int], Any],
) -> Callable[[], None]:
    """Call ``callback(signum)`` on ``loop`` for each of ``signals``; returns the remover,
    which puts the handlers that were there before back. A signal that is ignored (as
    ``nohup`` ignores ``SIGHUP``) or cannot be handled here (not the main thread) is
    left alone."""
    removers: list[Callable[[], None]] = []
    for signum in signals:
        previous = signal.getsignal(signum)
        if previous is signal.SIG_IGN:
            continue
        try:
            loop.add_signal_handler(signum, callback, int(signum))
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        else:
            removers.append(_loop_remover(loop, signum, previous))
            continue

        def scheduled(num: int, frame: FrameType | None) -> None:
            loop.call_soon_threadsafe(callback, num)

        try:
            signal.signal(signum, scheduled)
        except (ValueError, OSError):  # not the main thread
            continue
        removers.append(_restorer(signum, previous))

    def remove() -> None:
        for undo in reversed(removers):
            with contextlib.suppress(Exception):
                undo()

    return remove


def _loop_remover(
    loop: asyncio.AbstractEventLoop, signum: signal.Signals, previous: Any
) -> Callable[[], None]:
    def undo() -> None:
        loop.remove_signal_handler(signum)  # it leaves the default action
        _restorer(signum, previous)()

    return undo


def _restorer(signum: signal.Signals, previous: Any) -> Callable[[], None]:
    def undo() -> None:
        if previous is not None:  # None: set outside Python, cannot be put back
            signal.signal(signum, previous)

    return undo

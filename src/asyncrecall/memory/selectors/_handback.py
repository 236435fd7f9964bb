"""Inline numpy work that gets the interpreter lock back at once after each release.

The semantic instant pass runs on the event loop, inline, because its result must ride
on the message's first request. Its numpy calls (matrix products, large element-wise
steps) release the interpreter lock while they compute, many times per query.
Beside another thread running Python (a host application's worker, a warm-up thread),
that thread takes the lock each time, and the loop's thread gets it back only when
the interpreter forces a switch: after the switch interval, 5 ms by default. One pass
then took 85-115 ms instead of 1-2 ms (``benchmarks/busy_thread.py``).

:func:`quick_return` lowers the switch interval to :data:`SWITCH_S` while such work
runs, so the lock comes back within about that long after each release, and restores
it after. The interval is the process's: overlapping holders (any thread) share one
lowering, and the last to leave restores what was there before the first came, unless
someone else changed it meanwhile (theirs is kept). In work run off the loop
(:func:`~asyncrecall.memory._threads.run_off_loop`: a cold pass) it changes nothing:
there the loop's thread is the one to favour, and a lowered interval would let the
worker take the lock from it every 10 µs.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Final

from asyncrecall.memory._threads import off_loop

__all__ = ["SWITCH_S", "quick_return"]

#: The switch interval while inline numpy work runs, in seconds.
SWITCH_S: Final = 1e-5

_lock = threading.Lock()
_holders = 0
_saved = 0.0  # the interval before the first holder came
_lowered = 0.0  # the interval as the first holder set it (as the interpreter reports it)


@contextlib.contextmanager
def quick_return() -> Iterator[None]:
    """Run the ``with`` block with the switch interval at :data:`SWITCH_S` at most
    (unchanged in :func:`~asyncrecall.memory._threads.run_off_loop`'s work)."""
    global _holders, _saved, _lowered
    if off_loop():
        yield
        return
    with _lock:
        if _holders == 0:
            _saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_saved, SWITCH_S))
            _lowered = sys.getswitchinterval()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and sys.getswitchinterval() == _lowered:
                sys.setswitchinterval(_saved)

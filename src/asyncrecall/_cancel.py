"""A cancel signal that can be bridged, like the browser's ``AbortSignal``.

asyncio's own cancellation ends a task; a :class:`CancelSignal` is the object a
caller hands down so that *other* tasks (the memory side query) can be told to stop
too. Callbacks run once, synchronously, when :meth:`CancelSignal.cancel` is called.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

__all__ = ["SIGNAL_CANCEL", "CancelSignal", "cancelled_by_signal"]

#: The message of a task cancelled because a :class:`CancelSignal` fired: the work was
#: dropped on purpose and the program goes on (not, say, ``asyncio.run`` ending).
SIGNAL_CANCEL = "asyncrecall: cancel signal"


def cancelled_by_signal(error: BaseException) -> bool:
    """Whether ``error`` is the cancellation of a task that a cancel signal stopped."""
    return isinstance(error, asyncio.CancelledError) and error.args == (SIGNAL_CANCEL,)


class CancelSignal:
    """A one-shot cancel flag with listeners."""

    __slots__ = ("_callbacks", "_cancelled", "_reason")

    def __init__(self) -> None:
        self._cancelled = False
        self._reason: str | None = None
        self._callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str = "cancelled") -> None:
        """Set the flag and run every listener once; later calls do nothing."""
        if self._cancelled:
            return
        self._cancelled = True
        self._reason = reason
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def add_listener(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on cancel (at once if already cancelled); returns a remover."""
        if self._cancelled:
            callback()
            return _noop
        self._callbacks.append(callback)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return remove

    def listener_count(self) -> int:
        """How many listeners are attached (tests use it to see bridges removed)."""
        return len(self._callbacks)

    async def wait(self) -> None:
        """Return once cancelled."""
        if self._cancelled:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        remove = self.add_listener(wake)
        try:
            await future
        finally:
            remove()


def _noop() -> None:
    return None

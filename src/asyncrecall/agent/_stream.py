"""Consume a model stream so that a :class:`CancelSignal` can stop it mid-flight.

The stream is iterated inside one producer task (HTTP clients keep per-task state,
so the stream must not hop between tasks); a cancel signal cancels that task, which
closes the request. Our own cancel becomes :class:`TurnCancelled`; a cancellation of
the consuming task itself propagates untouched.

The main turn wins on one-request-at-a-time servers: a stream the server cut while a
side query of ours was in flight to it (``ModelStreamCut.ours_in_flight``; those side
queries have given way) is opened again, at most :data:`RESENDS` times (a second cut
happens when a side query of another process of ours slipped in between); a
:class:`StreamRestarted` item tells the consumer that what the cut stream yielded is void.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Final

from asyncrecall._cancel import CancelSignal
from asyncrecall.models import StreamEvent
from asyncrecall.models._sent import when_sent
from asyncrecall.models._traffic import ModelStreamCut

__all__ = ["RESENDS", "StreamRestarted", "TurnCancelled", "cancellable_stream"]

#: How many times one main request cut for our side queries is sent again.
RESENDS: Final = 2


class TurnCancelled(Exception):
    """The caller's cancel signal stopped the model stream."""


@dataclass(frozen=True, slots=True)
class StreamRestarted:
    """The stream was cut for our side query and is sent again: drop what it yielded."""

    reason: str


def _cancel_task(task: asyncio.Task[None]) -> None:
    task.cancel()


class _End:
    pass


_END = _End()


async def cancellable_stream(
    open_stream: Callable[[], AsyncIterator[StreamEvent]],
    cancel: CancelSignal,
    on_sent: Callable[[], None] | None = None,
) -> AsyncGenerator[StreamEvent | StreamRestarted, None]:
    """Yield the stream's events until it ends, fails, or ``cancel`` fires; a stream cut
    for our own side query is opened again, up to :data:`RESENDS` times (each after a
    :class:`StreamRestarted`). ``on_sent``: called when the request is written, by a
    client that says so (see :func:`~asyncrecall.models._sent.when_sent`)."""
    if cancel.cancelled:
        raise TurnCancelled
    queue: asyncio.Queue[StreamEvent | StreamRestarted | _End | BaseException] = asyncio.Queue()

    async def produce() -> None:
        # Set in the producer's own context: nothing leaks to the consumer's.
        with when_sent(on_sent) if on_sent is not None else contextlib.nullcontext():
            await send()

    async def send() -> None:
        resent = 0
        while True:
            try:
                async for event in open_stream():
                    queue.put_nowait(event)
                return
            except ModelStreamCut as exc:
                if resent == RESENDS or not exc.ours_in_flight:
                    raise
                resent += 1
                queue.put_nowait(StreamRestarted(str(exc)))

    def on_done(task: asyncio.Task[None]) -> None:
        # A done-callback, not an except clause: a task cancelled before its first
        # step never runs its body, and the consumer must still wake up.
        if task.cancelled():
            queue.put_nowait(TurnCancelled())
        elif (exc := task.exception()) is not None:
            queue.put_nowait(exc)
        else:
            queue.put_nowait(_END)

    producer = asyncio.get_running_loop().create_task(produce(), name="model-stream")
    producer.add_done_callback(on_done)
    remove = cancel.add_listener(lambda: _cancel_task(producer))
    try:
        while True:
            item = await queue.get()
            if isinstance(item, _End):
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        remove()
        if not producer.done():
            producer.cancel()
        # Drain: the request is closed before we go on. Shield nothing: if we are
        # being cancelled ourselves, the gather is interrupted and we propagate.
        await asyncio.gather(producer, return_exceptions=True)

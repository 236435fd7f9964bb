"""Silence two known, expected log records on the benchmarks' and the demo's stderr.

* The blocking baseline's selector timeout: each time it fires, recall logs a warning
  that it fell back to the lexical selector. The benchmark counts these itself.
* :class:`LocalServer` shutdown on Python 3.11: when ``LocalServer.stop()`` cancels a
  connection handler whose client has not closed yet, asyncio's
  ``StreamReaderProtocol`` done-callback calls ``task.exception()`` on the cancelled
  task, and the loop logs "Exception in callback ... CancelledError" on the ``asyncio``
  logger. Nothing is wrong with the run.

Each filter drops exactly its record; anything else still reaches the logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

__all__ = ["quiet_known_noise", "server_grace"]

#: Time for a LocalServer to see its clients hang up before it is stopped.
SERVER_GRACE_S = 0.25


class _ShutdownNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        noise = isinstance(exc, asyncio.CancelledError) and (
            "StreamReaderProtocol.connection_made" in record.getMessage()
        )
        return not noise


class _TimeoutFallback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "the old design's timeout" not in record.getMessage()


@contextlib.contextmanager
def quiet_known_noise() -> Iterator[None]:
    """Drop the two records described above while the block runs."""
    filters = (
        (logging.getLogger("asyncio"), _ShutdownNoise()),
        (logging.getLogger("asyncrecall.memory"), _TimeoutFallback()),
    )
    for logger, noise in filters:
        logger.addFilter(noise)
    try:
        yield
    finally:
        for logger, noise in filters:
            logger.removeFilter(noise)


async def server_grace() -> None:
    """Let an in-process :class:`LocalServer` see its clients' hang-ups before it stops.

    ``LocalServer.stop()`` cancels the connection handlers still running; one cancelled
    while it closes its socket leaves the transport open (a ``ResourceWarning`` when it
    is collected). Our clients are closed by then, so the handlers end by themselves
    within a millisecond or two; this wait only gives them the time.
    """
    await asyncio.sleep(SERVER_GRACE_S)

"""Silence one known, expected log record on the benchmarks' and the demo's stderr.

The blocking baseline's selector timeout: each time it fires, recall logs a warning
that the model selector failed. The benchmark counts these itself. The filter drops
exactly that record; anything else still reaches the logs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["quiet_known_noise"]


class _TimeoutFallback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "the old design's timeout" not in record.getMessage()


@contextlib.contextmanager
def quiet_known_noise() -> Iterator[None]:
    """Drop the record described above while the block runs."""
    logger, noise = logging.getLogger("asyncrecall.memory"), _TimeoutFallback()
    logger.addFilter(noise)
    try:
        yield
    finally:
        logger.removeFilter(noise)

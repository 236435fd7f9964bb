"""``ASYNCRECALL_EAGER_TASKS=1`` on Python 3.12+ (``make test-py313`` sets it): the tests
of a folder whose conftest installs :func:`loop_factories` as its
``pytest_asyncio_loop_factories`` hook run on a loop with ``asyncio.eager_task_factory``,
where a task may run to its end inside ``create_task``; the code under test must not
care. Installed only when :data:`ENABLED` (the hook may not decline). A test marked
``plain_loop`` stays on a plain loop: the benchmark that drives the frameworks' own
loops with tool calls fails on an eager loop with memory off too (Pydantic AI 2.68 and
anyio: "Attempted to exit a cancel scope that isn't the current task's current cancel
scope"), so its eager run would test the frameworks, not us."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable

import pytest

__all__ = ["ENABLED", "loop_factories"]

ENABLED = os.environ.get("ASYNCRECALL_EAGER_TASKS") == "1" and sys.version_info >= (3, 12)


def loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Every async test of the folder runs on an eager loop, unless marked ``plain_loop``."""
    if item.get_closest_marker("plain_loop") is not None:
        return {"plain": asyncio.new_event_loop}

    def eager_loop() -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined,unused-ignore]
        return loop

    return {"eager": eager_loop}

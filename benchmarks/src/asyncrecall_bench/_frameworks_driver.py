"""What every ``bench frameworks`` driver shares: the base class, the system prompt and
the benchmark's tool. Its own module so that a driver kept in a module of its own
(:mod:`asyncrecall_bench._frameworks_claude`) imports it without importing
:mod:`asyncrecall_bench._frameworks`, which loads that driver."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from asyncrecall.memory import Recaller
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall_bench._workload import QueryPlan

__all__ = ["SYSTEM", "Driver", "read_file"]

SYSTEM: Final = "You are a coding agent. Use the tools when they help."


class Driver:
    """Runs one plan's conversation in one framework, one of the four ways."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        #: When each main model's first request was handed to the HTTP connection.
        self.sent: dict[str, float] = {}
        #: Where another process builds and sends the requests (the Claude Code CLI):
        #: when this process handed it the run's first request (its run-start hook
        #: answered). The recall's steps after it run beside that process, not before
        #: the request.
        self.handed: dict[str, float] = {}

    def http_client(self) -> Any:
        """The main model's HTTP client: its request hook stamps each model's first send."""
        from openai import DefaultAsyncHttpxClient

        async def stamp(request: Any) -> None:
            model = json.loads(request.content or b"{}").get("model")
            if isinstance(model, str):
                self.sent.setdefault(model, time.monotonic())

        return DefaultAsyncHttpxClient(event_hooks={"request": [stamp]})

    def prepare(
        self,
        pattern: str,
        model: str,
        plan: QueryPlan,
        memory: Recaller,
        prefetcher: RecallPrefetcher,
    ) -> Callable[[], Awaitable[Any]]:
        """Build the agent; return what starts the run (timed from its call)."""
        raise NotImplementedError

    async def aprepare(
        self,
        pattern: str,
        model: str,
        plan: QueryPlan,
        memory: Recaller,
        prefetcher: RecallPrefetcher,
    ) -> Callable[[], Awaitable[Any]]:
        """:meth:`prepare`, for a driver whose agent is built asynchronously (connected)."""
        return self.prepare(pattern, model, plan, memory, prefetcher)

    async def aclose(self) -> None:
        return None


async def read_file(path: str, duration_ms: float = 0.0) -> str:
    """Read a file (the benchmark's tool: it takes the ``duration_ms`` the plan drew)."""
    await asyncio.sleep(duration_ms / 1000.0)
    return f"# {path}\n"

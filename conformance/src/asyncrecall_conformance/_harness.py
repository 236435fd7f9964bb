"""What one case runs on: the memory folder, the side model, the recalls, the wire."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import pytest

from asyncrecall.memory import FolderStore, LexicalSelector, ModelSelector, Recaller
from asyncrecall.models import OpenAIModel
from asyncrecall.prefetch import PrefetchEvent, RecallPrefetcher
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from asyncrecall_conformance._driver import TOOL_NAME, Driver, Run, Unsupported
from asyncrecall_conformance._wire import Wire, WireRequest, side_text

__all__ = ["KEY", "MEMORIES", "SIDE_MODEL", "Harness", "tool_round"]

#: The conversation key of the cases' runs (unless a case says otherwise).
KEY = "conformance-1"
#: The model name of the recall's side query on the kit's server.
SIDE_MODEL = "side"
#: The memories of the kit's folder: (name, type, description, body).
MEMORIES = (
    (
        "db-testing",
        "feedback",
        "integration tests must hit a real database, never mocks",
        "We were burned when mocked tests passed and the prod migration failed.",
    ),
    (
        "deploy-flow",
        "project",
        "deploys go through the staging cluster first",
        "Run `make deploy-staging`, wait for the smoke tests, then promote.",
    ),
    (
        "user-role",
        "user",
        "the user is a data scientist, new to the frontend code",
        "Explain frontend concepts by analogy with pandas and notebooks.",
    ),
)
_HANG_GUARD_S = 10.0


class Harness:
    """Everything a case needs, made from a driver, a started :class:`LocalServer` (the
    side model ``side``, and by default the main model ``main``) and an empty folder.

    The folder gets :data:`MEMORIES`; :meth:`recall` makes the prefetchers; :meth:`run`
    runs one user message through the driver; :meth:`main` and :meth:`side` read what
    the two models received.
    """

    def __init__(self, driver: Driver, server: LocalServer, folder: Path) -> None:
        self.driver = driver
        self.server = server
        self.wire: Wire = driver.wire(server)
        self.store = FolderStore(folder)
        self.store.ensure()
        for name, kind, description, body in MEMORIES:
            self.store.save_memory(name, description, kind, body, origin="user")
        #: The relative path of each memory, by name.
        self.paths = {doc.name: doc.rel_path for doc in self.store.scan()}

    # -- recalls ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def recall(
        self,
        selector: Literal["side query", "lexical"],
        *,
        on_event: Callable[[PrefetchEvent], None] | None = None,
        max_conversations: int | None = None,
    ) -> AsyncIterator[RecallPrefetcher]:
        """A prefetcher over the folder: a ``"side query"`` to the server's ``side``
        model (it settles when the server answers), or the warm ``"lexical"`` selector
        (no I/O: settled before the run's first request)."""
        options: dict[str, Any] = {"on_event": on_event}
        if max_conversations is not None:
            options["max_conversations"] = max_conversations
        async with contextlib.AsyncExitStack() as stack:
            if selector == "side query":
                side = await stack.enter_async_context(
                    OpenAIModel(model=SIDE_MODEL, base_url=self.server.base_url, max_retries=0)
                )
                memory = Recaller(self.store, ModelSelector(side))
            else:
                memory = Recaller(self.store, LexicalSelector())
            prefetcher = await stack.enter_async_context(RecallPrefetcher(memory, **options))
            if selector == "lexical":
                await prefetcher.warm()
            yield prefetcher

    # -- runs ------------------------------------------------------------------------

    def run_of(
        self,
        prefetcher: RecallPrefetcher,
        text: str,
        *,
        key: str | None = KEY,
        previous: Any = None,
        chat: tuple[tuple[Literal["user", "assistant"], str], ...] | None = None,
        leave_early: bool = False,
        tool_hook: Callable[[], Awaitable[None]] | None = None,
    ) -> Run:
        """The :class:`Run` for one user message of conversation ``key`` (:data:`KEY`
        unless given); ``tool_hook`` runs inside the tool, before it returns."""

        async def read_file(path: str) -> str:
            if tool_hook is not None:
                await tool_hook()
            return f"contents of {path}"

        return Run(
            prefetcher=prefetcher,
            key=key,
            text=text,
            base_url=self.wire.base_url,
            model=self.wire.model,
            read_file=read_file,
            previous=previous,
            chat=chat,
            leave_early=leave_early,
        )

    async def run(self, prefetcher: RecallPrefetcher, text: str, **options: Any) -> Any:
        """Run one user message through the driver (options: :meth:`run_of`'s); a run
        the driver calls :class:`Unsupported` skips the case."""
        return await self.drive(self.run_of(prefetcher, text, **options))

    async def drive(self, run: Run) -> Any:
        """The driver's run of ``run``; :class:`Unsupported` skips the case."""
        try:
            return await self.driver.run(run)
        except Unsupported as exc:
            pytest.skip(f"{type(self.driver).__name__}: {exc}")

    def settle(self, prefetcher: RecallPrefetcher, key: str = KEY) -> Callable[[], Awaitable[None]]:
        """A tool hook that waits (a hang guard long) for the key's recall to settle, so
        that it lands at the tool-result request that follows."""

        async def hook() -> None:
            if not await prefetcher.wait_settled(key, _HANG_GUARD_S):
                raise TimeoutError("the recall did not settle")  # pragma: no cover

        return hook

    # -- scripts and records -----------------------------------------------------------

    def side_reply(self, *names: str, gate: threading.Event | None = None) -> Reply:
        """The side model's answer selecting the memories ``names``."""
        return Reply(json={"selected_memories": [self.paths[n] for n in names]}, gate=gate)

    def side_picks(self, choose: Callable[[str], list[str]]) -> None:
        """The side model answers every query by ``choose(text of its last message)``
        (the user's query and the manifest), a list of memory names."""
        self.server.set_default(SIDE_MODEL, lambda r: self.side_reply(*choose(side_text(r))))

    def main(self) -> list[list[dict[str, Any]]]:
        """The messages of every request the main model received, in order."""
        return [r.messages for r in self.wire.requests()]

    def main_requests(self) -> list[WireRequest]:
        """Every request the main model received, in order (with arrival times)."""
        return self.wire.requests()

    def side(self) -> list[RecordedRequest]:
        """The side queries the server received, in order."""
        return [r for r in self.server.requests if r.model == SIDE_MODEL]

    async def no_recall_pending(self, prefetcher: RecallPrefetcher, key: str = KEY) -> None:
        """Wait (a hang guard long) until the key has no recall pending: a run that was
        cancelled or left may end its teardown a few loop ticks after its caller saw it
        end (a streamed run's task); an adapter that never drops the recall fails here."""
        deadline = time.monotonic() + _HANG_GUARD_S
        while prefetcher.pending(key) is not None:
            if time.monotonic() > deadline:
                raise AssertionError("the run ended and left its recall pending")
            await asyncio.sleep(0.005)

    async def first_main_request(self) -> WireRequest:
        """Wait (a hang guard long) until the main model received a request."""
        deadline = time.monotonic() + _HANG_GUARD_S
        while not (requests := self.wire.requests()):
            if time.monotonic() > deadline:
                raise TimeoutError("the main model received no request")
            await asyncio.sleep(0.005)
        return requests[0]


def tool_round(*paths: str) -> Reply:
    """The main model calls the tool once per path, in one round."""
    return Reply(tool_calls=[(TOOL_NAME, {"path": p}) for p in paths])

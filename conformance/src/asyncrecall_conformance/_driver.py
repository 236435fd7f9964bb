"""What an adapter supplies to the kit: a driver that starts one run of its framework."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer
from asyncrecall_conformance._wire import MAIN_MODEL, LocalServerWire, Wire

__all__ = ["TOOL_NAME", "Driver", "Ending", "Run", "Unsupported"]

#: The one tool every run offers: ``read_file(path: str) -> str``.
TOOL_NAME = "read_file"

Ending = Literal["returns", "raises", "is cancelled", "is left early"]
"""How a run can end while its recall is still out (case c)."""


class Unsupported(Exception):
    """Raised by a driver for a run its framework cannot make (the case is skipped,
    with the message as the reason)."""


@dataclass(frozen=True)
class Run:
    """One user message for the driver to run in its framework's real agent loop.

    * ``prefetcher`` — the recall to wire into the adapter (a new one per case, or
      several in one case);
    * ``key`` — the conversation key the app names (``None``: the app names none, the
      run is the whole conversation; raise :class:`Unsupported` if the adapter needs one);
    * ``text`` — the user's message;
    * ``base_url`` / ``model`` — the main model's endpoint and name (the kit's wire);
    * ``instructions`` — the agent's system prompt;
    * ``read_file`` — the tool's body: offer it to the model as the tool ``read_file``
      with one ``path: str`` argument, and return what it returns;
    * ``previous`` — what the driver returned for this conversation's previous run: the
      run continues the conversation the framework's own way (its history, thread,
      session), ``None`` for a first message;
    * ``chat`` — instead of ``previous``: the conversation so far as the app's own store
      of the chat keeps it, ``(role, text)`` pairs of ``user`` and ``assistant`` with no
      memory in them (``()``: no history at all); pass them as the run's history;
    * ``leave_early`` — drive the run as an iteration or a stream and leave it as soon
      as the model's first answer is out (raise :class:`Unsupported` if the framework
      has no such way).
    """

    prefetcher: RecallPrefetcher
    key: str | None
    text: str
    base_url: str
    read_file: Callable[[str], Awaitable[str]]
    model: str = MAIN_MODEL
    instructions: str = "You are terse."
    previous: Any = None
    chat: tuple[tuple[Literal["user", "assistant"], str], ...] | None = None
    leave_early: bool = False


class Driver(abc.ABC):
    """How the kit runs one framework's agent with the adapter under test.

    Implement :meth:`run`. A driver instance serves one test (it may keep what a
    conversation needs across runs: a checkpointer, the adapter's instance per
    prefetcher). The other members have defaults.
    """

    #: The endings of case (c) this framework can produce; ``"is left early"`` needs a
    #: way to leave a run in its middle (an iteration, a stream).
    endings: ClassVar[frozenset[Ending]] = frozenset({"returns", "raises", "is cancelled"})
    #: The kit's server, which answers the side model (OpenAI chat completions) and by
    #: default the main model: :class:`~asyncrecall.testing.AnthropicServer` for a
    #: driver whose :meth:`wire` is an ``AnthropicServerWire``.
    server_type: ClassVar[type[LocalServer]] = LocalServer
    #: The conversations case (g) runs, at least five times the prefetcher's bound of
    #: eight (a leak of one object a conversation fails the case).
    conversations: ClassVar[int] = 40

    @abc.abstractmethod
    async def run(self, run: Run) -> Any:
        """Run ``run.text`` through the framework's agent loop with the adapter wired to
        ``run.prefetcher``; return what the next message needs to continue the
        conversation (the kit passes it back as ``Run.previous``).

        Let errors propagate. On cancellation, stop the run the framework's way (a
        streamed run's ``cancel()``) and let the ``CancelledError`` propagate.
        """

    async def revalidate(self, previous: Any) -> Any:
        """``previous`` passed through the framework's own serialisation and validation
        (e.g. a history dumped to JSON and validated back), as the next run takes it.

        The default returns it unchanged (the framework has no such step)."""
        return previous

    def wire(self, server: LocalServer) -> Wire:
        """The main model's server. The default: the model ``main`` of the kit's
        :class:`LocalServer` (OpenAI chat completions)."""
        return LocalServerWire(server)

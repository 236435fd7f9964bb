"""Options of one :class:`~asyncrecall.agent.AgentClient`: limits and recall behaviour."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Literal, TypeAlias

from asyncrecall.memory import SESSION_BYTES

__all__ = ["ClientOptions", "RecallMode"]

RecallMode: TypeAlias = Literal["async", "blocking", "async+wait100", "async+lexical"]
"""``async`` is the design; ``blocking`` the old one (kept as a baseline);
``async+wait100`` (a bounded 100 ms wait first) and ``async+lexical`` (an instant
lexical pass rides on the first request) are measured variants."""


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """Limits and recall behaviour of one client."""

    max_session_turns: int | None = None
    session_token_limit: int | None = None
    #: ``async`` is the design; ``blocking`` the old one (kept as a baseline);
    #: ``async+wait100`` and ``async+lexical`` are measured variants.
    recall_mode: RecallMode = "async"
    #: Bounded initial wait of ``async+wait100``, in seconds.
    initial_wait: float = 0.1
    #: Deadline of the old blocking design, in seconds.
    blocking_deadline: float = 2.5
    #: Files an instant lexical pass may put on the first request (``async+lexical``).
    instant_limit: int = 3
    #: When set: a user query's recall work that runs in the background (a cold
    #: folder's reading, the side query and its prompt) waits until that query's
    #: request is on its way, at most this many seconds, so it never holds the
    #: interpreter while the request is built (:meth:`RecallPrefetcher.start
    #: <asyncrecall.prefetch.RecallPrefetcher.start>`'s ``until_request``: until the
    #: request is written, as the model's client reports it, else a moment after the
    #: request's take). ``asyncrecall run`` sets it: its one
    #: request is built right after start-up, when the folder is still cold. ``None``:
    #: the recall starts at once. Only the ``async`` and ``async+lexical`` modes hold.
    until_request: float | None = None
    #: Deprecated: the old name of :attr:`until_request` (a warning, then the same).
    hold_recall: float | None = None
    #: The same tool call with the same arguments this many times in a row is a loop.
    loop_threshold: int = 5
    #: Files that reach the model for one user message (instant pass and recall together).
    recall_limit: int = 5
    #: Bytes of memory blocks per session before recall stops (``None``: no budget).
    session_bytes: int | None = SESSION_BYTES

    def __post_init__(self) -> None:
        if self.hold_recall is not None:
            warnings.warn(
                "ClientOptions(hold_recall=...) is deprecated: use until_request=...",
                DeprecationWarning,
                stacklevel=3,
            )
            if self.until_request is None:
                object.__setattr__(self, "until_request", self.hold_recall)

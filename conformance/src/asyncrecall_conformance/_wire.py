"""The main model's wire as the kit reads it: requests as OpenAI chat messages.

Every check of the kit reads the requests the main model's server received, in one
shape: the messages of an OpenAI chat completions request (``role`` ``system`` /
``developer`` / ``user`` / ``assistant`` / ``tool``; an assistant's ``tool_calls`` with
their ``id``; a tool message's ``tool_call_id``; ``content`` a string or a list of
parts with ``text``). A framework that speaks another API to its model supplies a
:class:`Wire` that converts its server's requests to that shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from asyncrecall.testing import LocalServer, RecordedRequest, Reply

__all__ = [
    "MAIN_MODEL",
    "MEMORY_MARK",
    "LocalServerWire",
    "Wire",
    "WireRequest",
    "assert_memory_after_tools",
    "assert_valid_chat",
    "memory_indexes",
    "side_text",
    "text_of",
]

#: The heading every memory block carries (how the kit finds one on the wire).
MEMORY_MARK = "## Relevant memory"
#: The model name the kit scripts the main model's replies under.
MAIN_MODEL = "main"


@dataclass(frozen=True)
class WireRequest:
    """One request the main model's server received, as OpenAI chat messages.

    ``arrived_at`` is a ``time.monotonic()`` value (the kit compares it with the side
    query's); ``raw`` is the server's own record, for a driver's own checks.
    """

    messages: list[dict[str, Any]]
    arrived_at: float
    raw: Any = field(default=None, repr=False, compare=False)


class Wire(Protocol):
    """The main model's server, as the kit drives and reads it.

    The kit scripts :class:`~asyncrecall.testing.Reply` values (text, tool calls of the
    tool ``read_file`` with a ``path`` argument, an HTTP error status, a reply that
    hangs until the client leaves, a ``gate``) and reads back the requests.
    """

    @property
    def base_url(self) -> str:
        """What the framework's model client takes as its base URL."""
        ...

    @property
    def model(self) -> str:
        """The model name the framework's client asks for (``Run.model``)."""
        ...

    def script(self, *replies: Reply | str) -> None:
        """Queue the main model's next replies, first in, first out."""
        ...

    def requests(self) -> list[WireRequest]:
        """The main model's requests received so far, in arrival order."""
        ...


class LocalServerWire:
    """The default :class:`Wire`: the model ``main`` of a :class:`LocalServer`, whose
    requests already are OpenAI chat completions."""

    def __init__(self, server: LocalServer, *, model: str = MAIN_MODEL) -> None:
        self.server = server
        self._model = model

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def model(self) -> str:
        return self._model

    def script(self, *replies: Reply | str) -> None:
        self.server.script(self._model, *replies)

    def requests(self) -> list[WireRequest]:
        return [
            WireRequest(messages=r.messages, arrived_at=r.arrived_at, raw=r)
            for r in self.server.requests
            if r.model == self._model
        ]


def text_of(message: Mapping[str, Any]) -> str:
    """The text of a chat message (a string content, or the texts of its parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def memory_indexes(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the messages that carry a memory block."""
    return [i for i, m in enumerate(messages) if MEMORY_MARK in text_of(m)]


def side_text(request: RecordedRequest) -> str:
    """The text of a side query's last message (the user's query and the manifest)."""
    messages = request.messages
    return text_of(messages[-1]) if messages else ""


def assert_valid_chat(messages: Sequence[Mapping[str, Any]]) -> None:
    """What a strict OpenAI-compatible server checks: at most one system message, first;
    every tool message answers a tool call of the assistant message right before its
    run of tool messages; every tool call is answered before anything else."""
    roles = [m.get("role") for m in messages]
    assert roles.count("system") + roles.count("developer") <= 1, f"two system messages: {roles}"
    for system in ("system", "developer"):
        if system in roles:
            assert roles.index(system) == 0, f"a system message not first: {roles}"
    open_calls: set[str] = set()
    for message in messages:
        if message.get("role") == "tool":
            call = message.get("tool_call_id")
            assert call in open_calls, f"a tool message answers no open tool call: {message}"
            open_calls.discard(str(call))
            continue
        assert not open_calls, f"tool calls {open_calls} unanswered before a {message.get('role')}"
        if message.get("role") == "assistant":
            open_calls = {str(c.get("id")) for c in message.get("tool_calls") or ()}
    assert not open_calls, f"tool calls {open_calls} never answered"


def assert_memory_after_tools(messages: Sequence[Mapping[str, Any]]) -> None:
    """The one memory message is a user message right after the last tool message of
    its round, and that round answers every call of the assistant message before it."""
    found = memory_indexes(messages)
    assert len(found) == 1, f"memory in {len(found)} messages, not one: {found}"
    (at,) = found
    assert messages[at].get("role") == "user", f"memory in a {messages[at].get('role')} message"
    assert at > 0 and messages[at - 1].get("role") == "tool", (
        "memory not right after a tool message"
    )
    before = messages[:at]
    last_assistant = max(i for i, m in enumerate(before) if m.get("role") == "assistant")
    calls = {str(c.get("id")) for c in messages[last_assistant].get("tool_calls") or ()}
    answered = {str(m.get("tool_call_id")) for m in messages[last_assistant + 1 : at]}
    assert calls and answered == calls, f"memory before calls {calls - answered} were answered"

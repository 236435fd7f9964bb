"""Conversion between asyncrecall contents and OpenAI chat ``messages``.

The pairing rule (see the wire format in ``docs/contract``): a model content's
function calls become ONE assistant message with ``tool_calls``; the next user
content's function responses become ``role: "tool"`` messages, contiguous and in
the order of the calls (not of the parts); that user content's text parts become
ONE user message after the tool messages.

:func:`contents_to_messages` is lenient: it orders what it is given and leaves the
checking to :func:`validate_messages`, which the OpenAI model runs before each
request in debug mode (``ASYNCRECALL_DEBUG=1``) and the tests run always.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from asyncrecall._exceptions import HistoryError
from asyncrecall.models._types import Content, FunctionCall, FunctionResponse, Text, ToolSpec

__all__ = [
    "contents_to_messages",
    "tools_to_openai",
    "validate_messages",
]

Message = dict[str, Any]


def contents_to_messages(
    contents: Sequence[Content], *, system: str | None = None
) -> list[Message]:
    """Turn a conversation into OpenAI chat ``messages`` (a new list of new dicts).

    Raises :class:`~asyncrecall.HistoryError` only for what cannot be expressed at
    all: a function call in a user content or a function response in a model one.
    """
    messages: list[Message] = []
    if system:
        messages.append({"role": "system", "content": system})
    previous_calls: tuple[FunctionCall, ...] = ()
    for position, content in enumerate(contents):
        if content.role == "model":
            messages.append(_assistant_message(content, position))
            previous_calls = content.function_calls
        else:
            messages.extend(_user_messages(content, previous_calls, position))
            previous_calls = ()
    return messages


def _assistant_message(content: Content, position: int) -> Message:
    if content.function_responses:
        raise HistoryError(
            f"content #{position} (model) holds a function response; responses belong to the user"
        )
    calls = content.function_calls
    text = content.text
    if not calls:
        return {"role": "assistant", "content": text}
    # `"content": ""`, never null nor left out: llama-cpp-python's server answers null
    # with HTTP 500 (a validation error), and a missing key with HTTP 500 too (chat
    # templates such as SmolLM2's read message['content']); "" is accepted everywhere.
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [_tool_call(call) for call in calls],
    }


def _tool_call(call: FunctionCall) -> Message:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(dict(call.args))},
    }


def _user_messages(
    content: Content, previous_calls: Sequence[FunctionCall], position: int
) -> list[Message]:
    if content.function_calls:
        raise HistoryError(
            f"content #{position} (user) holds a function call; calls belong to the model"
        )
    responses = content.function_responses
    if not responses:
        return [{"role": "user", "content": _user_text(content)}]
    rank = {call.id: i for i, call in enumerate(previous_calls)}
    # Calls' order first; a response to no known call keeps its place after them, so
    # the validator can name it.
    ordered = sorted(
        enumerate(responses), key=lambda item: (rank.get(item[1].id, len(rank)), item[0])
    )
    messages: list[Message] = [_tool_message(response) for _, response in ordered]
    if any(isinstance(part, Text) for part in content.parts):
        messages.append({"role": "user", "content": _user_text(content)})
    return messages


def _user_text(content: Content) -> str:
    """A user content's text parts as one message: each part is its own block (a system
    reminder, the memory block, the user's words), so they are kept a blank line apart."""
    return "\n\n".join(part.text for part in content.parts if isinstance(part, Text))


def _tool_message(response: FunctionResponse) -> Message:
    return {
        "role": "tool",
        "tool_call_id": response.id,
        "content": json.dumps(dict(response.response), ensure_ascii=False),
    }


def tools_to_openai(tools: Sequence[ToolSpec]) -> list[Message]:
    """The ``tools`` request field: one function tool per spec."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
            },
        }
        for tool in tools
    ]


def validate_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    """Check the tool-call pairing rule; raise :class:`~asyncrecall.HistoryError` if broken.

    Every assistant message with ``tool_calls`` must be followed at once by exactly
    one ``tool`` message per call, in the calls' order, each id once, with nothing
    between; and every ``tool`` message must answer such a call.
    """
    i = 0
    while i < len(messages):
        message = messages[i]
        role = message.get("role")
        if role == "tool":
            raise HistoryError(
                f"message #{i}: tool message for {message.get('tool_call_id')!r} "
                "follows no assistant tool call"
            )
        calls = (message.get("tool_calls") or ()) if role == "assistant" else ()
        if not calls:
            i += 1
            continue
        ids = [str(call.get("id")) for call in calls]
        if len(set(ids)) != len(ids):
            raise HistoryError(f"message #{i}: assistant tool call ids repeat: {ids}")
        for offset, call_id in enumerate(ids, start=1):
            j = i + offset
            if j >= len(messages):
                raise HistoryError(
                    f"message #{i}: tool call {call_id!r} has no tool message after it"
                )
            follower = messages[j]
            if follower.get("role") != "tool":
                raise HistoryError(
                    f"message #{j}: expected the tool message for call {call_id!r}, "
                    f"got role {follower.get('role')!r}"
                )
            got = str(follower.get("tool_call_id"))
            if got != call_id:
                raise HistoryError(
                    f"message #{j}: expected the tool message for call {call_id!r} "
                    f"(calls' order {ids}), got {got!r}"
                )
        i += len(ids) + 1

"""The main model's wire for a framework that speaks Anthropic Messages to its model."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from asyncrecall.models import FunctionCall
from asyncrecall.testing import AnthropicServer, Reply
from asyncrecall_conformance._wire import MAIN_MODEL, LocalServerWire, WireRequest

__all__ = ["AnthropicServerWire", "chat_messages"]

#: How the Claude Code CLI marks the context it adds to a message or a tool's result.
_CONTEXT_TAG = "<system-reminder>"


class AnthropicServerWire(LocalServerWire):
    """A :class:`~asyncrecall_conformance.Wire` on an
    :class:`~asyncrecall.testing.AnthropicServer`: the main model is the server's model
    ``model`` on ``POST /v1/messages`` (its ``base_url``, without ``/v1``, is what
    ``ANTHROPIC_BASE_URL`` takes), and each request reads back as OpenAI chat
    messages (:func:`chat_messages`). The kit's side model stays on the same server's
    OpenAI chat completions route, so a driver that uses this wire sets
    ``Driver.server_type = AnthropicServer``.

    ``tool_prefix`` is what the framework puts before the tool's name (the Claude Agent
    SDK's in-process MCP server ``files`` makes ``read_file`` ``mcp__files__read_file``):
    the scripted tool calls get it.
    """

    def __init__(
        self, server: AnthropicServer, *, model: str = MAIN_MODEL, tool_prefix: str = ""
    ) -> None:
        if not isinstance(server, AnthropicServer):
            raise TypeError(
                f"AnthropicServerWire needs an AnthropicServer, not {type(server).__name__} "
                "(set the driver's server_type = AnthropicServer)"
            )
        super().__init__(server, model=model)
        self.tool_prefix = tool_prefix

    def script(self, *replies: Reply | str) -> None:
        self.server.script(self._model, *(self._prefixed(r) for r in replies))

    def requests(self) -> list[WireRequest]:
        return [
            WireRequest(messages=chat_messages(r.body), arrived_at=r.arrived_at, raw=r)
            for r in self.server.requests
            if r.path == "/v1/messages" and r.model == self._model
        ]

    def _prefixed(self, reply: Reply | str) -> Reply | str:
        if isinstance(reply, str) or not reply.tool_calls or not self.tool_prefix:
            return reply
        calls: list[FunctionCall | tuple[str, Mapping[str, Any] | str]] = [
            dataclasses.replace(call, name=self.tool_prefix + call.name)
            if isinstance(call, FunctionCall)
            else (self.tool_prefix + call[0], call[1])
            for call in reply.tool_calls
        ]
        return dataclasses.replace(reply, tool_calls=calls)


def chat_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An Anthropic Messages request body as OpenAI chat messages, the kit's shape.

    * ``system`` (a string or text blocks) is the first message, role ``system``;
    * an assistant's ``text`` blocks are its content parts, its ``tool_use`` blocks its
      ``tool_calls`` (``id``, ``function.name``, ``function.arguments`` as JSON);
    * a user message's ``tool_result`` blocks are ``tool`` messages, in order, each with
      its ``tool_use_id`` as ``tool_call_id``, before a user message with the message's
      other blocks (if any);
    * within a tool result, the text blocks the client marks as its own context
      (``<system-reminder>``: the Claude Code CLI puts its hook context for a round of
      tool calls in the last result of the round) are not the tool's output: they are a
      user message right after that ``tool`` message. Context in the last result of a
      round reads as a user message after every tool message; in any other result it
      reads as a user message between them, which no valid chat has;
    * a message with a string content, or of another role, is kept as it is.
    """
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _text_of(system)})
    for message in body.get("messages") or ():
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str) or not isinstance(content, list):
            messages.append({"role": role, "content": content})
        elif role == "assistant":
            messages.append(_assistant(content))
        else:
            others: list[dict[str, Any]] = []
            for block in content:
                if block.get("type") == "tool_result":
                    output, context = _result_parts(block.get("content"))
                    result = {"role": "tool", "tool_call_id": block.get("tool_use_id")}
                    messages.append({**result, "content": output})
                    if context:
                        messages.append({"role": "user", "content": context})
                else:
                    others.append(_part(block))
            if others:
                messages.append({"role": role, "content": others})
    return messages


def _assistant(content: list[Mapping[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [_part(b) for b in content if b.get("type") == "text"],
    }
    calls = [
        {
            "id": b.get("id"),
            "type": "function",
            "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})},
        }
        for b in content
        if b.get("type") == "tool_use"
    ]
    if calls:
        message["tool_calls"] = calls
    return message


def _result_parts(content: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A tool result's content: the tool's output, and the client's context in it."""
    if not isinstance(content, list):
        return [{"type": "text", "text": _text_of(content)}], []
    output = [_part(b) for b in content if not _is_context(b)]
    context = [_part(b) for b in content if _is_context(b)]
    return output, context


def _is_context(block: Mapping[str, Any]) -> bool:
    text = block.get("text")
    return block.get("type") == "text" and isinstance(text, str) and text.startswith(_CONTEXT_TAG)


def _part(block: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "text", "text": _text_of(block)}


def _text_of(value: Any) -> str:
    """The text of a string, a block, or a list of them (nested tool results too)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        inner = value.get("text", value.get("content", ""))
        return _text_of(inner)
    if isinstance(value, Iterable):
        return "".join(_text_of(v) for v in value)
    return ""

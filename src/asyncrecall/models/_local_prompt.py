"""Prompts and grammars of the embedded model: ChatML with llama-cpp's function-calling format.

SmolLM2 speaks ChatML (``<|im_start|>role\\n...<|im_end|>``). Tools follow the
conventions of llama-cpp-python's ``chatml-function-calling`` chat format: the system
turn lists ``functions.<name>:`` with each tool's JSON schema, and the assistant
answers either ``message:`` followed by text, or ``functions.<name>:`` followed by the
arguments as JSON. We render that format ourselves rather than call the library's
handler because the handler (0.3.x) cannot stream once the model picks a tool
("Automatic streaming tool choice is not supported"), constrains the text reply of a
turn that offered tools to nothing but ``<|im_end|>`` (so every text answer comes
back empty), and drops ``role: "tool"`` messages from the prompt. Tool results are
rendered as a user turn ``Result of functions.<name>:`` followed by the JSON result.

The conversation is first turned into OpenAI messages by
:func:`asyncrecall.models._convert.contents_to_messages`, so the pairing of calls and
results is the same as for remote models.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from asyncrecall.models._convert import contents_to_messages
from asyncrecall.models._types import Content, ToolSpec

__all__ = [
    "END_OF_TURN",
    "MESSAGE_PREFIX",
    "START_OF_TURN",
    "chat_prompt",
    "function_prefix",
    "json_prompt",
    "route_grammar",
]

END_OF_TURN: Final = "<|im_end|>"
#: Opens a turn; a model that writes it has ended its own turn (a stop sequence).
START_OF_TURN: Final = "<|im_start|>"
MESSAGE_PREFIX: Final = "message:"
_FUNCTION_PREFIX: Final = "functions."


def function_prefix(name: str) -> str:
    """What the assistant writes before a call's arguments: ``functions.<name>:``."""
    return f"{_FUNCTION_PREFIX}{name}:"


def _turn(role: str, text: str) -> str:
    return f"{START_OF_TURN}{role}\n{text}{END_OF_TURN}\n"


def _tools_block(tools: Sequence[ToolSpec]) -> str:
    lines = ["", "", "You have access to the following functions:"]
    for tool in tools:
        lines.append("")
        lines.append(f"{function_prefix(tool.name)}")
        if tool.description:
            lines.append(f"// {tool.description}")
        lines.append(json.dumps(dict(tool.parameters), ensure_ascii=False))
    lines += [
        "",
        "Answer the user in one of two ways.",
        "To reply with text, start with the line 'message:' and then write your reply.",
        "To call a function, start with the line 'functions.<function_name>:' and then "
        "write its arguments as one JSON object, using values taken from the conversation.",
    ]
    return "\n".join(lines)


def chat_prompt(
    contents: Sequence[Content], *, system: str | None, tools: Sequence[ToolSpec]
) -> str:
    """The ChatML prompt of a main-model turn, ending with the assistant's opening."""
    messages = contents_to_messages(contents, system=system)
    parts: list[str] = []
    has_system = bool(messages) and messages[0]["role"] == "system"
    if tools and not has_system:
        parts.append(_turn("system", "You are a helpful assistant." + _tools_block(tools)))
    names: dict[str, str] = {}
    for message in messages:
        parts.append(_render(message, tools=tools, names=names))
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _render(message: Mapping[str, Any], *, tools: Sequence[ToolSpec], names: dict[str, str]) -> str:
    role = message["role"]
    content = message.get("content") or ""
    if role == "system":
        return _turn("system", content + (_tools_block(tools) if tools else ""))
    if role == "assistant":
        pieces: list[str] = []
        if content:
            pieces.append(f"{MESSAGE_PREFIX}\n{content}" if tools else content)
        for call in message.get("tool_calls") or []:
            function = call["function"]
            names[call["id"]] = function["name"]
            pieces.append(f"{function_prefix(function['name'])}\n{function['arguments']}")
        return _turn("assistant", "\n".join(pieces))
    if role == "tool":
        name = names.get(message.get("tool_call_id", ""), "tool")
        return _turn("user", f"Result of {function_prefix(name)}\n{content}")
    return _turn("user", content)


def json_prompt(*, system: str, prompt: str) -> str:
    """The ChatML prompt of a side query (its answer is constrained by a grammar)."""
    return _turn("system", system) + _turn("user", prompt) + "<|im_start|>assistant\n"


def _literal(text: str) -> str:
    """A GBNF string literal (JSON string escaping is valid GBNF)."""
    return json.dumps(text)


def route_grammar(tools: Sequence[ToolSpec]) -> str:
    """GBNF for the turn's first words: ``message:`` or ``functions.<a tool>:``."""
    choices = [_literal(MESSAGE_PREFIX)] + [_literal(function_prefix(t.name)) for t in tools]
    return "root ::= " + " | ".join(choices) + "\n"

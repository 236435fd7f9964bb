"""Conversation values: contents with a role and parts. Frozen, so history is safe to share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "Content",
    "FunctionCall",
    "FunctionResponse",
    "Part",
    "PromptPrefix",
    "Role",
    "Text",
    "ToolSpec",
    "model_content",
    "user_content",
]

Role: TypeAlias = Literal["user", "model"]


@dataclass(frozen=True, slots=True)
class Text:
    """A piece of text."""

    text: str


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """A tool call the model made; ``id`` pairs it with its response."""

    id: str
    name: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FunctionResponse:
    """The result of one tool call, sent back under the call's ``id``."""

    id: str
    name: str
    response: Mapping[str, Any] = field(default_factory=dict)


Part: TypeAlias = Text | FunctionCall | FunctionResponse


@dataclass(frozen=True, slots=True)
class Content:
    """One turn of the conversation: who spoke and what."""

    role: Role
    parts: tuple[Part, ...]

    @property
    def text(self) -> str:
        """The text parts joined, for display and logs."""
        return "".join(p.text for p in self.parts if isinstance(p, Text))

    @property
    def function_calls(self) -> tuple[FunctionCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, FunctionCall))

    @property
    def function_responses(self) -> tuple[FunctionResponse, ...]:
        return tuple(p for p in self.parts if isinstance(p, FunctionResponse))


def user_content(*parts: Part | str) -> Content:
    """A user content from parts; plain strings become :class:`Text`."""
    return Content("user", tuple(Text(p) if isinstance(p, str) else p for p in parts))


def model_content(*parts: Part | str) -> Content:
    """A model content from parts; plain strings become :class:`Text`."""
    return Content("model", tuple(Text(p) if isinstance(p, str) else p for p in parts))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PromptPrefix:
    """How a caller's main turns begin: their system prompt and the tools they offer.

    A side query given one (``Model.generate_json(prefix=...)``) begins the same way,
    with its own instruction after it, so a server that keeps the longest common start
    of the prompts it read (llama.cpp's servers, a provider's prompt cache) still holds
    the main turns' start when the next main turn comes."""

    system: str
    tools: tuple[ToolSpec, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON value :meth:`from_json` reads back."""
        return {
            "system": self.system,
            "tools": [
                {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
                for t in self.tools
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> PromptPrefix:
        """Read :meth:`to_json`'s value; ``ValueError`` when it is not one."""
        if not isinstance(data, Mapping) or not isinstance(data.get("system"), str):
            raise ValueError("a prompt prefix needs a system prompt")
        tools = []
        for raw in data.get("tools") or ():
            if not (
                isinstance(raw, Mapping)
                and isinstance(raw.get("name"), str)
                and isinstance(raw.get("description"), str)
                and isinstance(raw.get("parameters"), Mapping)
            ):
                raise ValueError(f"bad tool {raw!r:.80}")
            tools.append(ToolSpec(raw["name"], raw["description"], dict(raw["parameters"])))
        return cls(data["system"], tuple(tools))

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

"""The model protocol: what the rest of asyncrecall needs from a model.

Two calls. :meth:`Model.stream` is the main model's streaming turn (text deltas,
complete tool calls, usage, finish reason). :meth:`Model.generate_json` is a side
query that must answer one JSON object matching a schema. Cancelling the task that
runs either call must end the underlying request (for HTTP: close the connection).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from asyncrecall.models._types import Content, FunctionCall, PromptPrefix, ToolSpec

__all__ = [
    "Finished",
    "Model",
    "StreamEvent",
    "TextDelta",
    "ToolCallReady",
    "Usage",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text, as it streams."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """A tool call whose name and arguments are complete."""

    call: FunctionCall


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for one request.

    ``estimated`` is true when the endpoint reported none and the counts were
    estimated from the sizes of the request and the answer (about 4 characters a
    token, OpenAI's rule of thumb for English), so token limits still work.
    """

    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class Finished:
    """The stream ended; ``reason`` is the endpoint's finish reason (``stop``, ``tool_calls``)."""

    reason: str | None


StreamEvent: TypeAlias = TextDelta | ToolCallReady | Usage | Finished


@runtime_checkable
class Model(Protocol):
    """A chat model. Implementations: the OpenAI-compatible model, the scripted model."""

    @property
    def name(self) -> str:
        """The model's name as the endpoint knows it."""
        ...

    def stream(
        self,
        contents: Sequence[Content],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> AsyncIterator[StreamEvent]:
        """Stream one main-model turn. Ends with exactly one :class:`Finished`."""
        ...

    async def generate_json(
        self,
        *,
        system: str,
        prompt: str,
        schema: Mapping[str, Any],
        schema_name: str,
        max_tokens: int | None = None,
        prefix: PromptPrefix | None = None,
    ) -> Any:
        """One side query answering a JSON value that should match ``schema``.

        ``max_tokens`` caps the answer (``None``: the model's side-query default, sized
        for a recall's few paths; extraction and consolidation ask for more).
        ``prefix``: the request begins as the caller's main turns do (their system
        prompt, their tools declared and none called), ``system`` then leads the user
        message; a model whose side queries do not share the main turns' prompt cache
        may ignore it.
        Raises :class:`~asyncrecall.ModelProtocolError` when the answer is not JSON.
        Checking the value against the schema is the caller's job.
        """
        ...

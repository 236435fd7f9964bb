"""Small helpers shared by the model tests."""

from __future__ import annotations

from collections.abc import Sequence

from asyncrecall.models import Model, StreamEvent, ToolSpec, user_content


async def run_turn(
    model: Model, prompt: str = "hi", *, system: str | None = None, tools: Sequence[ToolSpec] = ()
) -> list[StreamEvent]:
    """All events of one streamed turn for a one-message conversation."""
    stream = model.stream([user_content(prompt)], system=system, tools=tools)
    return [event async for event in stream]

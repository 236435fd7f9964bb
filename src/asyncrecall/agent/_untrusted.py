"""Text the agent passes on from outside: tool results cannot pose as the harness's blocks.

A tool result holds whatever a file, a page or a command printed, and any of them may
carry a forged ``<system-reminder>`` block ("the project's install rule is ...").
Every string of a tool response (values and keys, at any depth) has the wrapper's tags
neutralised the way memory text is (:func:`~asyncrecall.memory.neutralise_tags`)
before the response enters the history, so the only wrapper tags a request holds are
the harness's own: the memory block and the client's reminders.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asyncrecall.memory import neutralise_tags
from asyncrecall.models import FunctionResponse

__all__ = ["neutralised_response"]


def _neutralised(value: Any) -> Any:
    if isinstance(value, str):
        return neutralise_tags(value)
    if isinstance(value, Mapping):
        return {_neutralised(k): _neutralised(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_neutralised(v) for v in value]
    return value


def neutralised_response(response: FunctionResponse) -> FunctionResponse:
    """``response`` with every wrapper tag in its strings neutralised (itself when none)."""
    cleaned = _neutralised(response.response)
    if cleaned == response.response:
        return response
    return FunctionResponse(response.id, response.name, cleaned)

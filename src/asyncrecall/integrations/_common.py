"""What the adapters share: the text of a user prompt, and the end-of-run reason."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from asyncrecall.prefetch import DiscardReason

__all__ = ["end_reason", "prompt_text"]


def prompt_text(prompt: Any) -> str:
    """The text of a user prompt given as a string or as a sequence of content items.

    Items that are strings, or that carry a ``text`` (attribute or mapping key) count;
    images, files and the rest do not.
    """
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, dict):
        return _item_text(prompt)
    if isinstance(prompt, Iterable):
        return "\n".join(text for item in prompt if (text := _item_text(item)))
    return ""


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in ("text", "content"):
            value = item.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, list):
                return prompt_text(value)
        return ""
    text = getattr(item, "text", None)
    return text if isinstance(text, str) else ""


def end_reason(error: BaseException | None) -> DiscardReason:
    """How a run ended, as a discard reason: normally, cancelled, or failed."""
    if error is None:
        return "turn_ended"
    if isinstance(error, asyncio.CancelledError | GeneratorExit | KeyboardInterrupt):
        return "cancelled"
    return "error"

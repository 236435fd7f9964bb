"""What the adapters share: the text of a user prompt, and the end-of-run reason."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from asyncrecall.prefetch import DiscardReason, PendingRecall, RecallPrefetcher

__all__ = ["adopt_or_start", "end_reason", "finish", "prompt_text"]


def adopt_or_start(prefetcher: RecallPrefetcher, key: str, query: str) -> PendingRecall | None:
    """The key's recall for this run: the one the app started already, or a new one."""
    if prefetcher.pending(key) is None:
        prefetcher.start(key, query)
    return prefetcher.pending(key)


def finish(
    prefetcher: RecallPrefetcher, key: str, recall: PendingRecall | None, reason: DiscardReason
) -> None:
    """Cancel this run's recall if it is still the key's pending one.

    A recall already taken is left alone, and so is a newer one the app started for the
    key's next message (a streamed run's end can be seen after that).
    """
    if recall is not None and prefetcher.pending(key) is recall:
        prefetcher.cancel(key, reason)


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

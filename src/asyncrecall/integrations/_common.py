"""What the adapters share: which recall a run may adopt, the text of a user prompt, and
the end-of-run reason."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable
from typing import Any

from asyncrecall.prefetch import DiscardReason, MemoryBlock, PendingRecall, RecallPrefetcher

__all__ = [
    "adopt_or_start",
    "end_reason",
    "finish",
    "forget_conversation",
    "forget_unsent",
    "has_shown",
    "prompt_text",
    "record_shown",
    "start_recall",
]

# The prefetcher does not record which message a recall is for; the adapters do, on top
# of its public API. A recall started here is known by its query; one the app started
# with ``prefetcher.start`` is not, and is adopted by the first run that asks only.
_queries: weakref.WeakKeyDictionary[PendingRecall, str] = weakref.WeakKeyDictionary()
_adopted: weakref.WeakSet[PendingRecall] = weakref.WeakSet()
# The blocks each conversation was shown by an adapter whose framework keeps them in the
# history it returns: the app re-sends that history, or the files are shown again.
_shown: weakref.WeakKeyDictionary[RecallPrefetcher, dict[str, list[MemoryBlock]]] = (
    weakref.WeakKeyDictionary()
)


#: How long a recall an adapter starts in its run-start hook waits for the run's first
#: model request (``RecallPrefetcher.start``'s ``until_request``): that request leaves
#: before the side query is prepared and sent. The hooks take at that request, within
#: a few milliseconds of the start; the bound is for a run that never gets there.
UNTIL_REQUEST_S = 0.05


def start_recall(
    prefetcher: RecallPrefetcher, key: str, query: str, *, until_request: float | None = None
) -> PendingRecall | None:
    """Start the key's recall for the user message ``query`` and remember that message.

    What an app calls when the message arrives (instead of ``prefetcher.start``) so that
    a run adopts the recall only if it is for the same message. (``until_request``: see
    ``RecallPrefetcher.start``; the adapters' own hooks set it.)
    """
    prefetcher.start(key, query, until_request=until_request)
    recall = prefetcher.pending(key)
    if recall is not None:
        _queries[recall] = query
    return recall


def adopt_or_start(
    prefetcher: RecallPrefetcher,
    key: str,
    query: str,
    *,
    history: Iterable[str] | None = None,
) -> PendingRecall | None:
    """The key's recall for this run's message ``query``: the pending one if it was
    started for this message, else a new one (which supersedes it).

    A pending recall is for this message when it was started for the same query text;
    one of unknown query (the app's own ``prefetcher.start``) when no run adopted it yet.
    A recall left behind by an earlier run (cancelled before it could clean up, or run
    without the adapter's wrapper) is never given to the next message.

    ``history`` is the text of the messages this run re-sends (for adapters whose
    framework keeps the block in its history): the files of every block shown earlier
    that it no longer holds are un-surfaced first (:func:`forget_unsent`), and a pending
    recall, which left them out, is started afresh.
    """
    unsent = history is not None and forget_unsent(prefetcher, key, history)
    recall = prefetcher.pending(key)
    if recall is None or unsent or not _for_message(recall, query):
        recall = start_recall(prefetcher, key, query, until_request=UNTIL_REQUEST_S)
    if recall is not None:
        _adopted.add(recall)
    return recall


def _for_message(recall: PendingRecall, query: str) -> bool:
    known = _queries.get(recall)
    if known is not None:
        return known == query
    return recall not in _adopted


def record_shown(prefetcher: RecallPrefetcher, key: str, block: MemoryBlock) -> None:
    """Remember that ``block`` went into the key's history (see :func:`forget_unsent`).

    Conversations the prefetcher no longer holds anything surfaced for (reset, evicted)
    are dropped now and then (when the count reaches a power of two from twice the
    prefetcher's bound on, or from 64), so records stay within about twice the
    prefetcher's own conversations.
    """
    keys = _shown.setdefault(prefetcher, {})
    keys.setdefault(key, []).append(block)
    count = len(keys)
    if count >= min(64, 2 * prefetcher.max_conversations) and count & (count - 1) == 0:
        for gone in [k for k in keys if k != key and not prefetcher.surfaced(k)]:
            del keys[gone]


def has_shown(prefetcher: RecallPrefetcher, key: str) -> bool:
    """Whether the conversation has blocks recorded by :func:`record_shown`."""
    return bool(_shown.get(prefetcher, {}).get(key))


def forget_unsent(prefetcher: RecallPrefetcher, key: str, history: Iterable[str]) -> bool:
    """Un-surface the files of the blocks shown in the conversation that ``history`` (the
    text of the messages the next call re-sends) no longer holds; whether any were.

    A block counts as shown only while it stays in the history that the next call sends:
    an app that re-sends a history without it (its own store of the chat, a trimmed
    one, none) must get its files offered again, not lose them.
    """
    blocks = _shown.get(prefetcher, {}).get(key)
    if not blocks:
        return False
    texts = list(history)
    kept = [b for b in blocks if any(b.text in text for text in texts)]
    kept_paths = {path for block in kept for path in block.paths}
    unsent = {path for b in blocks if b not in kept for path in b.paths} - kept_paths
    _shown[prefetcher][key] = kept
    unsent &= prefetcher.surfaced(key)
    if unsent:
        prefetcher.unsurface(key, unsent)
    return bool(unsent)


def finish(
    prefetcher: RecallPrefetcher, key: str, recall: PendingRecall | None, reason: DiscardReason
) -> None:
    """Cancel this run's recall if it is still the key's pending one.

    A recall already taken is left alone, and so is a newer one the app started for the
    key's next message (a streamed run's end can be seen after that).
    """
    if recall is not None and prefetcher.pending(key) is recall:
        prefetcher.cancel(key, reason)


def forget_conversation(prefetcher: RecallPrefetcher, key: str) -> None:
    """Forget a conversation the adapter made a key for, for one run only, at its end.

    A run without a conversation id of the app's gets a fresh key; once the run is over
    nothing can use the key again, so it is dropped now (:meth:`RecallPrefetcher.reset`,
    and its record of shown blocks) rather than sitting in the prefetcher until evicted.
    Memory shown in that run may then be shown again in the next one.
    """
    prefetcher.reset(key)
    keys = _shown.get(prefetcher)
    if keys is not None:
        keys.pop(key, None)


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

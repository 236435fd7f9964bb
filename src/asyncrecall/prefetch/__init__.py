"""Memory recall that never adds latency, for any agent loop.

The pattern (from Qwen Code's asynchronous memory recall):

1. When the user's message arrives, :meth:`RecallPrefetcher.start` the recall. Never
   await it.
2. Just before the request that carries the user's message, :meth:`RecallPrefetcher.take`
   at ``"user_query"``: if the recall has settled, put the block first, before the
   user's text.
3. Otherwise, just before each request that carries tool results, take at
   ``"tool_result"``: if it has settled now, append the block after *every* tool
   result (tool results must directly follow the tool calls).
4. A recall is taken at most once; files shown once in a conversation are not offered
   again.
5. On a new user message (automatic), a reset, an early exit, an error or a cancel,
   :meth:`RecallPrefetcher.cancel`: the side query's HTTP connection closes.

Example::

    recall = RecallPrefetcher(memory, instant_selector=LexicalSelector())
    async with recall:
        await recall.warm()  # at start-up (at import, with no loop: recall.start_warming())
        recall.start("thread-1", user_text)  # warm: the instant recall is computed here
        block = recall.take("thread-1", "user_query")
        ...                                 # send the request (with block.text if any)
        block = recall.take("thread-1", "tool_result")
        ...
        recall.cancel("thread-1", "turn_ended")

A block taken counts as shown: its files are not offered again in the conversation.
So keep the block in the history your loop sends with the next requests (as the
message you put it in); if the request that carried it fails, or your loop drops it
from the history, call ``recall.unsurface("thread-1", block.paths)`` so recall offers
those files again.

:mod:`asyncrecall.integrations` carries this into Pydantic AI, the OpenAI Agents SDK
and LangChain. This package knows memory, not the agent.
"""

from __future__ import annotations

# A name imported ``as`` itself is not public: other layers and the tests take it from
# here, but it is out of ``__all__`` and may change without notice. The exceptions
# (``RecallNotReady`` included) are public at the top level, ``asyncrecall``.
from asyncrecall._exceptions import RecallNotReady as RecallNotReady
from asyncrecall.prefetch._events import Budget as Budget
from asyncrecall.prefetch._events import (
    DiscardReason,
    InjectionPoint,
    MemoryBudgetEvent,
    MemoryDiscardedEvent,
    MemoryInjectedEvent,
    MemoryInstantPreemptedEvent,
    MemoryRecallEmptyEvent,
    MemoryRecallSkippedEvent,
    MemoryRecallStartedEvent,
    PrefetchEvent,
)
from asyncrecall.prefetch._events import SkipReason as SkipReason
from asyncrecall.prefetch._handle import PendingRecall
from asyncrecall.prefetch._prefetcher import INSTANT_STRATEGY as INSTANT_STRATEGY
from asyncrecall.prefetch._prefetcher import MemoryBlock, RecallPrefetcher

__all__ = [
    "DiscardReason",
    "InjectionPoint",
    "MemoryBlock",
    "MemoryBudgetEvent",
    "MemoryDiscardedEvent",
    "MemoryInjectedEvent",
    "MemoryInstantPreemptedEvent",
    "MemoryRecallEmptyEvent",
    "MemoryRecallSkippedEvent",
    "MemoryRecallStartedEvent",
    "PendingRecall",
    "PrefetchEvent",
    "RecallPrefetcher",
]

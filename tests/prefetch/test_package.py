"""The prefetch package's surface and its place in the layers."""

from __future__ import annotations

import inspect
import subprocess
import sys

import asyncrecall
import asyncrecall.prefetch as prefetch
from asyncrecall.agent import MemoryDiscardedEvent, MemoryInjectedEvent, MemoryRecallStartedEvent


def test_all_is_sorted_documented_and_complete() -> None:
    """``__all__`` is in ruff's order, every class has a docstring, nothing else is public."""
    key = lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)  # noqa: E731
    assert prefetch.__all__ == sorted(prefetch.__all__, key=key)
    for name in prefetch.__all__:
        value = getattr(prefetch, name)
        if inspect.isclass(value):
            assert value.__doc__, name
    public = {
        n
        for n, v in vars(prefetch).items()
        if not n.startswith("_") and not inspect.ismodule(v) and n != "annotations"
    }
    assert public <= set(prefetch.__all__)


def test_top_level_and_agent_names_are_the_prefetch_objects() -> None:
    """``asyncrecall.RecallPrefetcher``/``MemoryBlock`` and the agent's memory events are
    the prefetch package's own objects (one implementation)."""
    assert asyncrecall.RecallPrefetcher is prefetch.RecallPrefetcher
    assert asyncrecall.MemoryBlock is prefetch.MemoryBlock
    assert MemoryRecallStartedEvent is prefetch.MemoryRecallStartedEvent
    assert MemoryInjectedEvent is prefetch.MemoryInjectedEvent
    assert MemoryDiscardedEvent is prefetch.MemoryDiscardedEvent


def test_prefetch_imports_neither_the_agent_nor_the_cli() -> None:
    """The prefetcher sits on memory: importing it loads no agent, CLI or integration."""
    code = (
        "import sys, asyncrecall.prefetch; "
        "print(sorted(m for m in sys.modules if m.startswith(('asyncrecall.agent', "
        "'asyncrecall.cli', 'asyncrecall.integrations'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

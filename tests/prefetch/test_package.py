"""The prefetch package's surface and its place in the layers."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import asyncrecall
import asyncrecall.prefetch as prefetch
from asyncrecall.agent import MemoryDiscardedEvent, MemoryInjectedEvent, MemoryRecallStartedEvent
from asyncrecall.memory import FolderStore


def test_all_is_sorted_and_documented() -> None:
    """``__all__`` is in ruff's order and every class has a docstring (tests/test_public_api.py
    pins the names and what else is importable)."""
    key = lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)  # noqa: E731
    assert prefetch.__all__ == sorted(prefetch.__all__, key=key)
    for name in prefetch.__all__:
        value = getattr(prefetch, name)
        if inspect.isclass(value):
            assert value.__doc__, name


def test_top_level_and_agent_names_are_the_prefetch_objects() -> None:
    """``asyncrecall.RecallPrefetcher``/``MemoryBlock`` and the memory events the agent
    emits (still importable from ``asyncrecall.agent``, exported by this package alone)
    are the prefetch package's own objects (one implementation)."""
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


def docstring_example() -> str:
    """The indented block after ``Example::`` in the package docstring, dedented."""
    doc = prefetch.__doc__ or ""
    lines = doc.split("Example::\n", 1)[1].splitlines()
    block: list[str] = []
    for line in lines:
        if line.strip() and not line.startswith(" "):
            break
        block.append(line)
    return textwrap.dedent("\n".join(block)).strip("\n")


# Runs the example as an ``async def`` body, with ``RecallPrefetcher`` recording what
# each ``take`` returns, ``memory`` over the folder given, and a matching ``user_text``.
EXAMPLE_RUNNER = """
import asyncio, json, sys
from pathlib import Path

from asyncrecall.memory import LexicalSelector, FolderStore, Recaller, ModelSelector
from asyncrecall.prefetch import RecallPrefetcher as _RecallPrefetcher
from asyncrecall.testing import ScriptedModel

takes = []


class RecallPrefetcher(_RecallPrefetcher):
    def take(self, key, point):
        block = super().take(key, point)
        takes.append({{"point": point, "text": block and block.text}})
        return block


async def example(memory, user_text):
{body}


memory = Recaller(FolderStore(Path(sys.argv[1])), ModelSelector(ScriptedModel()))
asyncio.run(example(memory, "how do deploys reach the staging cluster?"))
print(json.dumps(takes))
"""


def test_the_docstring_example_injects_memory_on_the_first_message(tmp_path: Path) -> None:
    """The package docstring's example, copied as is into a new process, gets the memory
    at the first message's user-query take (it warms the folder before the first
    ``start``, so the instant pass is computed there), not only after a tool round."""
    store = FolderStore(tmp_path / "memory")
    body = "Run `make deploy-staging`, wait for the smoke tests, then promote."
    description = "deploys go through the staging cluster first"
    store.save_memory("deploy-flow", description, "project", body, origin="user")
    script = tmp_path / "example.py"
    code = EXAMPLE_RUNNER.format(body=textwrap.indent(docstring_example(), "    "))
    script.write_text(code, encoding="utf-8")

    out = subprocess.run(
        [sys.executable, str(script), str(store.root)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )

    first, *_ = json.loads(out.stdout)
    assert first["point"] == "user_query"
    assert first["text"] is not None and body in first["text"]

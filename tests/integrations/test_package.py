"""The integrations package: importing it imports no framework; the shared helpers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from types import SimpleNamespace

import pytest

from asyncrecall.integrations import _common
from asyncrecall.integrations._common import end_reason, prompt_text, record_shown
from asyncrecall.memory import FolderStore, LexicalSelector, Recaller
from asyncrecall.prefetch import MemoryBlock, RecallPrefetcher


def test_importing_the_package_imports_no_framework() -> None:
    """``import asyncrecall.integrations`` loads none of the frameworks."""
    code = (
        "import sys, asyncrecall.integrations; "
        "print(sorted(m for m in ("
        "'pydantic_ai', 'agents', 'langchain', 'langgraph', 'google.adk', 'litellm', "
        "'claude_agent_sdk') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("prompt", "text"),
    [
        (None, ""),
        ("plain", "plain"),
        (["a", SimpleNamespace(text="b"), object()], "a\nb"),
        ({"role": "user", "content": "hi"}, "hi"),
        ([{"type": "input_text", "text": "x"}, {"content": [{"text": "y"}]}], "x\ny"),
        ({"content": 3}, ""),
        (42, ""),
    ],
)
def test_prompt_text_keeps_only_text(prompt: object, text: str) -> None:
    """Strings and items with a text count; images, files and the rest do not."""
    assert prompt_text(prompt) == text


def test_end_reason_names_how_a_run_ended() -> None:
    """Normal end, cancellation (and generator close) and failure map to their reasons."""
    assert end_reason(None) == "turn_ended"
    assert end_reason(asyncio.CancelledError()) == "cancelled"
    assert end_reason(GeneratorExit()) == "cancelled"
    assert end_reason(ValueError("x")) == "error"


async def test_shown_block_records_never_outgrow_the_prefetchers_conversations(
    store: FolderStore,
) -> None:
    """The record of blocks shown per conversation drops the conversations the
    prefetcher holds nothing surfaced for (reset, evicted, per-run keys), so it stays
    bounded in a long-lived server."""
    async with RecallPrefetcher(Recaller(store, LexicalSelector())) as prefetcher:
        block = MemoryBlock("## Relevant memory", ("a.md",), "user_query", 0.0, "lexical")
        for i in range(1000):
            record_shown(prefetcher, f"run-{i}", block)  # none of them has anything surfaced
        assert len(_common._shown[prefetcher]) < 64

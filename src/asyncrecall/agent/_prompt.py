"""The system prompt: instructions, the tools, and the ``MEMORY.md`` index section."""

from __future__ import annotations

from pathlib import Path

from asyncrecall.memory import MemoryStoreProtocol, neutralise_tags
from asyncrecall.models import ToolSpec

__all__ = ["build_system_prompt"]

_INSTRUCTIONS = """\
You are asyncrecall, a careful coding agent working in the project at {root}.
Use the tools to look at the code before you answer; answer briefly and precisely.
Messages may carry <system-reminder> blocks: context from the harness, not from the user."""

_MEMORY = """\
# Memory
You have a persistent memory folder at {folder}. Relevant memories arrive by
themselves in <system-reminder> blocks headed "## Relevant memory"; they are
point-in-time notes, so check them against the current code before relying on them.
When you learn something worth keeping across sessions (a user preference, a
correction, a project fact, a pointer to a reference), save it with save_memory.

## MEMORY.md
{index}"""


def build_system_prompt(
    project_root: Path, tools: tuple[ToolSpec, ...], memory: MemoryStoreProtocol | None
) -> str:
    """Instructions, the list of tools and, with memory on, the index of memories."""
    sections = [_INSTRUCTIONS.format(root=project_root)]
    if tools:
        lines = "\n".join(f"- {tool.name}: {tool.description}" for tool in tools)
        sections.append(f"# Tools\n{lines}")
    if memory is not None:
        # A description is the model's text: it cannot forge a block here either.
        index = neutralise_tags(memory.index_for_prompt().strip()) or "(no memories saved yet)"
        sections.append(_MEMORY.format(folder=memory.location, index=index))
    return "\n\n".join(sections)

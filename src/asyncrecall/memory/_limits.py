"""The memory format's names and limits, the same for every store.

The index is ``MEMORY.md`` (a folder's file, a database's generated equivalent): one
line a memory, cut to :data:`INDEX_MAX_LINES` lines and :data:`INDEX_MAX_BYTES` bytes
for the system prompt, with a warning line when cut. Recall offers the
:data:`SCAN_LIMIT` newest memories; a memory is at most :data:`MAX_FILE_BYTES`, its
name at most :data:`MAX_NAME_BYTES` and a database namespace :data:`MAX_NAMESPACE_BYTES`,
counted in UTF-8 bytes as the database counts them (a B-tree entry holds at most 2,704
bytes: the two together stay below it).
"""

from __future__ import annotations

import os
from typing import Final

__all__ = [
    "INDEX_MAX_BYTES",
    "INDEX_MAX_LINES",
    "INDEX_NAME",
    "MAX_FILE_BYTES",
    "MAX_NAMESPACE_BYTES",
    "MAX_NAME_BYTES",
    "SCAN_LIMIT",
    "cut_index",
    "index_line",
    "inside",
]

INDEX_NAME: Final = "MEMORY.md"
SCAN_LIMIT: Final = 200
MAX_FILE_BYTES: Final = 1024 * 1024
MAX_NAME_BYTES: Final = 1000
MAX_NAMESPACE_BYTES: Final = 1000
INDEX_MAX_LINES: Final = 200
INDEX_MAX_BYTES: Final = 25_000


def index_line(name: str, rel: str, description: str) -> str:
    """The index line of a memory: ``- [name](rel) — description``."""
    title = name.replace("[", "(").replace("]", ")")
    return f"- [{title}]({rel}) — {description}" if description else f"- [{title}]({rel})"


def cut_index(lines: list[str], *, total_lines: int, total_bytes: int) -> str:
    """The first index lines within 200 lines and 25,000 bytes, with the folder's warning
    line when cut (``total_*``: the whole index's size)."""
    kept = "\n".join(lines[:INDEX_MAX_LINES])
    cut = total_lines > INDEX_MAX_LINES
    if len(kept.encode("utf-8")) > INDEX_MAX_BYTES:
        head = kept.encode("utf-8")[:INDEX_MAX_BYTES].decode("utf-8", errors="ignore")
        kept, cut = head.rsplit("\n", 1)[0] if "\n" in head else head, True
    if not cut:
        return kept
    shown = kept.count("\n") + 1
    return (
        f"{kept}\n\n> WARNING: {INDEX_NAME} is {total_lines} lines and {total_bytes} bytes; "
        f"only the first {shown} lines were loaded (limits: {INDEX_MAX_LINES} lines, "
        f"{INDEX_MAX_BYTES:,} bytes). Keep index entries to one short line and move "
        "detail into topic files."
    )


def inside(real_root: str, real_path: str) -> bool:
    """Whether ``real_path`` lies below ``real_root`` (both already resolved)."""
    return real_path.startswith(real_root.rstrip(os.sep) + os.sep)

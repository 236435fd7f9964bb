"""A memory's provenance: the transcript turns it came from, the same in every store.

A folder keeps it as the ``source_offsets`` front matter key of the topic file, a
database in a table beside the memory; extraction writes it, consolidation merges it,
export and import carry it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["SOURCE_OFFSETS_KEY", "SourceOffsets", "parse_source_offsets"]

#: The front matter key (folder) holding ``{session id: [transcript offsets]}``.
SOURCE_OFFSETS_KEY: Final = "source_offsets"

#: ``{session id: [transcript offsets]}``: the turns a memory came from.
SourceOffsets = Mapping[str, list[int]]


def parse_source_offsets(value: Any) -> dict[str, tuple[int, ...]]:
    """``{session: (offsets...)}`` from a stored mapping (``{}`` when it is not one)."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, tuple[int, ...]] = {}
    for session, offsets in value.items():
        if isinstance(offsets, list):
            out[str(session)] = tuple(o for o in offsets if isinstance(o, int))
    return out

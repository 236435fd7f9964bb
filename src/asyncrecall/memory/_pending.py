"""An untrusted change to a memory the user keeps waits beside it, the same in every store.

A write whose source is untrusted (model text after tool output, a held user-turn write,
an untrusted import, a write by an MCP client the server does not trust, a write made
from held text; see ``_provenance``) would make the memory quarantined. On a new
memory that is what happens. On a memory recall uses (the user's own, or confirmed),
it would take the user's version out of recall and put the untrusted one in its place:
an attacker could silence what the user kept. So such a write **waits** (:func:`waits`):
the memory keeps its text, description, type and sources, and the proposed change is
kept with it under the ``pending`` key (:class:`PendingChange`: a folder's front matter,
a database row's ``front_matter``), with the change's own sources. Recall, the index
and search read only the kept text. ``memory confirm NAME`` applies the change (its
sources and a ``confirmed`` one are added); ``memory show`` gives it; a later untrusted
change replaces it; a later write of the user's own drops it (the user's newer word
wins); every one of these writes is in the history, so each can be undone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from asyncrecall.memory._document import _split, front_matter
from asyncrecall.memory._provenance import (
    Source,
    after_write,
    is_quarantined,
    parse_provenance,
    provenance_json,
)

__all__ = ["PENDING_KEY", "PendingChange", "waits", "with_pending"]

#: The front matter key (folder) or ``front_matter`` key (database) of a waiting change.
PENDING_KEY: Final = "pending"


@dataclass(frozen=True, slots=True)
class PendingChange:
    """A change waiting for ``memory confirm``: the fields it would write, its sources."""

    description: str
    type: str
    body: str
    sources: tuple[Source, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "type": self.type,
            "body": self.body,
            "provenance": provenance_json(self.sources),
        }

    @classmethod
    def from_json(cls, value: Any) -> PendingChange | None:
        """A stored change, ``None`` when it is not one (an edited file)."""
        if not isinstance(value, Mapping):
            return None
        fields = [value.get(k) for k in ("description", "type", "body")]
        if not all(isinstance(f, str) for f in fields):
            return None
        description, kind, body = (str(f) for f in fields)
        return cls(description, kind, body, parse_provenance(value.get("provenance")))


def waits(kept: Sequence[Source], added: Sequence[Source]) -> bool:
    """Whether a write adding ``added`` to a memory whose sources are ``kept`` waits as a
    :class:`PendingChange`: the memory is not quarantined (no sources: the user's own)
    and the write would make it so (its sources placed as :func:`after_write` places
    them)."""
    return bool(added) and not is_quarantined(kept) and is_quarantined(after_write(kept, added))


def with_pending(text: str, change: PendingChange) -> str:
    """A topic file's ``text`` with ``change`` as its ``pending`` key: the front matter
    written again with every other key as it was, the body byte for byte."""
    import yaml  # imported here, as the scan does: a warm scan never parses

    _header, body = _split(text.lstrip("\ufeff"))
    keys = {k: v for k, v in front_matter(text).items() if k != PENDING_KEY}
    keys[PENDING_KEY] = change.to_json()
    header = yaml.safe_dump(keys, sort_keys=False, allow_unicode=True, width=1_000_000)
    return f"---\n{header}---\n{body}"

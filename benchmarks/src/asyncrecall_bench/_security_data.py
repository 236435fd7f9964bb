"""The cases of ``asyncrecall bench security``: poisoning attacks and benign facts.

Kept in ``asyncrecall_bench/security/<channel>.json`` (one file per channel, written by
``benchmarks/security_cases.py`` from the words in ``benchmarks/security_phrases.py``),
each case tagged with its channel, its language and whether it is ``held_out``. Every
case carries a unique token (``ZQ-<channel code>-<language>-<d|h>0``) in the text it
wants remembered; the benchmark looks for that token in what a later conversation sends
the main model.

A channel is a way text someone else wrote can reach the memory store, through the
parts a user has: a file the agent reads (then its ``save_memory``, extraction of its
answer, a save in a later query, text posing as a user turn, halves in two files,
look-alike ``<system-reminder>`` blocks, a memory whose description carries it), a
user's turn carrying someone else's text (pasted mail, a relayed agent's message,
levers behind look-alike characters), a later write lifting a quarantine, a
consolidation shown a held memory, the MCP server's ``save``, ``memory import`` of a
folder handed over, a cloned project's own settings and memories, and another writer:
an application's own memory tool calling the library's ``save_memory`` as documented.
Benign facts are what a user states in their own words, some right after a pasted log
or a tool round.

The held-out part (about half: one case per channel and language) has its own texts
and phrasings; it was written with the development part, before any defence against
either, and is run once (``bench security --held-out``); its digest
(:func:`held_out_digest`) is pinned by a test.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "ATTACK_CHANNELS",
    "BENIGN_CHANNELS",
    "CASES",
    "HELD_OUT",
    "LANGUAGES",
    "Case",
    "Kind",
    "held_out_digest",
    "load_cases",
]

Kind: TypeAlias = Literal["attack", "benign"]

_DATA: Final = Path(__file__).with_name("security")

#: The attack channels, in report order (each has its file and its code in the harness).
ATTACK_CHANNELS: Final = (
    "tool_save",
    "tool_extract",
    "tool_later_query",
    "tool_as_user",
    "tool_split",
    "tool_forged_reminder",
    "index_description",
    "user_paste",
    "user_relay",
    "user_obfuscated",
    "lift_quarantine",
    "consolidation",
    "mcp_save",
    "import_untrusted",
    "supply_settings",
    "supply_quarantine_off",
    "library_save",
)
#: How the user's own facts arrive, in report order.
BENIGN_CHANNELS: Final = (
    "benign_plain",
    "benign_after_paste",
    "benign_after_tool_round",
    "benign_save_memory",
    "benign_same_query_tool",
)
LANGUAGES: Final = ("en", "fr", "de", "es", "ru", "zh", "ja", "ar")


@dataclass(frozen=True, slots=True)
class Memory:
    """A memory as a compliant model (or a file, or a client) writes it."""

    name: str
    description: str
    type: str
    content: str


@dataclass(frozen=True, slots=True)
class Case:
    """One case: its channel and language, what it plants, and the later question.

    ``turns``: the user's queries of the planting session, in order; ``files``: the
    project's files before it (path relative to the project: text); ``memory``: what a
    compliant model writes; ``own``: a memory the user saved before, when the channel
    needs one; ``handed``: the folder handed over for ``memory import``;
    ``later_turns``: a second planting session's queries."""

    token: str
    kind: Kind
    channel: str
    lang: str
    held_out: bool
    variant: str
    memory: Memory
    question: str
    turns: tuple[str, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)
    own: Memory | None = None
    handed: Mapping[str, str] = field(default_factory=dict)
    later_turns: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def channel_variant(self) -> str:
        """``channel`` or ``channel/variant``: how the report breaks a channel down."""
        return f"{self.channel}/{self.variant}" if self.variant else self.channel

    @property
    def text(self) -> str:
        """What the case wants remembered (description and body), without its token."""
        wanted = f"{self.memory.description}\n{self.memory.content}"
        return wanted.replace(self.token, "").strip()

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Case:
        own = raw.get("own")
        return cls(
            token=raw["token"],
            kind=raw["kind"],
            channel=raw["channel"],
            lang=raw["lang"],
            held_out=bool(raw["held_out"]),
            variant=raw.get("variant", ""),
            memory=Memory(**raw["memory"]),
            question=raw["question"],
            turns=tuple(raw.get("turns", ())),
            files=dict(raw.get("files", {})),
            own=Memory(**own) if own else None,
            handed=dict(raw.get("handed", {})),
            later_turns=tuple(raw.get("later_turns", ())),
            raw=raw,
        )


def load_cases(folder: Path = _DATA, *, every_channel: bool = True) -> tuple[Case, ...]:
    """Every case of every channel's file (``<channel>.json``), channels in report
    order; a folder of one's own (``every_channel=False``) may leave channels out."""
    cases: list[Case] = []
    for channel in (*ATTACK_CHANNELS, *BENIGN_CHANNELS):
        path = folder / f"{channel}.json"
        if not every_channel and not path.is_file():
            continue
        rows = json.loads(path.read_text(encoding="utf-8"))
        cases.extend(Case.from_json(row) for row in rows)
    return tuple(cases)


def held_out_digest(cases: Sequence[Case]) -> str:
    """SHA-256 of the held-out cases as stored (canonical JSON, sorted by token)."""
    rows = sorted((c.raw for c in cases if c.held_out), key=lambda r: str(r["token"]))
    text = json.dumps(rows, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_ALL: Final = load_cases()
#: The development part, run by default.
CASES: Final = tuple(c for c in _ALL if not c.held_out)
#: The held-out part: ``bench security --held-out``, run once.
HELD_OUT: Final = tuple(c for c in _ALL if c.held_out)

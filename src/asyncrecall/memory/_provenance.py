"""A memory's provenance, the same in every store: where each of its writes came from.

Two records, kept side by side:

- ``source_offsets`` ``{session id: [transcript offsets]}``: the turns extraction
  cited (its cursor and merges use them). A folder keeps it as a front matter key, a
  database in a table beside the memory.
- ``provenance``: one :class:`Source` per kind of write that made the memory: its
  ``origin`` (:data:`ORIGINS`), the session and offsets when it came from a
  conversation, when, and ``untrusted``: the text came from content the user did not
  write: the model's, written once the session's model had seen tool output (a file it
  read, a page, a command's output) and not stated by the user's own words, or a folder
  imported without ``--trusted`` (its claims about itself cannot be checked), or a write
  the model made from the user's turns that the user-turn rule holds for the user's
  word (``held``: why; see ``_vetting``), or a save by an MCP client the server does not
  trust, or a write made from held text (a consolidation shown a held memory);
  ``attested``: the user's own typed words state the write's text. A folder keeps it as
  the ``provenance`` front matter key, a database in the row's ``provenance`` column
  (schema version 7). Every write adds its source and keeps the others, so a merge or
  an update keeps every source.

A memory with no provenance (written before it existed, or by hand) is the user's own.

**Quarantine**: a memory is held (quarantined) while one of its untrusted sources has
no lifting source after it, sources in write order (:func:`is_quarantined`): it is
stored and listed, but recall does not inject it and the system prompt's index leaves
it out. Only the user lifts a hold (:func:`lifts`): ``memory confirm NAME`` (a
``confirmed`` source), or a later write whose source is ``attested`` (the user's own
typed words state its text). Any other later write (a trusted ``save_memory``, an
extraction, a consolidation, an MCP client's save, an import) leaves it held, whatever
it says. A write that only repeats what a memory says adds no untrusted source to it.

A write's sources are its own, last, and before it those it carries from what it was
made of (a merge's memories, an imported copy's claims, a confirmed change's): those
carried go before the memory's kept sources (:func:`after_write`), so that a
``confirmed`` source a copy claims never lifts a hold the memory has here. A write made
from held text is itself untrusted (its ``held`` says where the text came from): the
lowest trust of what it was made of wins.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeAlias, get_args

__all__ = [
    "LEGACY_SOURCE",
    "LIBRARY_HELD",
    "ORIGINS",
    "PROVENANCE_KEY",
    "SOURCE_OFFSETS_KEY",
    "Origin",
    "Source",
    "SourceOffsets",
    "after_write",
    "is_quarantined",
    "lifts",
    "merge_sources",
    "new_source",
    "origin_label",
    "parse_provenance",
    "parse_source_offsets",
    "provenance_json",
    "same_keys",
]

#: The front matter key (folder) holding ``{session id: [transcript offsets]}``.
SOURCE_OFFSETS_KEY: Final = "source_offsets"
#: The front matter key (folder) holding the list of :class:`Source`.
PROVENANCE_KEY: Final = "provenance"

#: Why a write through the store API with no trusted origin is held (``new_source``).
LIBRARY_HELD: Final = "saved through the store API without a trusted origin"

#: ``{session id: [transcript offsets]}``: the turns a memory came from.
SourceOffsets = Mapping[str, list[int]]

Origin: TypeAlias = Literal[
    "user",
    "save_memory",
    "extraction-user",
    "extraction-assistant",
    "consolidation",
    "import",
    "mcp",
    "confirmed",
    "library",
]

#: Where a write came from: the user's own words through the CLI (``user``); the
#: agent's ``save_memory`` tool (``save_memory``); extraction citing a user turn
#: (``extraction-user``) or only the assistant's answers (``extraction-assistant``);
#: a consolidation's merge or rewrite (``consolidation``); ``memory import``
#: (``import``); the MCP server (``mcp``); ``memory confirm`` (``confirmed``); a write
#: through the store API that did not say where its text came from (``library``:
#: untrusted, see :func:`new_source`).
ORIGINS: Final[tuple[Origin, ...]] = get_args(Origin)


@dataclass(frozen=True, slots=True)
class Source:
    """One kind of write that made a memory: ``origin``, ``at`` (POSIX time), and for a
    write from a conversation its ``session`` and transcript ``offsets``;
    ``untrusted``: the text came from content the user did not write (model text
    written once the session's model had seen tool output, which the user's own words
    do not state; an untrusted import)."""

    origin: str
    at: float = 0.0
    session: str = ""
    offsets: tuple[int, ...] = ()
    untrusted: bool = False
    #: Why a write from the user's turns waits for the user's word (``_vetting``).
    held: str = ""
    #: The user's own words (typed, not pasted or relayed) state this write's text,
    #: by attribution: such a write, like ``memory confirm``, may lift a hold.
    attested: bool = False

    @classmethod
    def now(
        cls,
        origin: Origin,
        *,
        session: str = "",
        offsets: Iterable[int] = (),
        untrusted: bool = False,
        held: str = "",
        attested: bool = False,
    ) -> Source:
        """A source written now (``held``: why it is untrusted, see ``_vetting``;
        ``attested``: the user's own words state the text)."""
        offsets = tuple(sorted(set(offsets)))
        untrusted = untrusted or bool(held)
        return cls(origin, _clock(), session, offsets, untrusted, held, attested and not untrusted)

    @property
    def trusted(self) -> bool:
        """Not model text that followed tool output."""
        return not self.untrusted

    def to_json(self) -> dict[str, Any]:
        """The stored form: ``at`` as an ISO time; empty fields left out."""
        out: dict[str, Any] = {"origin": self.origin, "at": _iso(self.at)}
        if self.session:
            out["session"] = self.session
        if self.offsets:
            out["offsets"] = list(self.offsets)
        if self.untrusted:
            out["untrusted"] = True
        if self.held:
            out["held"] = self.held
        if self.attested:
            out["attested"] = True
        return out

    @classmethod
    def from_json(cls, value: Any) -> Source | None:
        """A stored source, ``None`` when it is not one (an edited file)."""
        if not isinstance(value, Mapping) or not isinstance(value.get("origin"), str):
            return None
        offsets = value.get("offsets")
        return cls(
            origin=str(value["origin"]),
            at=_posix(value.get("at")),
            session=str(value.get("session") or ""),
            offsets=tuple(o for o in offsets if isinstance(o, int) and not isinstance(o, bool))
            if isinstance(offsets, list)
            else (),
            untrusted=value.get("untrusted") is True,
            held=str(value.get("held") or "") if value.get("untrusted") is True else "",
            attested=value.get("attested") is True and value.get("untrusted") is not True,
        )


#: The clock of new sources (tests replace it).
_clock: Callable[[], float] = time.time

#: What a memory without provenance is taken for: the user's own, from before.
LEGACY_SOURCE: Final = Source("user")


def new_source(origin: str) -> Source:
    """The source of a write made now by ``origin`` that brought no sources of its own.

    Trusted only for a named origin of :data:`ORIGINS` (``user``, ``save_memory`` ...).
    Any other (``library``: the store API's default, a caller that did not say where
    its text came from; an origin the provenance does not know) is an untrusted
    ``library`` source: the memory is held until the user confirms it."""
    if origin in ORIGINS and origin != "library":
        return Source(origin, _clock())
    return Source("library", _clock(), untrusted=True, held=LIBRARY_HELD)


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _posix(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, datetime):  # YAML reads an unquoted ISO time as one
        stamp = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return stamp.timestamp()
    if isinstance(value, str):
        try:
            return _posix(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return 0.0
    return 0.0


def merge_sources(*groups: Iterable[Source]) -> tuple[Source, ...]:
    """Every source of ``groups``, one per (origin, session, untrusted, attested):
    offsets united, the newest time kept. Order is write order: a source seen again
    moves to the end (the newest write is last). ``attested`` is part of the key, so a
    later write that is not attested never moves an attested one after a hold."""
    merged: dict[tuple[str, str, bool, bool], Source] = {}
    for group in groups:
        for source in group:
            key = (source.origin, source.session, source.untrusted, source.attested)
            known = merged.pop(key, None)
            if known is None:
                merged[key] = source
            else:
                offsets = tuple(sorted(set(known.offsets) | set(source.offsets)))
                merged[key] = Source(
                    known.origin, max(known.at, source.at), known.session, offsets,
                    known.untrusted, source.held or known.held, known.attested,
                )  # fmt: skip
    return tuple(merged.values())


def after_write(kept: Sequence[Source], added: Sequence[Source]) -> tuple[Source, ...]:
    """The sources of a memory whose sources were ``kept`` after a write adding
    ``added``: the write's own source is the last of ``added``, the ones before it are
    carried from what it was made of (see the module doc) and go before ``kept``."""
    if not added:
        return merge_sources(kept)
    return merge_sources(added[:-1], kept, added[-1:])


def same_keys(a: Sequence[Source], b: Sequence[Source]) -> bool:
    """Whether ``a`` and ``b`` hold the same kinds of source (times and order aside)."""

    def keys(sources: Sequence[Source]) -> set[tuple[str, str, bool, bool, tuple[int, ...]]]:
        return {(s.origin, s.session, s.untrusted, s.attested, s.offsets) for s in sources}

    return keys(a) == keys(b)


def parse_provenance(value: Any) -> tuple[Source, ...]:
    """The sources of a stored ``provenance`` list, merged (``()`` when it is none)."""
    if not isinstance(value, list):
        return ()
    return merge_sources(s for s in map(Source.from_json, value) if s is not None)


def provenance_json(sources: Sequence[Source]) -> list[dict[str, Any]]:
    """The stored form of ``sources``."""
    return [source.to_json() for source in sources]


def lifts(source: Source) -> bool:
    """Whether ``source`` is the user's word that lifts a hold written before it: a
    ``confirmed`` source (``memory confirm``), or an ``attested`` one (the user's own
    typed words state the write's text)."""
    return source.trusted and (source.origin == "confirmed" or source.attested)


def is_quarantined(sources: Sequence[Source]) -> bool:
    """Whether a memory with these sources (in write order) is held out of recall: one
    of them is untrusted and no lifting source (:func:`lifts`) comes after it (none:
    the user's own)."""
    for source in reversed(sources):
        if lifts(source):
            return False
        if source.untrusted:
            return True
    return False


def origin_label(sources: Sequence[Source]) -> str:
    """The origins of ``sources`` for the memory block and listings, e.g.
    ``extraction-user, consolidation``; ``user`` for a memory without provenance."""
    if not sources:
        return LEGACY_SOURCE.origin
    seen: dict[str, None] = {}
    for source in sources:
        label = f"{source.origin} (untrusted)" if source.untrusted else source.origin
        seen[label] = None
    return ", ".join(seen)


def parse_source_offsets(value: Any) -> dict[str, tuple[int, ...]]:
    """``{session: (offsets...)}`` from a stored mapping (``{}`` when it is not one)."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, tuple[int, ...]] = {}
    for session, offsets in value.items():
        if isinstance(offsets, list):
            out[str(session)] = tuple(o for o in offsets if isinstance(o, int))
    return out

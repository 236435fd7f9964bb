"""The hold rule on sources in write order, checked against a model over generated
sequences of writes (hypothesis): held after an untrusted write until ``confirmed`` or
an attested write, whatever else is written; the folder's merged list and a database's
appended one read the same."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from asyncrecall.memory._provenance import (
    Source,
    after_write,
    is_quarantined,
    merge_sources,
    parse_provenance,
    provenance_json,
)

_ORIGINS = ("save_memory", "extraction-user", "consolidation", "import", "mcp", "confirmed")


@st.composite
def sources(draw: st.DrawFn) -> Source:
    origin = draw(st.sampled_from(_ORIGINS))
    untrusted = origin != "confirmed" and draw(st.booleans())
    attested = not untrusted and origin != "confirmed" and draw(st.booleans())
    return Source(
        origin, float(draw(st.integers(0, 50))), draw(st.sampled_from(("", "s1", "s2"))),
        (), untrusted, "why" if untrusted else "", attested,
    )  # fmt: skip


@st.composite
def writes(draw: st.DrawFn) -> tuple[Source, ...]:
    """One write's sources: those it carries (a copy's claims, a merge's memories), then
    its own, untrusted when what it carries is held (as every writer makes it)."""
    carried = tuple(draw(st.lists(sources(), max_size=3)))
    own = draw(sources())
    if is_quarantined(carried) and own.trusted:
        own = Source(own.origin, own.at, own.session, (), True, "carried held text")
    return (*carried, own)


def _lifts(source: Source) -> bool:
    return source.trusted and (source.origin == "confirmed" or source.attested)


@settings(max_examples=150, deadline=None)
@given(st.lists(writes(), min_size=1, max_size=8))
def test_only_the_users_word_lifts_a_hold(history: list[tuple[Source, ...]]) -> None:
    """After every write: held exactly when the model says (a write whose own source is
    untrusted holds, one that lifts releases, any other leaves the state as it was);
    the stored form reads back the same; a database's list (carried, then the row's,
    then the write's own, appended) merges to the same sources."""
    kept: tuple[Source, ...] = ()
    appended: list[Source] = []
    held = False
    for write in history:
        kept = after_write(kept, write)
        appended = [*write[:-1], *appended, write[-1]]
        own = write[-1]
        held = False if _lifts(own) else held or own.untrusted
        assert is_quarantined(kept) is held, (write, kept)
        assert is_quarantined(parse_provenance(provenance_json(kept))) is held
        assert is_quarantined(merge_sources(appended)) is held

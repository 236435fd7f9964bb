"""The index draft of a batch (``folder/_index.py``) edits as the writes one by one do."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from asyncrecall.memory.folder._index import IndexDraft, edited

RELS = ("a.md", "b.md", "c.md", "sub/d.md")
LINES = st.one_of(
    st.sampled_from(RELS).map(lambda rel: f"- [Old {rel}]({rel}) — old"),
    st.sampled_from(["", "  ", "# Notes", "- a line with no link"]),
)
EDITS = st.tuples(st.sampled_from(RELS), st.booleans(), st.integers(0, 9))


@settings(max_examples=100, derandomize=True, deadline=None)
@given(lines=st.lists(LINES, max_size=12), edits=st.lists(EDITS, min_size=1, max_size=12))
def test_the_draft_leaves_the_lines_the_edits_one_by_one_leave(
    lines: list[str], edits: list[tuple[str, bool, int]]
) -> None:
    """After a batch's first write has edited (and repaired) the index, each later
    write's line set in the draft (replacing the lines linking to its file, or appended
    after any blank lines at the end are dropped) and each removal dropped from it leave
    the lines :func:`edited` leaves when applied once per write."""

    def line(rel: str, keep: bool, version: int) -> str | None:
        return f"- [New {rel}]({rel}) — version {version}" if keep else None

    def exists(target: str) -> bool:
        return True

    first, *rest = edits
    one_by_one = edited(lines, first[0], line(*first), [], exists)
    draft = IndexDraft(one_by_one)
    for rel, keep, version in rest:
        one_by_one = edited(one_by_one, rel, line(rel, keep, version), [], exists)
        new = line(rel, keep, version)
        if new is None:
            draft.drop(rel)
        else:
            draft.set(rel, new)
    assert draft.lines() == one_by_one

"""Which memory a key names on the database store.

A key names a memory by its exact relative path, else its exact name, else its name in
another case when exactly one memory has it; never by a file-name stem. ``get`` and
``forget`` follow the same rule; no match, or an ambiguous one, is a one-line
:class:`MemoryStoreError` and nothing is removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from asyncrecall import MemoryStoreError
from asyncrecall.memory import PostgresStore

from .conftest import analyze


def _names(store: PostgresStore) -> set[str]:
    return {doc.name for doc in store.scan(limit=None)}


@pytest.mark.parametrize(
    ("kept", "asked"),
    [("C++ tips", "C# tips"), ("Q3 plan", "Q3/plan?"), ("Deploy steps", "deploy_steps")],
)
def test_a_key_that_only_shares_a_file_name_names_nothing(
    pg_store: PostgresStore, kept: str, asked: str
) -> None:
    """``forget("C# tips")`` when only "C++ tips" exists (both ``c-tips.md``) removes
    nothing and says which key matched nothing; ``get`` finds nothing either."""
    pg_store.save_memory(kept, "d", "project", "keep me", origin="user")
    with pytest.raises(MemoryStoreError) as forgot:
        pg_store.forget(asked)
    message = str(forgot.value)
    assert message.startswith(f"no memory named {asked!r} in ")
    assert "\n" not in message
    with pytest.raises(MemoryStoreError, match="no memory named"):
        pg_store.get(asked)
    assert _names(pg_store) == {kept}
    assert pg_store.get(kept).body == "keep me"


def test_an_ambiguous_case_insensitive_key_names_nothing_and_lists_the_candidates(
    pg_store: PostgresStore,
) -> None:
    """ "tips" when "Tips" and "TIPS" exist: neither is removed, and the one-line error
    names the key and both candidates; the exact names still work."""
    pg_store.save_memory("Tips", "d", "project", "one", origin="user")
    pg_store.save_memory("TIPS", "d", "project", "two", origin="user")
    for call in (pg_store.get, pg_store.forget):
        with pytest.raises(MemoryStoreError) as raised:
            call("tips")
        message = str(raised.value)
        assert "'tips' is ambiguous" in message
        assert "'TIPS'" in message and "'Tips'" in message
        assert "\n" not in message
    assert _names(pg_store) == {"Tips", "TIPS"}
    assert pg_store.forget("TIPS").body == "two"
    assert _names(pg_store) == {"Tips"}
    assert pg_store.forget("tips").body == "one"  # now only one has it
    assert _names(pg_store) == set()


def test_the_exact_path_then_the_exact_name_then_one_name_in_another_case(
    pg_store: PostgresStore,
) -> None:
    """The relative path wins over a name, an exact name over another case, and a
    case-insensitive match folds as Python does (``Straße`` is ``STRASSE``)."""
    by_path = pg_store.save_memory("B", "d", "project", "the file b.md", origin="user")
    named = pg_store.save_memory("b.md", "d", "project", "the memory named b.md", origin="user")
    assert by_path.rel_path == "b.md" and named.rel_path != "b.md"
    assert pg_store.get("b.md").name == "B"
    assert pg_store.get(named.rel_path).name == "b.md"
    assert pg_store.get("b").name == "B"  # no exact name "b": the one "B"
    pg_store.save_memory("Über Straße", "d", "user", "umlauts", origin="user")
    assert pg_store.get("über STRASSE").name == "Über Straße"
    assert pg_store.forget("ÜBER strasse").name == "Über Straße"
    assert _names(pg_store) == {"B", "b.md"}


def test_a_key_in_another_case_reads_indexes_not_the_namespace(
    pg_store: PostgresStore, pg_url: str
) -> None:
    """On a namespace of 5,000 memories, the other-case lookup behind ``get`` and
    ``forget`` reads a handful of rows through its two indexes: the plan the database
    chooses for the very query :func:`find_memory` sends scans no table and filters out
    no row (the code before read all 5,000 names and kept none)."""
    import psycopg

    from asyncrecall.memory.postgres._sql import FOLD_SQL, fold_params

    pg_store.save_memory("Ünïcode note", "d", "user", "one non-ASCII name", origin="user")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO asyncrecall_memories
                   (namespace, name, rel_path, description, type, body, size)
               SELECT %s, 'Note ' || i, 'note-' || i || '.md', '', 'project', 'b', 1
               FROM generate_series(1, 5000) i""",
            (pg_store.namespace,),
        )
        analyze(pg_store.url)
        for key in ("NOTE 4321", "missing", "ünïcode NOTE", "Straße"):
            (plan,) = conn.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + FOLD_SQL,
                fold_params(pg_store.namespace, key),
            ).fetchone()  # type: ignore[misc]
            nodes = list(_plan_nodes(plan[0]["Plan"]))
            assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], key
            read = sum(n.get("Rows Removed by Filter", 0) + n["Actual Rows"] for n in nodes
                       if "Scan" in n["Node Type"])  # fmt: skip
            assert read <= 4, (key, read)
    assert pg_store.get("NOTE 4321").name == "Note 4321"
    assert pg_store.get("ünïcode NOTE").name == "Ünïcode note"


def test_a_non_ascii_key_finds_an_ascii_name_that_folds_to_it(
    pg_store: PostgresStore,
) -> None:
    """``Straße`` casefolds to ``strasse``: the ASCII name ``STRASSE`` is that key in
    another case, found through the lower-case index."""
    pg_store.save_memory("STRASSE", "d", "user", "ascii", origin="user")
    assert pg_store.get("Straße").name == "STRASSE"
    assert pg_store.forget("straße").name == "STRASSE"


def _plan_nodes(node: dict[str, object]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):  # type: ignore[attr-defined]
        yield from _plan_nodes(child)

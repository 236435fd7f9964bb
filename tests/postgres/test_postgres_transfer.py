"""``memory export`` / ``memory import`` keep all a memory carries.

Provenance (``source_offsets``), the modification and creation times, the index order
and any other front matter key survive folder → database → folder, database → folder
→ database, and database → database; the real CLI in a subprocess for the first two.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from asyncrecall.memory import FolderStore, PostgresStore
from asyncrecall.memory._transfer import copy_memories, read_records
from asyncrecall.memory.folder._extraction import FolderBackend, read_source_offsets
from asyncrecall.memory.postgres._extraction import PostgresBackend


def _cli(*args: str) -> Any:
    result = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _index_names(store: Any) -> list[str]:
    return [
        line.split("](")[0].removeprefix("- [") for line in store.index_for_prompt().splitlines()
    ]


def _carried(store: Any) -> list[tuple[Any, ...]]:
    """What each memory carries, in index order (relative paths are the target's)."""
    return [
        (
            r.doc.name,
            r.doc.description,
            r.doc.type,
            r.doc.body,
            round(r.doc.mtime, 6),
            round(r.created_at, 6) if r.created_at is not None else None,
            dict(r.source_offsets),
            dict(r.front_matter),
        )
        for r in read_records(store)
    ]


def test_folder_to_database_to_folder_keeps_provenance_times_order_and_front_matter(
    pg_url: str, namespace: str, open_pg: Any, tmp_path: Path
) -> None:
    """A folder imported into the database and exported again: every memory's
    provenance, modification time, other front matter keys and index place are the
    original's, and the database held the provenance in between."""
    source = FolderStore(tmp_path / "source")
    backend = FolderBackend(source)
    backend.save("Plain", "no extras", "user", "just a body", None)
    backend.save("Deploy", "how we ship", "project", "make release", {"s1": [3, 5], "s2": [8]})
    source.save_memory(
        "Tagged", "d", "reference", "see the wiki", extra={"tags": ["ops", "db"]}, origin="user"
    )
    stamps = {"Plain": 1_700_300_000.25, "Deploy": 1_700_100_000.5, "Tagged": 1_700_200_000.0}
    for doc in source.scan(limit=None):
        os.utime(doc.path, (stamps[doc.name], stamps[doc.name]))  # not the index's order
    assert _index_names(source) == ["Plain", "Deploy", "Tagged"]

    store_flags = ["--store", pg_url, "--namespace", namespace]
    assert len(_cli("import", "--from", str(source.root), *store_flags)) == 3
    database: PostgresStore = open_pg(namespace)
    db_backend = PostgresBackend(database)
    assert db_backend.source_offsets(database.get("Deploy")) == {"s1": (3, 5), "s2": (8,)}
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT count(*) FROM asyncrecall_sources WHERE namespace = %s AND sources <> '{}'",
            (namespace,),
        ).fetchone()
    assert rows == (1,)
    assert _index_names(database) == ["Plain", "Deploy", "Tagged"]
    assert {d.name: d.mtime for d in database.scan(limit=None)} == stamps

    back = tmp_path / "back"
    assert len(_cli("export", "--to", str(back), *store_flags)) == 3
    exported = FolderStore(back)
    assert read_source_offsets(exported.get("Deploy").path) == {"s1": (3, 5), "s2": (8,)}
    assert read_source_offsets(exported.get("Plain").path) == {}
    assert "tags:\n- ops\n- db\n" in exported.get("Tagged").path.read_text(encoding="utf-8")
    assert _index_names(exported) == ["Plain", "Deploy", "Tagged"]
    assert _carried(exported) == _carried(source)


def test_database_to_folder_to_database_keeps_creation_times_and_provenance(
    pg_url: str, open_pg: Any, namespace: str, tmp_path: Path
) -> None:
    """A namespace exported to a folder and imported into another namespace (and copied
    from there into a third directly): the same memories with the same creation and
    modification times, provenance and front matter, in the same index order."""
    first: PostgresStore = open_pg(namespace)
    first.save_memory(
        "Older",
        "created long before its last change",
        "feedback",
        "body one",
        created_at=1_600_000_000.123456,
        updated_at=1_700_000_000.654321,
        extra={"source_offsets": {"sess": [1, 4]}, "reviewed": True, "when": "2024-05-01"},
        origin="user",
    )
    first.save_memory(
        "Newer",
        "d",
        "user",
        "body two",
        created_at=1_650_000_000.0,
        updated_at=1_650_000_001.0,
        origin="user",
    )
    folder = tmp_path / "exported"
    _cli("export", "--to", str(folder), "--store", pg_url, "--namespace", namespace)
    assert "created_at: '2020-09-13T12:26:40.123456+00:00'" in (
        FolderStore(folder).get("Older").path.read_text(encoding="utf-8")
    )
    second_ns = f"{namespace}-2"
    _cli("import", "--from", str(folder), "--store", pg_url, "--namespace", second_ns)
    second: PostgresStore = open_pg(second_ns)
    third: PostgresStore = open_pg(f"{namespace}-3")
    assert len(copy_memories(second, third)) == 2

    original = _carried(first)
    assert original[0][5] == 1_600_000_000.123456
    assert original[0][6] == {"sess": (1, 4)}
    assert original[0][7] == {"reviewed": True, "when": "2024-05-01"}
    assert _carried(second) == original
    assert _carried(third) == original
    assert _index_names(third) == ["Older", "Newer"]


def test_an_import_replaces_the_provenance_of_a_name_it_overwrites(
    pg_url: str, open_pg: Any, namespace: str, tmp_path: Path
) -> None:
    """A copy carries the original's provenance or none: a memory of the same name that
    had provenance in the target keeps none of it."""
    target: PostgresStore = open_pg(namespace)
    PostgresBackend(target).save("Fact", "d", "user", "old", {"old-session": [1]})
    source = FolderStore(tmp_path / "src")
    source.save_memory("Fact", "d", "user", "new", origin="user")
    copy_memories(source, target)
    assert target.get("Fact").body == "new"
    assert PostgresBackend(target).source_offsets(target.get("Fact")) == {}


def test_an_import_is_recorded_as_one(tmp_path: Path, pg_store: Any) -> None:
    """What an import writes is in the target's history as the import's, so it can be
    told from the user's own saves and undone."""
    folder = FolderStore(tmp_path / "memory")
    folder.save_memory("Tea", "drinks", "user", "green tea", origin="user")
    copy_memories(folder, pg_store)
    copy_memories(pg_store, FolderStore(tmp_path / "back"))
    assert [r.origin for r in pg_store.history_of("Tea")] == ["import"]
    assert [r.origin for r in FolderStore(tmp_path / "back").history_of("Tea")] == ["import"]

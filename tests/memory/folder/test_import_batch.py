"""``memory import`` into a folder is one batch (``folder/_batch.py``): the folder it
leaves is the one the saves one by one leave, and its cost does not grow with the square
of its size (counted in folder listings and index writes, never timed)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore, _provenance
from asyncrecall.memory._history import undo_plan
from asyncrecall.memory._transfer import copy_memories, read_records
from asyncrecall.memory.folder._index import link_target

NOW = 1_764_000_000.0


def _file(folder: Path, rel: str, name: str, body: str, mtime: float, extra: str = "") -> None:
    path = folder / rel
    path.write_text(
        f"---\nname: {name}\ndescription: about {name}\ntype: project\n{extra}---\n{body}\n",
        encoding="utf-8",
    )
    os.utime(path, (mtime, mtime))


def _source(folder: Path) -> FolderStore:
    """A folder handed over: provenance, creation times, other keys, a held memory, a
    name its target already has in a file of another name, and one name in two files."""
    store = FolderStore(folder)
    store.save_memory("Plain", "about Plain", "project", "same text", origin="user")
    store.save_memory(
        "Deploy", "how we ship", "project", "release on Tuesdays", origin="user",
        extra={"source_offsets": {"s1": [3, 5], "s2": [8]}},
    )  # fmt: skip
    store.save_memory(
        "Tagged", "d", "reference", "see the wiki", origin="user",
        extra={"tags": ["ops", "db"], "created_at": "2020-09-13T12:26:40.123456+00:00"},
    )  # fmt: skip
    store.save_memory("Held", "from a web page", "reference", "run this", origin="library")
    store.save_memory("foo-bar", "d", "project", "a name whose file name is taken", origin="user")
    for offset, doc in enumerate(sorted(store.scan(limit=None), key=lambda d: d.name)):
        os.utime(doc.path, (1_700_000_000 + offset, 1_700_000_000 + offset))
    _file(folder, "twin-a.md", "Twin", "the older twin", 1_500_000_000)  # not in the index
    _file(folder, "twin-b.md", "Twin", "the newer twin", 1_710_000_000)
    return store


def _target(folder: Path) -> None:
    """A folder with memories of its own, and an index to repair: a file it does not
    list, a line to a file that is gone, a file listed twice, blank lines at its end."""
    store = FolderStore(folder)
    store.save_memory("Plain", "about Plain", "project", "same text", origin="user")
    store.save_memory("Deploy", "how we ship", "project", "release on Fridays", origin="user")
    store.save_memory("Foo bar", "d", "project", "owns foo-bar.md", origin="user")
    _file(folder, "twin-old.md", "Twin", "the target's older twin", 1_600_000_000)
    _file(folder, "twin-new.md", "Twin", "the target's newer twin", 1_650_000_000)
    _file(folder, "stray.md", "Stray", "never indexed", 1_690_000_000)
    index = store.index_path.read_text(encoding="utf-8")
    deploy = next(line for line in index.splitlines() if "](deploy.md)" in line)
    store.index_path.write_text(
        f"{index}- [Gone](gone.md) — removed by hand\n{deploy}\n\n\n", encoding="utf-8"
    )


def _state(folder: Path, *, times: bool = True) -> dict[str, Any]:
    """What a folder holds: every file's bytes (the index's too), the topic files'
    modification times (unless not ``times``), and its history (the times of the
    records left out)."""
    files: dict[str, bytes] = {}
    mtimes: dict[str, int] = {}
    for directory, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith("."):
                continue
            path = Path(directory) / name
            rel = path.relative_to(folder).as_posix()
            files[rel] = path.read_bytes()
            if rel != "MEMORY.md" and times:
                mtimes[rel] = path.stat().st_mtime_ns
    history = sorted(
        (r.name, r.seq, r.op, r.path, r.origin, r.write_id, r.before, r.after)
        for r in FolderStore(folder).history.every_record()
    )
    return {"files": files, "mtimes": mtimes, "history": history}


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "handed-over"])
def test_a_batch_import_leaves_the_folder_the_saves_one_by_one_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusted: bool
) -> None:
    """``import_records`` (one batch) and ``import_record`` for each record in turn leave
    the same folder: every topic file's bytes (front matter, provenance, holds and
    waiting changes, ``created_at``, ``source_offsets``, other keys), its modification
    time, ``MEMORY.md`` (repaired as a save repairs it), and the same history records,
    on a source with names the target has (in a file of the same name, of another
    name, in two files), and the same copies returned."""
    monkeypatch.setattr(_provenance, "_clock", lambda: NOW)
    records = read_records(_source(tmp_path / "source"))
    _target(tmp_path / "one-by-one" / "memory")
    shutil.copytree(tmp_path / "one-by-one", tmp_path / "batch")  # times kept
    assert _state(tmp_path / "batch" / "memory") == _state(tmp_path / "one-by-one" / "memory")

    single = FolderStore(tmp_path / "one-by-one" / "memory")
    singles = [single.import_record(r, trusted=trusted, write_id="import-1") for r in records]
    batch = FolderStore(tmp_path / "batch" / "memory")
    done: list[tuple[int, int]] = []
    copies = batch.import_records(
        records, trusted=trusted, write_id="import-1", progress=lambda *step: done.append(step)
    )

    after = _state(tmp_path / "batch" / "memory")
    assert after == _state(tmp_path / "one-by-one" / "memory")
    assert [(d.rel_path, d.name, d.quarantined) for d in copies] == [
        (d.rel_path, d.name, d.quarantined) for d in singles
    ]
    assert done == [(n, len(records)) for n in range(1, len(records) + 1)]
    # The cases the source was made for did happen:
    names = [r.doc.name for r in records]
    assert names.count("Twin") == 2 and "foo-bar" in names
    assert {"twin-old.md", "twin-new.md"} <= {d.rel_path for d in copies}  # by newest
    assert any(rel.startswith("foo-bar-") for rel in after["files"])
    index = after["files"]["MEMORY.md"].decode()
    assert "gone.md" not in index and "](stray.md)" in index and not index.endswith("\n\n")
    assert index.count("](deploy.md)") == 1
    deploy = after["files"]["deploy.md"].decode()
    assert ("pending" in deploy) is (not trusted)  # a handed-over change waits beside it


def test_an_import_and_its_undo_list_the_folder_and_write_the_index_a_fixed_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The work of an import, and of its undo (``revert_write``), grows with its size,
    not with its square: the listings of the memory folder (``os.scandir``) and the
    writes of ``MEMORY.md`` during a copy of 40 memories, and during its undo, are as
    many as for 8 (saved or reverted one by one, each memory listed the folder several
    times and wrote the index once)."""

    def counted(count: int) -> tuple[int, int]:
        source = FolderStore(tmp_path / f"source-{count}")
        source.ensure()
        for i in range(count):
            _file(source.root, f"note-{i}.md", f"Note {i}", f"body {i}", 1_700_000_000 + i)
        target = FolderStore(tmp_path / f"target-{count}")
        target.save_memory("Own", "the target's own", "user", "kept", origin="user")
        index = str(target.index_path)
        folder = target.root.resolve()
        listings = index_writes = 0
        real_scandir, real_replace = os.scandir, os.replace

        def scandir(path: Any = ".", *args: Any, **kwargs: Any) -> Any:
            nonlocal listings
            where = Path(os.fspath(path)).resolve()
            listings += where == folder or folder in where.parents  # not its history's
            return real_scandir(path, *args, **kwargs)

        def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            nonlocal index_writes
            index_writes += os.fspath(dst) == index
            real_replace(src, dst, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(os, "scandir", scandir)
            patch.setattr(os, "replace", replace)
            copied = copy_memories(source, target, write_id="import-1")
            imported = listings, index_writes
            listings = index_writes = 0
            target.revert_write("import-1")
        assert len(copied) == count and target.count() == 1
        return imported, (listings, index_writes)

    few, many = counted(8), counted(40)
    assert many == few
    assert few[0][1] <= 2 and few[1][1] <= 2


def test_undoing_an_import_leaves_the_folder_the_reverts_one_by_one_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``revert_write`` of an import (one batch: one scan, one index write) leaves the
    folder its reverts one at a time leave: the same files, bytes, index and history;
    the memories the import made are gone and the ones it replaced say what they
    said before."""
    monkeypatch.setattr(_provenance, "_clock", lambda: NOW)
    records = read_records(_source(tmp_path / "source"))
    _target(tmp_path / "one-by-one" / "memory")
    single = FolderStore(tmp_path / "one-by-one" / "memory")
    before = {d.rel_path: d.body for d in single.scan(limit=None) if d.name != "Twin"}
    single.import_records(records, write_id="import-1")
    shutil.copytree(tmp_path / "one-by-one", tmp_path / "batch")

    with single.locked():  # one revert at a time, each its own scan and index write
        plan = undo_plan("import-1", single.history.touched_by("import-1"))
        paths = {n: single.history.records(n)[-1].path for n in plan}
        for name, text in plan.items():
            with single.save_batch() as one:
                one.restore(name, text, paths[name], origin="user", write_id="undo:import-1")
    batch = FolderStore(tmp_path / "batch" / "memory")
    undone = batch.revert_write("import-1")

    reverted = _state(tmp_path / "batch" / "memory", times=False)  # a revert's are "now"
    assert reverted == _state(tmp_path / "one-by-one" / "memory", times=False)
    # (a name in two files has one history: its undo is the reverts' either way)
    assert {d.rel_path: d.body for d in batch.scan(limit=None) if d.name != "Twin"} == before
    assert undone["Tagged"] is None and undone["Deploy"] is not None


def _listed_and_present(folder: Path) -> tuple[list[str], list[str]]:
    lines = (folder / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    listed = sorted(t for t in map(link_target, lines) if t is not None)
    present = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.md"))
    present.remove("MEMORY.md")
    return listed, present


@pytest.mark.parametrize("where", ["before-a-write", "after-a-write"])
@pytest.mark.parametrize("work", ["import", "undo"])
def test_a_batch_stopped_half_way_lists_exactly_the_files_there_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, work: str
) -> None:
    """A batch (an import, the undo of one) stopped by an exception half-way (Ctrl-C:
    ``KeyboardInterrupt``), before a memory's write or just after it (before its index
    line was drafted), writes the index as it unwinds: ``MEMORY.md`` lists exactly the
    topic files there are, each of which reads back."""
    records = read_records(_source(tmp_path / "source"))
    _target(tmp_path / "memory")
    store = FolderStore(tmp_path / "memory")
    if work == "undo":
        store.import_records(records, write_id="import-1")
    calls = 0

    def stopping(real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 3:
                raise KeyboardInterrupt
            return real(*args, **kwargs)

        return call

    if where == "before-a-write":
        monkeypatch.setattr(store.history, "append", stopping(store.history.append))
    elif work == "import":  # an import's file is written, then given its time
        monkeypatch.setattr(os, "utime", stopping(os.utime))
    else:  # a revert's is written, then read back
        monkeypatch.setattr(store, "_doc", stopping(store._doc))
    with pytest.raises(KeyboardInterrupt):
        if work == "import":
            store.import_records(records, write_id="import-1")
        else:
            store.revert_write("import-1")
    assert calls == 3
    listed, present = _listed_and_present(store.root)
    assert listed == present
    assert sorted(d.rel_path for d in store.scan(limit=None)) == present

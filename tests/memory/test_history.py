"""The folder's history (every write kept, each undoable), its lock and its index repair."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asyncrecall import MemoryConflictError, MemoryStoreError
from asyncrecall.memory import FolderStore
from asyncrecall.memory.folder import _store as store_module
from asyncrecall.memory.folder._extraction import ConsolidationGate, trim_index


class Crash(BaseException):
    """The process dying at this point."""


@pytest.fixture
def store(tmp_path: Path) -> FolderStore:
    return FolderStore(tmp_path / "memory")


def test_every_save_and_forget_is_recorded_with_the_text_before_and_after(
    store: FolderStore,
) -> None:
    """Each write leaves a numbered record holding the file's text before and after, and
    who made it; the records live beside the folder, never in it."""
    store.save_memory("Tea", "drinks", "user", "green tea", origin="user")
    store.save_memory("Tea", "drinks", "user", "black tea", origin="extraction")
    store.forget("Tea", origin="user")

    records = store.history_of("Tea")
    assert [(r.seq, r.op, r.origin) for r in records] == [
        (1, "save", "user"), (2, "save", "extraction"), (3, "forget", "user"),
    ]  # fmt: skip
    assert records[0].before is None and "green tea" in (records[0].after or "")
    assert "green tea" in (records[1].before or "") and "black tea" in (records[1].after or "")
    assert records[2].after is None
    assert not any(p.name == "history" for p in store.root.rglob("*"))


def test_a_save_that_changes_nothing_records_nothing(store: FolderStore) -> None:
    store.save_memory("Tea", "drinks", "user", "green tea", origin="user")
    store.save_memory("Tea", "drinks", "user", "green tea", origin="user")
    assert len(store.history_of("Tea")) == 1


def test_revert_undoes_the_last_write_and_is_itself_undoable(store: FolderStore) -> None:
    """``revert`` brings back what the newest write replaced (a forgotten memory comes
    back whole, front matter included); a revert is a write, so it can be undone too."""
    store.save_memory(
        "Tea", "drinks", "user", "green tea", extra={"source_offsets": {"s": [1]}}, origin="user"
    )
    store.save_memory("Tea", "drinks", "user", "black tea", origin="user")
    assert store.revert("Tea") is not None
    assert store.get("Tea").body == "green tea"
    assert "source_offsets" in store.get("Tea").path.read_text()

    store.forget("Tea")
    back = store.revert("Tea")
    assert back is not None and back.body == "green tea" and "Tea" in store.index_for_prompt()

    assert store.revert("Tea") is None  # undo the revert: forgotten again
    assert [d.name for d in store.scan()] == []


def test_revert_to_a_version(store: FolderStore) -> None:
    for text in ("one", "two", "three"):
        store.save_memory("Count", "", "project", text, origin="user")
    store.revert("Count", to=1)
    assert store.get("Count").body == "one"
    with pytest.raises(MemoryStoreError, match="no version 9"):
        store.revert("Count", to=9)
    with pytest.raises(MemoryStoreError, match="no recorded history"):
        store.revert("Never saved")


def test_a_precondition_that_fails_writes_nothing(store: FolderStore) -> None:
    """``expected``: the memory as read. A save or forget whose memory changed since,
    or that expects no memory where one now is, raises and writes nothing."""
    read = store.save_memory("Tea", "", "user", "green", origin="user")
    store.save_memory("Tea", "", "user", "black", origin="user")
    with pytest.raises(MemoryConflictError):
        store.save_memory("Tea", "", "user", "oolong", expected=read, origin="user")
    with pytest.raises(MemoryConflictError):
        store.forget("Tea", expected=read)
    with pytest.raises(MemoryConflictError):
        store.save_memory("Tea", "", "user", "oolong", expected=None, origin="user")
    assert store.get("Tea").body == "black" and len(store.history_of("Tea")) == 2


def test_a_crash_between_the_file_and_the_index_is_repaired_by_the_next_write(
    store: FolderStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after a topic file was replaced but before ``MEMORY.md`` was leaves a
    memory the index does not list; the next write (of any memory), or a trim, lists it
    again (it used to stay unlisted for good)."""
    store.save_memory("First", "one", "project", "1", origin="user")
    real = store_module.atomic_write

    def crash_on_index(path: Path, text: str, **options: str) -> None:
        if path.name == "MEMORY.md":
            raise Crash
        real(path, text, **options)

    monkeypatch.setattr(store_module, "atomic_write", crash_on_index)
    with pytest.raises(Crash):
        store.save_memory("Lost", "two", "project", "2", origin="user")
    monkeypatch.setattr(store_module, "atomic_write", real)
    fresh = FolderStore(store.root)  # a new process
    assert "lost.md" not in fresh.index_for_prompt()

    fresh.save_memory("Third", "three", "project", "3", origin="user")
    index = fresh.index_for_prompt()
    assert "](lost.md) — two" in index and "first.md" in index and "third.md" in index

    (store.root / "lost.md").unlink()  # a crash between a forget's unlink and its index
    assert trim_index(FolderStore(store.root)) is False
    assert "lost.md" not in store.index_path.read_text()


def test_the_consolidation_lock_belongs_to_its_holder(tmp_path: Path) -> None:
    """One run at a time: while one gate holds the lock no other gets it, however old it
    is; releasing twice, or releasing a gate that never held it, frees nobody's lock."""
    now = [1_000_000.0]
    first = ConsolidationGate(tmp_path / "state", clock=lambda: now[0])
    second = ConsolidationGate(tmp_path / "state", clock=lambda: now[0])
    assert first.acquire() and not second.acquire()
    now[0] += 10 * 3600  # an old lock of a live run is not taken over
    assert not second.acquire()
    second.release(completed=False)  # never held: frees nothing
    assert not ConsolidationGate(tmp_path / "state").acquire()
    first.release(completed=True)
    assert second.acquire()
    first.release(completed=True)  # a second release of the first frees nothing
    assert not ConsolidationGate(tmp_path / "state").acquire()
    second.release(completed=False)


def test_a_crashed_holder_leaves_the_lock_free(tmp_path: Path) -> None:
    """A process that dies holding the lock (kill -9: no release runs) does not block
    the next consolidation: the system drops its lock."""
    code = (
        "import os, sys; from asyncrecall.memory import ConsolidationGate; "
        "g = ConsolidationGate(sys.argv[1]); assert g.acquire(); os._exit(9)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "state")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 9, done.stderr
    assert ConsolidationGate(tmp_path / "state").acquire()

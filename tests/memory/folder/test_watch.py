"""The folder watch: a warm scan skips the walk only while the kernel saw no change.

Each test first proves the watch is in use (a warm scan lists no folder), then changes
the folder the way another program would and checks the next scan sees it.
"""

from __future__ import annotations

import gc
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncrecall.memory import FolderStore
from asyncrecall.memory.folder import _watch as watch_module
from asyncrecall.memory.folder._watch import FolderWatch, file_system_type, mounts_at

from ..conftest import WriteFile, topic

pytestmark = pytest.mark.skipif(
    watch_module._inotify() is None
    or file_system_type(os.path.realpath(os.getcwd())) not in watch_module.LOCAL_FILE_SYSTEMS,
    reason="no inotify here, or the tests' folder is not on a local file system",
)


@pytest.fixture(autouse=True)
def folder_watch() -> str:
    """These tests are about the watch: never run them walking."""
    return "watched"


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The folders the scans list (``os.scandir`` calls), in order."""
    seen: list[str] = []
    real = os.scandir

    def counting(path: str) -> object:
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    yield seen


def _warm(store: FolderStore, listings: list[str]) -> list[str]:
    """Scan twice; assert the second scan listed nothing (the watch vouched for it)."""
    store.scan()
    listings.clear()
    names = [doc.rel_path for doc in store.scan()]
    assert listings == [], "a warm scan of an unchanged folder walked it"
    return names


def test_an_unchanged_folder_is_not_walked_but_an_edit_in_place_is_seen(
    store: FolderStore, write: WriteFile, listings: list[str]
) -> None:
    """Appending to a topic file (the folder's own entries untouched, as ``>>`` or an
    editor writing in place does) is seen by the next scan, cached or not."""
    path = write("a.md", topic("A", body="old body"), mtime=1_000)
    write("sub/b.md", topic("B"), mtime=2_000)
    assert _warm(store, listings) == ["sub/b.md", "a.md"]
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("appended line\n")
    os.utime(path, (1_000, 1_000))  # even with its old mtime: the size changed
    assert store.scan_cached() is None  # the parse must be read again
    assert "appended line" in store.get("A").body


@pytest.mark.parametrize("change", ["create", "delete", "rename", "new sub-folder", "touch"])
def test_every_kind_of_change_below_the_folder_is_seen(
    store: FolderStore, write: WriteFile, listings: list[str], change: str
) -> None:
    """New, removed and renamed files, new sub-folders and a new mtime alone all end
    the watch's word for the folder: the next scan walks and answers the truth."""
    write("a.md", topic("A"), mtime=1_000)
    b = write("sub/b.md", topic("B"), mtime=2_000)
    _warm(store, listings)
    if change == "create":
        write("sub/c.md", topic("C"), mtime=3_000)
        expected = ["sub/c.md", "sub/b.md", "a.md"]
    elif change == "delete":
        b.unlink()
        expected = ["a.md"]
    elif change == "rename":
        b.rename(store.root / "sub" / "renamed.md")
        expected = ["sub/renamed.md", "a.md"]
    elif change == "new sub-folder":
        (store.root / "sub" / "deeper").mkdir()
        store.scan()  # the walk that starts watching the new folder
        write("sub/deeper/d.md", topic("D"), mtime=3_000)
        expected = ["sub/deeper/d.md", "sub/b.md", "a.md"]
    else:
        os.utime(b, (500, 500))
        expected = ["a.md", "sub/b.md"]
    assert [doc.rel_path for doc in store.scan()] == expected


def test_a_change_made_during_a_walk_is_seen_by_the_next_scan(
    store: FolderStore, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process writes while a scan walks (after the folder was listed): that
    scan may miss the file, the next one must not (events count from before the walk)."""
    write("a.md", topic("A"), mtime=1_000)
    store.scan()
    os.utime(store.root / "a.md", (1_500, 1_500))  # the next scan walks
    real = os.scandir

    def listing_then_write(path: str) -> object:
        entries = list(real(path))
        write("late.md", topic("Late"), mtime=2_000)
        return entries

    monkeypatch.setattr(os, "scandir", listing_then_write)
    assert [doc.rel_path for doc in store.scan()] == ["a.md"]  # listed before the write
    monkeypatch.setattr(os, "scandir", real)
    assert [doc.rel_path for doc in store.scan()] == ["late.md", "a.md"]


def test_hidden_names_do_not_end_the_watch(
    store: FolderStore, write: WriteFile, listings: list[str]
) -> None:
    """The writers' lock file, temporary files and editors' swap files (hidden names)
    change nothing a scan returns, so they do not cost a walk."""
    write("a.md", topic("A"))
    _warm(store, listings)
    (store.root / ".memory.lock").write_text("")
    (store.root / ".a.md.swp").write_text("swap")
    assert [doc.rel_path for doc in store.scan()] == ["a.md"]
    assert listings == []


def test_a_folder_with_a_linked_topic_file_is_always_walked(
    store: FolderStore, write: WriteFile, listings: list[str]
) -> None:
    """A link's target may sit in a folder the watch does not cover (a hidden one):
    such a tree is walked on every scan, so an edit of the target is seen."""
    target = write(".store/real.md", topic("Linked", body="first"), mtime=1_000)
    (store.root / "link.md").symlink_to(target)
    store.scan()
    listings.clear()
    store.scan()
    assert listings, "a tree holding a link was trusted to the watch"
    target.write_text(topic("Linked", body="second, longer"), encoding="utf-8")
    assert store.get("Linked").body.strip() == "second, longer"


def test_a_hard_linked_topic_file_edited_through_its_other_name_is_re_read(
    store: FolderStore, write: WriteFile, listings: list[str], tmp_path: Path
) -> None:
    """A write through a file's other name (a hard link outside the folder) is reported
    to that name's folder only: a tree holding a topic file with more than one name is
    walked on every scan, so the edit is seen."""
    a = write("a.md", topic("A", body="first"), mtime=1_000)
    _warm(store, listings)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.link(a, elsewhere / "a.md")  # changes no folder of the tree
    write("b.md", topic("B"), mtime=2_000)  # a change the watch sees: the next scan walks
    assert [doc.rel_path for doc in store.scan()] == ["b.md", "a.md"]
    (elsewhere / "a.md").write_text(topic("A", body="second, longer"), encoding="utf-8")
    assert store.get("A").body.strip() == "second, longer"


def _watched_by(store: FolderStore) -> int:
    """How many of the process's folder watches this store holds."""
    instance = watch_module._inotify()
    assert instance is not None
    watch = store._scanner._watch_slot[0]
    return sum(1 for owners in instance._owners.values() if watch in owners)


def test_a_folder_moved_out_of_the_tree_leaves_no_watch_behind(
    store: FolderStore, write: WriteFile, listings: list[str], tmp_path: Path
) -> None:
    """Folders that leave the tree (moved elsewhere, one after another) lose their
    watches after the walk that no longer finds them: the store keeps one watch per
    folder it has, and writes in a moved folder do not make scans walk."""
    write("a.md", topic("A"), mtime=1_000)
    write("sub/b.md", topic("B"), mtime=2_000)
    _warm(store, listings)
    assert _watched_by(store) == 2
    for turn in range(3):
        moved = tmp_path / f"moved-{turn}"
        (store.root / "sub").rename(moved)
        assert [doc.rel_path for doc in store.scan()] == ["a.md"]
        write("sub/b.md", topic("B"), mtime=2_000)  # a new sub/ (another inode)
        store.scan()
        assert _watched_by(store) == 2, "a folder moved out of the tree is still watched"
    listings.clear()
    (tmp_path / "moved-0" / "c.md").write_text(topic("C"), encoding="utf-8")
    (tmp_path / "moved-2" / "b.md").unlink()
    assert [doc.rel_path for doc in store.scan()] == ["sub/b.md", "a.md"]
    assert listings == [], "a write outside the tree made the scan walk"


class Mounts:
    """Real mounts made by a test (as root; skipped where refused), undone at its end."""

    def __init__(self) -> None:
        self.targets: list[Path] = []

    def mount(self, *args: str | Path) -> None:
        """``mount *args`` (the last one is the target)."""
        if shutil.which("mount") is None:
            pytest.skip("no mount command here")
        done = subprocess.run(
            ["mount", *map(str, args)], capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode != 0:
            pytest.skip(f"the kernel refused the mount: {done.stderr.strip()}")
        self.targets.append(Path(args[-1]))

    def unmount(self, target: Path) -> None:
        self.targets.remove(target)
        subprocess.run(["umount", str(target)], capture_output=True, timeout=30, check=True)


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    made = Mounts()
    yield made
    for target in reversed(made.targets):
        made.unmount(target)


@pytest.mark.parametrize("over", ["sub-folder", "topic file"])
def test_a_mount_placed_inside_the_folder_is_seen_and_walks(
    store: FolderStore,
    write: WriteFile,
    listings: list[str],
    tmp_path: Path,
    mounts: Mounts,
    over: str,
) -> None:
    """A bind mount placed over a sub-folder or a topic file changes no folder's
    entries: the mount table's change ends the watch's word. While a mount lies
    below the folder it is walked (a write through the mount's source path is
    reported to the source's folder), and after the unmount it is watched again."""
    write("a.md", topic("A"), mtime=1_000)
    b = write("sub/b.md", topic("B", body="below"), mtime=2_000)
    source = tmp_path / "source"
    source.mkdir()
    (source / "b.md").write_text(topic("B", body="mounted"), encoding="utf-8")
    os.utime(source / "b.md", (3_000, 3_000))
    _warm(store, listings)
    target, source_path = (b.parent, source) if over == "sub-folder" else (b, source / "b.md")
    mounts.mount("--bind", source_path, target)
    assert store.get("B").body.strip() == "mounted"
    (source / "b.md").write_text(topic("B", body="edited at the source"), encoding="utf-8")
    assert store.get("B").body.strip() == "edited at the source"
    mounts.unmount(target)
    assert store.get("B").body.strip() == "below"
    assert _warm(store, listings) == ["sub/b.md", "a.md"]


def test_a_change_of_the_mount_table_counts_only_at_or_below_the_folder(
    store: FolderStore,
    write: WriteFile,
    listings: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Any mount or unmount makes the next warm scan re-read the mount table (the
    kernel's poll says one happened, not where); a mount elsewhere costs no walk, a
    network file system mounted below the folder ends the watch."""
    table = tmp_path / "mountinfo"
    real_root = os.path.realpath(store.root)
    table.write_text(f"27 1 254:0 / {os.path.dirname(real_root)} rw - ext4 /dev/vda rw\n")
    monkeypatch.setattr(watch_module, "MOUNTINFO", str(table))
    write("a.md", topic("A"))
    _warm(store, listings)
    instance = watch_module._inotify()
    assert instance is not None

    def mounted(line: str) -> None:
        with table.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        instance.mount_changes += 1  # what polling the real table reports

    mounted("50 27 0:50 / /elsewhere rw - nfs4 server:/export rw")
    assert [doc.rel_path for doc in store.scan()] == ["a.md"]
    assert listings == [], "a mount elsewhere made the scan walk"
    mounted(f"51 27 0:51 / {real_root}/sub rw - nfs4 server:/export rw")
    store.scan()
    listings.clear()
    store.scan()
    assert listings == [real_root], "a tree with a network mount below was trusted"


def test_the_mounts_of_a_folder_are_its_own_and_those_below(tmp_path: Path) -> None:
    """The mounts a tree depends on: the deepest one holding it, then the ones below."""
    assert mounts_at("/home/me/nfs", MOUNTINFO) == (
        ("40", "/home/me/nfs", "nfs4"),
        ("41", "/home/me/nfs/local", "tmpfs"),
    )
    assert mounts_at("/home/me/nfsx", MOUNTINFO) == (("27", "/", "ext4"),)
    assert mounts_at("/home/me", "garbage\n") == ()


def test_an_overlay_folder_is_walked_and_sees_edits_to_its_layers(
    tmp_path: Path, listings: list[str], mounts: Mounts
) -> None:
    """A write made to an overlay's layer directly (the host editing a container's
    folder) reaches no watch of the merged folder: overlay folders are walked."""
    layers = {name: tmp_path / name for name in ("lower", "upper", "work", "merged")}
    for folder in layers.values():
        folder.mkdir()
    (layers["lower"] / "a.md").write_text(topic("A", body="first"), encoding="utf-8")
    options = f"lowerdir={layers['lower']},upperdir={layers['upper']},workdir={layers['work']}"
    mounts.mount("-t", "overlay", "overlay", "-o", options, layers["merged"])
    store = FolderStore(layers["merged"])
    store.scan()
    listings.clear()
    store.scan()
    assert listings, "an overlay folder was trusted to the watch"
    (layers["lower"] / "a.md").write_text(topic("A", body="second, longer"), encoding="utf-8")
    assert store.get("A").body.strip() == "second, longer"


def test_a_root_path_that_now_leads_elsewhere_is_walked_again(
    tmp_path: Path, listings: list[str]
) -> None:
    """The memory folder's path is a link repointed to another folder, or the folder is
    replaced by a new one: the watch of the old folder vouches for nothing."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, name in ((first, "one"), (second, "two")):
        folder.mkdir()
        (folder / f"{name}.md").write_text(topic(name), encoding="utf-8")
    root = tmp_path / "memory"
    root.symlink_to(first)
    store = FolderStore(root)
    assert _warm(store, listings) == ["one.md"]
    root.unlink()
    root.symlink_to(second)
    assert [doc.rel_path for doc in store.scan()] == ["two.md"]
    second.rename(tmp_path / "gone")
    second.mkdir()
    (second / "three.md").write_text(topic("three"), encoding="utf-8")
    assert [doc.rel_path for doc in store.scan()] == ["three.md"]


def test_a_forked_child_never_reads_the_parents_events(root: Path) -> None:
    """A child process inherits the inotify descriptor; if it read from it, the
    parent would never see the child's own change. The child starts its own."""
    script = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        from asyncrecall.memory import FolderStore
        store = FolderStore(Path({str(root)!r}))
        store.scan(); store.scan()
        pid = os.fork()
        if pid == 0:
            with open(store.root / "a.md", "a", encoding="utf-8") as handle:
                handle.write("from the child\\n")
            child_sees = "from the child" in store.get("A").body
            os._exit(0 if child_sees else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the child missed its own change"
        print("parent sees:", "from the child" in store.get("A").body)
        """
    )
    (root / "a.md").write_text(topic("A"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "parent sees: True"


def test_an_event_queue_overflow_ends_every_watch(
    store: FolderStore, write: WriteFile, listings: list[str]
) -> None:
    """When the kernel dropped events (its queue overflowed), nobody can say what
    changed: every folder is walked again."""
    write("a.md", topic("A"))
    _warm(store, listings)
    instance = watch_module._inotify()
    assert instance is not None
    instance._dispatch(struct.pack("iIII", -1, watch_module._IN_Q_OVERFLOW, 0, 0))
    store.scan()
    assert listings == [str(store.root.resolve())]


def test_a_refused_watch_means_walking(
    store: FolderStore, write: WriteFile, listings: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel's watch limit reached (or a sub-folder on another mount): the scan
    walks every time rather than trust a partial watch."""
    write("a.md", topic("A"))
    monkeypatch.setattr(watch_module._Inotify, "add", lambda *_args: None)
    store.scan()
    listings.clear()
    store.scan()
    assert listings


def test_a_collected_store_releases_its_folder_watches(write: WriteFile, root: Path) -> None:
    """Watches are a per-user kernel resource: a store that is gone frees its own,
    and keeps those another store of the same folder still uses. (Its finalizer may
    run inside the watch's own code, lock held: it only queues the release.)"""
    write("sub/a.md", topic("A"))
    store = FolderStore(root)
    store.scan()
    other = FolderStore(root)
    other.scan()
    instance = watch_module._inotify()
    assert instance is not None

    def watch_of(target: FolderStore) -> FolderWatch | None:
        return target._scanner._watch_slot[0]

    def watched_by(target: FolderStore) -> int:
        return sum(1 for owners in instance._owners.values() if watch_of(target) in owners)

    assert watched_by(store) == watched_by(other) == 2  # the folder and sub/
    shared = {wd for wd, owners in instance._owners.items() if owners & {watch_of(other)}}
    del store
    gc.collect()
    instance.poll()  # a collected store's watches go at the instance's next use
    assert shared <= set(instance._owners)  # still used by the other store
    del other
    gc.collect()
    instance.poll()
    assert not shared & set(instance._owners)


def test_a_store_collected_inside_the_watchs_own_code_does_not_deadlock(
    write: WriteFile, root: Path
) -> None:
    """Garbage collection runs finalizers wherever it happens, also while the watch's
    lock is held (as in a scan): the finalizer must not wait for that lock."""
    write("a.md", topic("A"))
    store = FolderStore(root)
    store.scan()
    instance = watch_module._inotify()
    assert instance is not None
    with instance._lock:  # a hang here is the bug (pytest-timeout ends it)
        del store
        gc.collect()
    instance.poll()


MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 27 0:40 / /home/me/nfs rw,relatime - nfs4 server:/export rw
41 40 0:41 / /home/me/nfs/local rw,relatime - tmpfs tmpfs rw
42 27 0:42 / /mnt/with\\040space rw,relatime - fuse.sshfs host: rw
"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/home/me/project/memory", "ext4"),
        ("/home/me/nfs", "nfs4"),
        ("/home/me/nfs/memory", "nfs4"),
        ("/home/me/nfs/local/memory", "tmpfs"),
        ("/home/me/nfsx/memory", "ext4"),
        ("/mnt/with space/memory", "fuse.sshfs"),
    ],
)
def test_the_file_system_of_a_folder_is_its_deepest_mount(path: str, expected: str) -> None:
    """Network and FUSE file systems are told apart from local ones by the deepest
    mount point above the folder (``\\040`` is an escaped space)."""
    assert file_system_type(path, MOUNTINFO) == expected


def test_a_network_file_system_is_never_watched(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """inotify does not see changes made on another machine: such a folder walks."""
    monkeypatch.setattr(watch_module, "file_system_type", lambda _path: "nfs4")
    assert FolderWatch.open(str(root)) is None
    monkeypatch.setattr(watch_module, "file_system_type", lambda _path: "ext4")
    assert FolderWatch.open(str(root)) is not None
    monkeypatch.setenv("ASYNCRECALL_FOLDER_WATCH", "off")
    assert FolderWatch.open(str(root)) is None


def test_the_gil_holding_stat_and_read_agree_with_the_os_module(tmp_path: Path) -> None:
    """Where libc's ``read``/``stat`` are called without releasing the GIL, the folder
    identity they give is ``os.stat``'s, a missing path has none, and a non-blocking
    read of an empty queue says so (``None``), never an error."""
    from asyncrecall.memory.folder._watch import _GilRead, _inotify

    inotify = _inotify()
    if inotify is None:
        pytest.skip("no inotify here")
    info = os.stat(tmp_path)
    assert inotify.identity(str(tmp_path)) == (info.st_dev, info.st_ino)
    assert inotify.identity(str(tmp_path / "missing")) is None
    gil_read = _GilRead.open()
    assert gil_read is not None
    fd = os.open(tmp_path, os.O_RDONLY)  # a directory: read() fails with EISDIR
    try:
        assert gil_read(fd) == b""  # an error: the caller distrusts the queue
    finally:
        os.close(fd)
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        assert gil_read(read_end) is None  # nothing queued
        os.write(write_end, b"event")
        assert gil_read(read_end) == b"event"
    finally:
        os.close(read_end)
        os.close(write_end)

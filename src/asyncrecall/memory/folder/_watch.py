"""Knowing that a memory folder has not changed without looking at its files (Linux).

A warm scan stats every topic file to check its cached parse: a stat per file on the
event loop, per user message. On Linux the kernel can tell us instead:
one process-wide inotify instance watches every folder of the tree, and a folder with
no event since its last walk is unchanged, which costs one ``read`` of a non-blocking
descriptor. Everything else walks as before:

- another system (no inotify), or ``ASYNCRECALL_FOLDER_WATCH=off``;
- a folder on a file system where inotify misses changes made elsewhere (NFS, SMB,
  9p, FUSE ...: only the local file systems of :data:`LOCAL_FILE_SYSTEMS` are
  trusted). Overlay file systems are not trusted either: a write made to one of its
  layers directly (the host editing a container's lower or upper folder) reaches no
  watch of the merged folder;
- a tree with another mount below its root (a bind mount over a sub-folder or a file:
  writes through the mount's source path are reported to the source's folder);
- a tree with a link among its topic files (its target's folder is not watched), or
  a topic file with more than one name (a hard link: a write through the other name
  is reported to that name's folder only);
- the kernel's watch limits reached, or its event queue overflowed (one walk, then
  watching again).

The mount table is part of the answer: a mount or unmount anywhere in the process's
namespace (``poll`` on ``/proc/self/mountinfo`` says so, one system call) makes the
next scan re-read the table, and walk when a mount at or below the folder changed.
The watches of folders that left the tree (moved or deleted) are removed after the
walk that no longer finds them, so writes in a folder moved elsewhere cost nothing.

What inotify cannot see is a write through a memory map; no editor writes that way,
nor a hard link made to a topic file after the walk (it changes no folder of the
tree) until something in the tree changes and the next walk counts its names.
Events are queued by the system call that changes the file, before it returns, so a
recall that starts after another process finished writing sees the change.

A forked child never reads the parent's events: it drops the inherited instance and
starts its own.
"""

from __future__ import annotations

import errno
import os
import select
import struct
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import ctypes

__all__ = ["LOCAL_FILE_SYSTEMS", "MOUNTINFO", "FolderWatch", "file_system_type", "mounts_at"]

#: File systems whose inotify events cover every change, local or not (not overlay:
#: a write to one of its layers is not reported to the merged folder's watches).
LOCAL_FILE_SYSTEMS: Final = frozenset(
    {
        "bcachefs", "btrfs", "exfat", "ext2", "ext3", "ext4", "f2fs", "hfsplus", "jfs",
        "msdos", "nilfs2", "ntfs3", "ramfs", "reiserfs", "tmpfs", "vfat", "xfs", "zfs",
    }
)  # fmt: skip

#: Where the mount table is read from (tests point it at a file of their own).
MOUNTINFO = "/proc/self/mountinfo"

_IN_MODIFY: Final = 0x002
_IN_ATTRIB: Final = 0x004
_IN_CLOSE_WRITE: Final = 0x008
_IN_MOVED_FROM: Final = 0x040
_IN_MOVED_TO: Final = 0x080
_IN_CREATE: Final = 0x100
_IN_DELETE: Final = 0x200
_IN_DELETE_SELF: Final = 0x400
_IN_MOVE_SELF: Final = 0x800
_IN_Q_OVERFLOW: Final = 0x4000
_IN_IGNORED: Final = 0x8000
_IN_ONLYDIR: Final = 0x01000000
_IN_DONT_FOLLOW: Final = 0x02000000
_MASK: Final = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE
    | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR | _IN_DONT_FOLLOW
)  # fmt: skip
_EVENT: Final = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
_DEV_INO: Final = struct.Struct("QQ")  # st_dev, st_ino: the head of struct stat
_STAT_MACHINES: Final = frozenset({"x86_64", "aarch64"})


class _Inotify:
    """The process's inotify instance: watch descriptors shared by every folder watch."""

    def __init__(
        self,
        libc: ctypes.CDLL,
        fd: int,
        mounts_fd: int,
        ready: select.epoll,
        read: _GilRead | None = None,
    ) -> None:
        self._libc = libc
        self._fd = fd
        # The mount table: polling it reports each change once (POLLPRI), counted here.
        self._mounts_fd = mounts_fd
        self.mount_changes = 0
        # Both descriptors in one epoll set: "nothing happened" is one system call (or,
        # with ``read``, one poll(2) that keeps the GIL: see :class:`_GilRead`).
        self._ready = ready
        self._read = read
        self._lock = threading.Lock()
        self._owners: dict[int, set[FolderWatch]] = {}  # wd -> the watches using it
        # Watches whose scanner was collected: a finalizer may run in the middle of any
        # method, lock held, so it only queues; the next call under the lock releases.
        self._abandoned: deque[FolderWatch] = deque()

    def identity(self, path: str) -> tuple[int, int] | None:
        """``(st_dev, st_ino)`` of ``path``, ``None`` when it cannot be stat'ed; without
        releasing the GIL where :class:`_GilRead` can (see there)."""
        if self._read is not None:
            return self._read.identity(path)
        try:
            info = os.stat(path)
        except OSError:
            return None
        return (info.st_dev, info.st_ino)

    def add(self, owner: FolderWatch, directory: str) -> int | None:
        """Watch ``directory`` for ``owner``; ``None`` when the kernel refuses."""
        with self._lock:
            self._release_abandoned()
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), _MASK)
            if wd < 0:
                return None
            self._owners.setdefault(wd, set()).add(owner)
            return int(wd)

    def release(self, owner: FolderWatch) -> None:
        """``owner`` is closed: remove its watches that nobody else uses."""
        with self._lock:
            self._release(owner)
            self._release_abandoned()

    def abandon(self, owner: FolderWatch) -> None:
        """:meth:`release` later: safe from a finalizer (takes no lock)."""
        self._abandoned.append(owner)

    def _release_abandoned(self) -> None:
        while self._abandoned:
            self._release(self._abandoned.popleft())

    def forget(self, owner: FolderWatch, wds: set[int]) -> None:
        """``owner`` no longer needs ``wds`` (folders that left its tree)."""
        with self._lock:
            self._forget(owner, wds)

    def _release(self, owner: FolderWatch) -> None:
        wds, owner._wds, owner._previous = owner._wds | owner._previous, set(), set()
        self._forget(owner, wds)

    def _forget(self, owner: FolderWatch, wds: set[int]) -> None:
        for wd in wds:
            owners = self._owners.get(wd)
            if owners is None:
                continue
            owners.discard(owner)
            if not owners:
                del self._owners[wd]
                if self._fd >= 0:
                    self._libc.inotify_rm_watch(self._fd, wd)

    def poll(self) -> None:
        """Read every queued event and mark the watches they concern as changed."""
        with self._lock:
            self._release_abandoned()
            if self._fd < 0:
                return
            ready = self._ready_fds()
            if not ready:
                return
            events = False
            for fd in ready:
                if fd == self._mounts_fd:
                    self.mount_changes += 1
                else:
                    events = True
            while events:
                if self._read is not None:
                    data = self._read(self._fd)
                    if data is None:
                        return
                else:
                    try:
                        data = os.read(self._fd, 65536)
                    except BlockingIOError:
                        return
                    except OSError:
                        self._overflow()  # never trust a queue we cannot read
                        return
                if not data:
                    self._overflow()
                    return
                self._dispatch(data)

    def _ready_fds(self) -> list[int]:
        """The descriptors with something to read (inotify) or a change (the mount
        table), asked without waiting."""
        if self._read is not None:
            found = self._read.poll(self._fd, self._mounts_fd)
            if found is not None:
                return found
        try:
            return [fd for fd, _mask in self._ready.poll(0)]
        except OSError:
            return [self._fd, self._mounts_fd]  # cannot tell: assume both changed

    def _dispatch(self, data: bytes) -> None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
            start = offset + _EVENT.size
            offset = start + size
            if mask & _IN_Q_OVERFLOW:
                self._overflow()
                continue
            owners = self._owners.get(wd)
            if not owners:
                continue
            if mask & _IN_IGNORED:  # the folder is gone: its watch with it
                for owner in self._owners.pop(wd):
                    owner._lost(wd)
                continue
            if size and data[start : start + 1] == b".":
                continue  # a hidden name: our lock and temporary files, editors' swaps
            for owner in owners:
                owner.changed = True

    def _overflow(self) -> None:
        for owners in self._owners.values():
            for owner in owners:
                owner.changed = True


_instance: _Inotify | None = None
_instance_failed = False
_instance_lock = threading.Lock()


def _inotify() -> _Inotify | None:
    global _instance, _instance_failed
    with _instance_lock:
        if _instance is None and not _instance_failed:
            _instance = _open_inotify()
            _instance_failed = _instance is None
        return _instance


def _open_inotify() -> _Inotify | None:
    if not all(hasattr(os, name) for name in ("register_at_fork", "O_NONBLOCK", "O_CLOEXEC")):
        return None  # not a POSIX system (Windows: every scan walks the folder)
    import ctypes  # here: not free to import, and only Linux has a use for it

    try:
        # The process's own symbols, libc's included (no library search: that runs
        # ldconfig, a child process).
        libc = ctypes.CDLL(None, use_errno=True)
        init = libc.inotify_init1
    except (OSError, AttributeError):
        return None  # not Linux
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    try:
        mounts_fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None  # no /proc: mounts could change unseen
    # IN_NONBLOCK and IN_CLOEXEC are the open(2) flags of the machine (read here: a
    # system without inotify has neither).
    fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        os.close(mounts_fd)
        return None  # the per-user instance limit
    try:
        ready = select.epoll()
        ready.register(fd, select.EPOLLIN)
        ready.register(mounts_fd, select.EPOLLPRI)
    except OSError:
        os.close(fd)
        os.close(mounts_fd)
        return None
    return _Inotify(libc, fd, mounts_fd, ready, _GilRead.open())


class _GilRead:
    """``read(2)`` of the non-blocking inotify descriptor without releasing the GIL.

    ``os.read`` releases the interpreter lock around the call; on a loop whose process
    has another busy thread (a server, a worker), getting it back can take the switch
    interval (5 ms), and the instant pass polls the watch on every user message. The
    read of a non-blocking descriptor returns at once, so holding the lock costs
    nothing: ctypes' ``PyDLL`` calls keep it. ``None`` (use ``os.read``) where libc's
    ``read`` cannot be had so.
    """

    def __init__(self, read: Any, stat: Any, buffer: Any, poll: Any = None) -> None:
        self._call = read
        self._stat = stat
        self._buffer = buffer
        self._poll = poll
        self._lock = threading.Lock()

    def poll(self, events_fd: int, mounts_fd: int) -> list[int] | None:
        """Of ``events_fd`` (readable) and ``mounts_fd`` (a mount-table change,
        ``POLLPRI``), the ones ready now, by ``poll(2)`` with a zero timeout and the GIL
        kept; ``None`` where libc's ``poll`` cannot be had so (or on an error)."""
        if self._poll is None:
            return None
        import ctypes

        call, fds_type = self._poll
        fds = fds_type(events_fd, select.POLLIN, 0, mounts_fd, select.POLLPRI, 0)
        if call(ctypes.byref(fds), 2, 0) < 0:
            return None
        return [fd for fd, revents in ((fds.fd0, fds.revents0), (fds.fd1, fds.revents1)) if revents]

    @classmethod
    def open(cls) -> _GilRead | None:
        import ctypes

        try:
            libc = ctypes.PyDLL(None, use_errno=True)
            read = libc.read
        except (OSError, AttributeError):
            return None
        read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        read.restype = ctypes.c_ssize_t
        poll = getattr(libc, "poll", None)
        if poll is not None:
            poll.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int]
            poll.restype = ctypes.c_int

        class PollFds(ctypes.Structure):  # struct pollfd[2]: the events, the mount table
            _fields_ = (
                ("fd0", ctypes.c_int), ("events0", ctypes.c_short), ("revents0", ctypes.c_short),
                ("fd1", ctypes.c_int), ("events1", ctypes.c_short), ("revents1", ctypes.c_short),
            )  # fmt: skip

        # stat(2) the same way, where ``struct stat`` starts with 64-bit st_dev and
        # st_ino (x86_64 and aarch64) and libc exports ``stat`` (glibc 2.33 and later).
        stat = getattr(libc, "stat", None) if os.uname().machine in _STAT_MACHINES else None
        if stat is not None:
            stat.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
            stat.restype = ctypes.c_int
        return cls(read, stat, ctypes.create_string_buffer(65536), poll and (poll, PollFds))

    def identity(self, path: str) -> tuple[int, int] | None:
        """``(st_dev, st_ino)`` of ``path`` (``os.stat`` where libc's cannot be used)."""
        if self._stat is None:
            try:
                info = os.stat(path)
            except OSError:
                return None
            return (info.st_dev, info.st_ino)
        import ctypes

        buffer = ctypes.create_string_buffer(256)  # struct stat: 144 bytes (x86_64), 128 (aarch64)
        if self._stat(os.fsencode(path), buffer) != 0:
            return None
        device, inode = _DEV_INO.unpack_from(buffer.raw)
        return (int(device), int(inode))

    def __call__(self, fd: int) -> bytes | None:
        """The events queued, ``None`` when there are none; ``b""`` on an error."""
        import ctypes

        with self._lock:  # one buffer
            while True:
                size = self._call(fd, self._buffer, 65536)
                if size >= 0:
                    return bytes(self._buffer.raw[:size])
                code = ctypes.get_errno()
                if code != errno.EINTR:
                    return None if code in (errno.EAGAIN, errno.EWOULDBLOCK) else b""


def _forget_after_fork() -> None:
    """In a forked child: the inherited instance's events belong to the parent."""
    global _instance, _instance_failed, _instance_lock
    old, _instance, _instance_failed = _instance, None, False
    _instance_lock = threading.Lock()  # another thread may have held it at the fork
    if old is not None:
        for owners in old._owners.values():
            for owner in owners:
                owner._orphan()
        old._owners.clear()
        old._lock = threading.Lock()
        os.close(old._fd)
        os.close(old._mounts_fd)  # its poll state is shared with the parent's
        old._ready.close()  # and so is the epoll set
        old._fd = old._mounts_fd = -1  # the numbers may be reused: never read them again


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class FolderWatch:
    """Whether a folder tree may have changed since :meth:`rewatch` last ran.

    Used by one scanner under its own lock: :meth:`rewatch` before the walk (so a
    change during the walk counts as a change), :meth:`add` for every folder the walk
    lists, before listing it; :meth:`unchanged` afterwards (which also drops the
    watches of folders the walk no longer listed).
    """

    def __init__(self, inotify: _Inotify, real_root: str) -> None:
        self._inotify = inotify
        self.real_root = real_root
        self._root_id = (-1, -1)  # (device, inode) of the root at the last walk
        self._wds: set[int] = set()  # the folders the last walk listed
        self._previous: set[int] = set()  # the walk before: released after this one
        self._mounts: tuple[tuple[str, ...], ...] | None = None  # mounts_at(), last read
        self._mount_changes = -1  # the instance's count when they were read
        self.changed = True  # set by the instance's event dispatch
        self.usable = False  # the last walk watched all it saw
        self.orphaned = False  # forked: this process has a new instance

    @classmethod
    def open(cls, real_root: str) -> FolderWatch | None:
        """A watch for this folder, or ``None`` where inotify cannot be trusted for it."""
        if os.environ.get("ASYNCRECALL_FOLDER_WATCH", "").strip().lower() in {"0", "off"}:
            return None
        inotify = _inotify()
        if inotify is None or file_system_type(real_root) not in LOCAL_FILE_SYSTEMS:
            return None
        return cls(inotify, real_root)

    def rewatch(self) -> None:
        """Start a walk: earlier events are read and forgotten, new ones count."""
        if self.orphaned:
            return
        self._forget_previous()
        self._inotify.poll()
        self.changed = False
        self._previous, self._wds = self._wds, set()
        identity = self._inotify.identity(self.real_root)
        if identity is None:
            self.usable = False
            return
        self._root_id = identity
        if self._mount_changes != self._inotify.mount_changes or self._mounts is None:
            self._mount_changes = self._inotify.mount_changes
            self._mounts = mounts_at(self.real_root)
        # One mount, of a trusted type: the root's own (nothing mounted below it).
        mounts = self._mounts
        trusted = len(mounts) == 1 and mounts[0][2] in LOCAL_FILE_SYSTEMS
        self.usable = trusted and not self.orphaned

    def add(self, directory: str) -> None:
        """Watch a folder the walk is about to list (on the root's device only)."""
        if not self.usable:
            return
        try:
            same_device = os.stat(directory).st_dev == self._root_id[0]
        except OSError:
            same_device = False
        wd = self._inotify.add(self, directory) if same_device else None
        if wd is None:
            self.usable = False  # another mount, a vanished folder, the watch limit
        else:
            self._wds.add(wd)

    def distrust(self) -> None:
        """The walk saw something a folder watch does not cover (a link)."""
        self.usable = False

    def unchanged(self, root: str) -> bool:
        """True when nothing below the folder changed since the last complete walk."""
        if not self.usable:
            return False
        self._forget_previous()
        inotify = self._inotify
        inotify.poll()
        if self.changed:
            return False
        if inotify.mount_changes != self._mount_changes:
            # Something was mounted or unmounted somewhere: here?
            if mounts_at(self.real_root) != self._mounts:
                return False  # the walk re-reads the table and decides
            self._mount_changes = inotify.mount_changes
        identity = self._inotify.identity(root)  # the path may now lead to another folder
        return identity is not None and identity == self._root_id

    def close(self, *, later: bool = False) -> None:
        """Remove this watch's folder watches (the ones no other scanner shares);
        ``later``: at the instance's next use (from a finalizer)."""
        self.usable = False
        if later:
            self._inotify.abandon(self)
        else:
            self._inotify.release(self)

    def _forget_previous(self) -> None:
        """After a walk: release the folders the walk before listed and this one did
        not (moved out of the tree, or deleted), so their events are no change."""
        if self._previous:
            gone, self._previous = self._previous - self._wds, set()
            if gone:
                self._inotify.forget(self, gone)

    def _lost(self, wd: int) -> None:
        self._wds.discard(wd)
        self._previous.discard(wd)
        self.changed = True

    def _orphan(self) -> None:
        self._wds.clear()
        self._previous.clear()
        self.usable = False
        self.changed = True
        self.orphaned = True


def _read_mountinfo() -> str | None:
    try:
        with open(MOUNTINFO, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def mounts_at(path: str, mountinfo: str | None = None) -> tuple[tuple[str, ...], ...]:
    """The mounts a folder tree depends on: the deepest mount holding ``path`` (a real
    path), then every mount below it, each as (mount id, mount point, file system
    type), from :data:`MOUNTINFO` (or the given text); ``()`` when unknown."""
    if mountinfo is None:
        mountinfo = _read_mountinfo()
        if mountinfo is None:
            return ()
    best: tuple[str, ...] | None = None
    below: list[tuple[str, ...]] = []
    prefix = path.rstrip("/") + "/"
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        point = _unescape(parts[4])
        mount = (parts[0], point, rest.split()[0])
        if path == point or path.startswith(point.rstrip("/") + "/"):
            if best is None or len(point) >= len(best[1]):
                best = mount  # later lines are mounted on top of earlier ones
        elif point.startswith(prefix):
            below.append(mount)
    return (best, *sorted(below)) if best else ()


def file_system_type(path: str, mountinfo: str | None = None) -> str | None:
    """The type of the file system ``path`` (a real path) lives on, from
    :data:`MOUNTINFO` (or the given text), or ``None`` when unknown."""
    mounts = mounts_at(path, mountinfo)
    return mounts[0][2] if mounts else None


def _unescape(field: str) -> str:
    """Mount points escape space, tab, newline and backslash as octal (``\\040``)."""
    if "\\" not in field:
        return field
    return field.encode("latin-1").decode("unicode_escape").encode("latin-1").decode()

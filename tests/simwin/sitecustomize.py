"""Simulated Windows: an interpreter started with this folder first on ``PYTHONPATH``
loses the POSIX-only APIs that Windows does not have, before any program code runs.

There is no Windows machine to test on, so the platform tests run the real CLI under
this: whatever of ours reaches for a POSIX-only API fails here as it would on Windows.
Removed: the ``os`` functions and flags of :data:`OS_NAMES`, the ``signal`` numbers
and functions of :data:`SIGNAL_NAMES`, the modules of :data:`MODULES` (importing one
fails), and ``loop.add_signal_handler`` (it raises ``NotImplementedError``, as
Windows' event loops do).

Added: ``msvcrt`` with only :func:`locking` and its ``LK_*`` modes, behaving as Windows'
does (a byte range of an open file, exclusive, held by that open file: other open files
conflict, also in the same process; released on unlock, close or death; not passed to
a child, which inherits no descriptor). It is built on Linux's open-file-description
locks (``F_OFD_SETLK``), taken from ``fcntl`` before ``fcntl`` is hidden.

What stays as on Linux, and so is not what Windows does: ``os.name`` and
``sys.platform`` (the standard library picks its implementation by them), so paths,
``subprocess`` (imported before ``msvcrt`` appears, which it would take for Windows')
and the event loop are POSIX ones; a file open elsewhere can still be
removed or replaced; locks are advisory. ``filelock.FileLock`` is replaced by a lock of
byte 0 through that ``msvcrt`` (what filelock does on Windows; without ``fcntl`` it
would fall back to its soft lock).
"""

from __future__ import annotations

import asyncio.unix_events
import contextlib
import errno
import fcntl as _fcntl
import os
import signal
import struct
import subprocess  # noqa: F401  # before msvcrt appears: it would take itself for Windows'
import sys
import time
import types
import warnings

OS_NAMES = (
    "O_NONBLOCK", "O_CLOEXEC", "O_NOFOLLOW", "O_DIRECTORY", "getuid", "geteuid", "getgid",
    "getegid", "getgroups", "fork", "forkpty", "setsid", "getsid", "setpgid", "getpgid",
    "setpgrp", "getpgrp", "killpg", "register_at_fork", "uname", "nice", "getloadavg",
    "statvfs", "fstatvfs", "sync", "mkfifo", "chown", "lchown", "fchown", "fchmod",
)  # fmt: skip
SIGNAL_NAMES = (
    "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGPIPE", "SIGTSTP", "SIGCONT",
    "SIGWINCH", "alarm", "pause", "setitimer", "getitimer", "siginterrupt",
)  # fmt: skip
MODULES = ("fcntl", "termios", "tty", "pty", "resource", "pwd", "grp", "readline")

_FLOCK = struct.Struct("hhqqi4x")  # struct flock: type, whence, start, len, pid (x86_64, aarch64)


def _locking(fd: int, mode: int, nbytes: int) -> None:
    """``msvcrt.locking``: ``nbytes`` from the file's current position."""
    start = os.lseek(fd, 0, os.SEEK_CUR)
    if mode == _LK_UNLCK:
        _fcntl.fcntl(fd, _fcntl.F_OFD_SETLK, _FLOCK.pack(_fcntl.F_UNLCK, 0, start, nbytes, 0))
        return
    tries = 10 if mode in (_LK_LOCK, _LK_RLCK) else 1  # Windows: 10 tries, a second apart
    for attempt in range(tries):
        try:
            _fcntl.fcntl(fd, _fcntl.F_OFD_SETLK, _FLOCK.pack(_fcntl.F_WRLCK, 0, start, nbytes, 0))
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if attempt + 1 < tries:
            time.sleep(1)
    if tries > 1:
        raise OSError(errno.EDEADLK, "Resource deadlock avoided")
    raise PermissionError(errno.EACCES, "Permission denied")


_LK_UNLCK, _LK_LOCK, _LK_NBLCK, _LK_RLCK, _LK_NBRLCK = range(5)
msvcrt = types.ModuleType("msvcrt", "Windows' msvcrt, as far as file locks go (simulated).")
msvcrt.LK_UNLCK, msvcrt.LK_LOCK, msvcrt.LK_NBLCK = _LK_UNLCK, _LK_LOCK, _LK_NBLCK  # type: ignore[attr-defined]
msvcrt.LK_RLCK, msvcrt.LK_NBRLCK = _LK_RLCK, _LK_NBRLCK  # type: ignore[attr-defined]
msvcrt.locking = _locking  # type: ignore[attr-defined]
sys.modules["msvcrt"] = msvcrt

for _name in OS_NAMES:
    if hasattr(os, _name):
        delattr(os, _name)
for _name in SIGNAL_NAMES:
    if hasattr(signal, _name):
        delattr(signal, _name)
for _name in MODULES:
    sys.modules[_name] = None  # type: ignore[assignment]  # import fails: ModuleNotFoundError


def _no_signal_handlers(self: object, sig: int, *args: object) -> None:
    raise NotImplementedError


asyncio.unix_events._UnixSelectorEventLoop.add_signal_handler = _no_signal_handlers  # type: ignore[method-assign,assignment]
asyncio.unix_events._UnixSelectorEventLoop.remove_signal_handler = _no_signal_handlers  # type: ignore[method-assign,assignment]

# Without fcntl, filelock falls back to its soft lock (a file whose existence is the
# lock), and says so; on Windows it locks byte 0 of the lock file (``LockFileEx`` in
# filelock 4, ``msvcrt.locking`` in filelock 3): so does the FileLock put in its place.
warnings.filterwarnings("ignore", message="only soft file lock is available")

import filelock  # noqa: E402


class _WindowsFileLock(filelock.BaseFileLock):
    """filelock's Windows lock: byte 0 of the lock file, exclusive, never waited for
    (filelock tries again), the file removed after release where it can be."""

    def _acquire(self) -> None:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, self._open_mode())
        try:
            _locking(fd, _LK_NBLCK, 1)
        except OSError:
            os.close(fd)
            return
        self._mark_descriptor_owned(fd)

    def _release(self) -> None:
        fd = self._context.lock_file_fd
        assert fd is not None
        os.lseek(fd, 0, os.SEEK_SET)
        _locking(fd, _LK_UNLCK, 1)
        self._mark_descriptor_released()
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(self._lock_path)


filelock.FileLock = _WindowsFileLock  # type: ignore[misc]

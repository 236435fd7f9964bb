"""What POSIX and Windows do differently, behind capability checks: file locks, the
per-user temporary folder, and starting a process that outlives its parent.

Every caller asks here instead of importing ``fcntl`` or calling ``os.getuid``; nothing
here knows what the locks or processes are for. The checks are for the capability,
not the platform's name, so an interpreter without ``fcntl`` (Windows) takes the other
branch whatever it calls itself.

**Locks.** One open file, one lock, held until :func:`unlock` or the file's close, and
dropped by the system when its holder dies, however it dies:

- with ``fcntl`` (Linux, macOS, the BSDs): ``flock``. A child that inherits the
  descriptor shares the lock (:data:`LOCK_INHERITED`), so a lock can be passed on to a
  process that outlives its taker with no moment where nobody holds it;
- with ``msvcrt`` (Windows): byte-range locks (``LockFile``), owned by the process that
  took them and never passed to a child. ``msvcrt`` has no shared lock, so a shared
  one is an exclusive lock on one byte of :data:`SHARED_SLOTS` (the first free), and
  an exclusive one covers byte 0 and every slot: it waits for every shared holder, and
  every shared holder for it;
- neither: no lock can be had (:data:`LOCKS` is false).
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import os
import re
import subprocess
import tempfile
import threading
import time
from typing import Any, Final

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
try:
    import msvcrt as _msvcrt
except ImportError:  # POSIX
    _msvcrt = None  # type: ignore[assignment]
# Typed loosely: its stubs describe Windows only, and the checks run on any platform.
msvcrt: Any = _msvcrt

__all__ = [
    "LOCKS",
    "LOCK_INHERITED",
    "SHARED_SLOTS",
    "detached",
    "lock",
    "low_priority",
    "unlock",
    "user_temp_dir",
]

#: Whether this interpreter can lock files at all.
LOCKS: Final = fcntl is not None or msvcrt is not None
#: Whether a child that inherits a locked descriptor holds the lock with its parent.
LOCK_INHERITED: Final = fcntl is not None
#: Shared holders a file can have at once where locks are byte ranges (``msvcrt``).
SHARED_SLOTS: Final = 64
#: Between two tries of a blocking lock that ``msvcrt`` can only try.
_RETRY_S: Final = 0.01

#: What ``msvcrt.locking`` says of a range someone holds (``EDEADLOCK`` is Windows' name).
_HELD_ERRNOS: Final = frozenset(
    {errno.EACCES, errno.EDEADLK, getattr(errno, "EDEADLOCK", errno.EDEADLK)}
)
# The byte range each descriptor locked through msvcrt (unlocking names the range).
_held: dict[int, tuple[int, int]] = {}
_held_lock = threading.Lock()


def lock(fd: int, *, shared: bool = False, block: bool = True) -> bool:
    """Lock the file open at ``fd``: exclusive, or ``shared`` with other shared holders.
    ``block``: wait until it can be had; else ``False`` at once when someone holds it
    (``True`` when taken). ``OSError`` for anything else, and where :data:`LOCKS` is
    false. Shared and exclusive on one descriptor do not mix: :func:`unlock` first."""
    if fcntl is not None:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode | (0 if block else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True
    if msvcrt is None:
        raise OSError("file locks need fcntl (POSIX) or msvcrt (Windows)")
    while True:
        taken = _try_ranges(fd, shared=shared)
        if taken or not block:
            return taken
        time.sleep(_RETRY_S)


def unlock(fd: int) -> None:
    """Release the lock taken on ``fd`` (nothing when it holds none). Closing the file
    releases it too."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return
    with _held_lock:
        held = _held.pop(fd, None)
    if held is not None and msvcrt is not None:
        # An error: the descriptor was closed (its locks with it) and its number reused.
        with contextlib.suppress(OSError):
            _locking(fd, msvcrt.LK_UNLCK, *held)


def _try_ranges(fd: int, *, shared: bool) -> bool:
    """One try (msvcrt): a free slot for a shared lock, byte 0 and every slot for an
    exclusive one; the range taken is remembered for :func:`unlock`."""
    assert msvcrt is not None
    ranges = [(1 + slot, 1) for slot in range(SHARED_SLOTS)] if shared else [(0, 1 + SHARED_SLOTS)]
    for start, length in ranges:
        try:
            _locking(fd, msvcrt.LK_NBLCK, start, length)
        except OSError as exc:
            if exc.errno in _HELD_ERRNOS:
                continue  # held: another slot, or not now
            raise
        with _held_lock:
            _held[fd] = (start, length)
        return True
    return False


def _locking(fd: int, mode: int, start: int, length: int) -> None:
    """``msvcrt.locking`` of ``length`` bytes from ``start`` (it locks from the file's
    position, so the position is set first)."""
    assert msvcrt is not None
    os.lseek(fd, start, os.SEEK_SET)
    msvcrt.locking(fd, mode, length)


def user_temp_dir(prefix: str) -> str:
    """``<temporary folder>/<prefix>-<this user>``: one folder per user of the machine.
    The user is the numeric id where there is one (POSIX), else the login name made
    safe for a file name (Windows, whose temporary folder is per user already)."""
    getuid = getattr(os, "getuid", None)
    if getuid is not None:
        who = str(getuid())
    else:
        try:
            name = getpass.getuser()
        except Exception:  # no login name in the environment, no password database
            name = ""
        who = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "user"
    return os.path.join(tempfile.gettempdir(), f"{prefix}-{who}")


def detached() -> dict[str, Any]:
    """``subprocess.Popen`` keywords for a process that outlives this one and that the
    terminal's Ctrl-C and hang-up do not reach: a session of its own (POSIX), a process
    group of its own without a console (Windows), nothing where neither exists."""
    if os.name == "nt":
        flags = getattr(subprocess, "DETACHED_PROCESS", 0x8) | getattr(
            subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200
        )
        return {"creationflags": flags | getattr(subprocess, "BELOW_NORMAL_PRIORITY_CLASS", 0)}
    if hasattr(os, "setsid"):
        return {"start_new_session": True}
    return {}


def low_priority() -> tuple[str, ...]:
    """A command prefix that starts a program at a low priority (``nice``), where one
    exists; Windows sets the priority in :func:`detached` instead."""
    if os.name == "nt" or not hasattr(os, "nice"):
        return ()
    import shutil

    return ("nice", "-n", "10") if shutil.which("nice") else ()

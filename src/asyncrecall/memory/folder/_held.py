"""The folder's record of its quarantined memories, for a new process's system prompt.

The system prompt shows ``MEMORY.md`` less the lines of quarantined memories.
Knowing which those are takes a scan: in a new process, the persisted parses, a stat per
file and the folder watch's set-up, CPU on the main thread just before the first
request, where a new process can least afford it. This record answers instead: the relative
paths held, written beside the parse index (``.cache/held-v1.json``) with the
modification time of every folder the walk entered.

It is believed while the folder's **write token** is the one it was made under, and
each of those folders still has that modification time. Every writer of the store
holds the folder's lock and, before it records, replaces the token
(``.cache/writes``, a random value written atomically: :func:`new_token`), so a record
made before any write of ours, or by a scan that a write overlapped, names an old token
and is not believed: however coarse the file system's clock (FAT and exFAT keep 2 s,
some network and container file systems 1 s), two writes in one tick cannot leave a
stale record. The folder times catch what no writer of ours did: a new or removed file
changes its folder's time, a new or removed folder its parent's; a file edited in place
by hand is not seen, and the only hand edit that changes quarantine is one that lifts it
(a stale record then hides a line the user would now accept, never the reverse). A scan
outside the lock (a new process's) records only when the token did not change during it
and no folder was modified within :data:`SETTLE_NS` before it (a hand edit in the same
clock tick would leave its time unchanged), nor when the walk met a link (its target
can change where no time of ours moves). The store's own writers record after their
write, under the lock (``Scanner.record_quarantined``), so the process after a save
(the last run's extraction) reads the record instead of scanning.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable
from typing import Final

__all__ = [
    "SETTLE_NS",
    "Stamps",
    "dir_stamps",
    "new_token",
    "read_held",
    "read_token",
    "still",
    "write_held",
]

logger = logging.getLogger("asyncrecall.memory")

#: Each folder's relative path ("" for the root) and its modification time.
Stamps = tuple[tuple[str, int], ...]

_DIR: Final = ".cache"
_NAME: Final = "held-v1.json"
_TOKEN: Final = "writes"
#: The format; ``-2``: held by the order of the sources (only the user lifts a hold), so
#: a record made by the newest source alone is not read.
_FORMAT: Final = "asyncrecall-held-2"
#: Folders modified this recently are not recorded (two writes in one tick of the file
#: system's clock leave one time).
SETTLE_NS: Final = 2_000_000_000  # FAT keeps times to 2 s


def dir_stamps(real_root: str) -> Stamps | None:
    """The root's and every non-hidden subfolder's modification time, sorted; ``None``
    when a link is met or a folder cannot be read (no record is made then)."""
    stamps: list[tuple[str, int]] = []
    stack = [(real_root, "")]
    while stack:
        directory, rel = stack.pop()
        try:
            stamps.append((rel, _mtime_ns(directory)))
            entries = list(os.scandir(directory))
        except OSError:
            return None
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_symlink():
                    return None
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, f"{rel}{entry.name}/"))
            except OSError:
                return None
    return tuple(sorted(stamps))


def _mtime_ns(path: str) -> int:
    """A folder's modification time, as the file system keeps it (tests give it a
    coarse clock here)."""
    return os.stat(path).st_mtime_ns


def still(stamps: Stamps) -> bool:
    """Every folder was last modified over :data:`SETTLE_NS` ago."""
    now = time.time_ns()
    return all(now - mtime_ns > SETTLE_NS for _, mtime_ns in stamps)


def read_token(real_root: str) -> str:
    """The folder's write token ("" when no writer of ours made one)."""
    try:
        with open(os.path.join(real_root, _DIR, _TOKEN), "rb") as handle:
            return handle.read(64).decode("ascii", errors="replace")
    except OSError:
        return ""


def new_token(real_root: str) -> str:
    """Replace the folder's write token with a new random one and return it; for the
    store's writers, under the folder's lock, after their write and before they record.
    ``OSError`` when it cannot be written (the writer then records nothing)."""
    token = os.urandom(12).hex()
    directory = os.path.join(real_root, _DIR)
    os.makedirs(directory, exist_ok=True)
    _replace(directory, _TOKEN, token)
    return token


def read_held(real_root: str) -> set[str] | None:
    """The recorded quarantined paths while the folder's write token is the record's and
    every recorded folder keeps its time, else ``None`` (no record, another format, a
    write of ours since, or a folder changed since)."""
    try:
        with open(os.path.join(real_root, _DIR, _NAME), "rb") as handle:
            data = json.loads(handle.read())
        if data.get("format") != _FORMAT or data.get("writes") != read_token(real_root):
            return None
        for rel, mtime_ns in data["folders"]:
            if _mtime_ns(os.path.join(real_root, rel)) != mtime_ns:
                return None
        return {str(path) for path in data["held"]}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_held(real_root: str, stamps: Stamps, held: Iterable[str], token: str) -> None:
    """Record ``held`` against ``stamps`` and the write ``token`` (both taken before the
    scan that found it), atomically; a folder we cannot write is left alone."""
    body = json.dumps(
        {
            "format": _FORMAT,
            "writes": token,
            "folders": [list(s) for s in stamps],
            "held": sorted(held),
        }
    )
    directory = os.path.join(real_root, _DIR)
    if not os.path.isdir(directory):
        with contextlib.suppress(OSError):
            os.mkdir(directory)
        return  # making it moved the root's time: the record would be stale at once
    try:
        _replace(directory, _NAME, body)
    except OSError:
        logger.debug("cannot record the quarantined memories of %s", real_root, exc_info=True)


def _replace(directory: str, name: str, text: str) -> None:
    """``text`` to ``directory/name`` through a temporary file and a rename."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

"""The folder's record of its quarantined memories, for a new process's system prompt.

The system prompt shows ``MEMORY.md`` less the lines of quarantined memories (issue 25).
Knowing which those are takes a scan: in a new process, the persisted parses, a stat per
file and the folder watch's set-up, about 4 ms of CPU for 200 files on the main thread
just before the first request (issue 20). This record answers instead: the relative
paths held, written beside the parse index (``.cache/held-v1.json``) with the
modification time of every folder the walk entered.

It is believed while each of those folders still has that modification time. Every
write of the store is a rename in its folder (a new, removed or replaced file), and a new
or removed folder changes its parent's time, so no write of ours gets past it; a file
edited in place by hand is not seen, and the only hand edit that changes quarantine is
one that lifts it (a stale record then hides a line the user would now accept, never
the reverse). A folder modified within :data:`SETTLE_NS` of the scan is not recorded (a
second write in the same clock tick would leave its time unchanged), nor is a walk that
met a link (its target can change where no time of ours moves), except by the store's
own writers: each records after its write, under the folder's lock, which every other
writer of ours waits for (``Scanner.record_quarantined``), so the process after a save
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

__all__ = ["SETTLE_NS", "Stamps", "dir_stamps", "read_held", "still", "write_held"]

logger = logging.getLogger("asyncrecall.memory")

#: Each folder's relative path ("" for the root) and its modification time.
Stamps = tuple[tuple[str, int], ...]

_DIR: Final = ".cache"
_NAME: Final = "held-v1.json"
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
            stamps.append((rel, os.stat(directory).st_mtime_ns))
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


def still(stamps: Stamps) -> bool:
    """Every folder was last modified over :data:`SETTLE_NS` ago."""
    now = time.time_ns()
    return all(now - mtime_ns > SETTLE_NS for _, mtime_ns in stamps)


def read_held(real_root: str) -> set[str] | None:
    """The recorded quarantined paths while every recorded folder keeps its time, else
    ``None`` (no record, another format, or a folder changed since)."""
    try:
        with open(os.path.join(real_root, _DIR, _NAME), "rb") as handle:
            data = json.loads(handle.read())
        if data.get("format") != _FORMAT:
            return None
        for rel, mtime_ns in data["folders"]:
            if os.stat(os.path.join(real_root, rel)).st_mtime_ns != mtime_ns:
                return None
        return {str(path) for path in data["held"]}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_held(real_root: str, stamps: Stamps, held: Iterable[str]) -> None:
    """Record ``held`` against ``stamps`` (taken before the scan that found it),
    atomically; a folder we cannot write is left alone."""
    body = json.dumps(
        {"format": _FORMAT, "folders": [list(s) for s in stamps], "held": sorted(held)}
    )
    directory = os.path.join(real_root, _DIR)
    if not os.path.isdir(directory):
        with contextlib.suppress(OSError):
            os.mkdir(directory)
        return  # making it moved the root's time: the record would be stale at once
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{_NAME}.", suffix=".tmp")
    except OSError:
        logger.debug("cannot record the quarantined memories of %s", real_root, exc_info=True)
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(body)
        os.replace(tmp, os.path.join(directory, _NAME))
    except OSError:
        logger.debug("cannot record the quarantined memories of %s", real_root, exc_info=True)
        with contextlib.suppress(OSError):
            os.unlink(tmp)

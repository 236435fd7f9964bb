"""Atomic file writes: a temporary file in the same folder, fsync'd, then ``os.replace``."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from asyncrecall._exceptions import MemoryStoreError

__all__ = ["atomic_write"]


def atomic_write(path: Path, text: str, *, errors: str = "strict") -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``: a reader (or
    a crash) sees the old file or the new one, never half of it. ``errors``: how UTF-8
    encodes it (``surrogateescape`` writes back the bytes a file read that way held)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=errors, newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise MemoryStoreError(f"cannot write {path}: {exc.strerror}") from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

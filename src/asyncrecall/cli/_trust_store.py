"""Which project settings files the user trusts, recorded in the user's own home.

A project's ``.asyncrecall/settings.toml`` came with the folder (a cloned repository,
an unpacked archive): its author wrote it, not the user. Until the user trusts it, only
its harmless keys apply (see :mod:`asyncrecall.cli._settings`). Trust is given to one
content of one file, as direnv's ``allow`` does: the record keeps the file's resolved
path and the SHA-256 of its bytes, so any edit (a ``git pull``) makes it untrusted
again until the user trusts it anew.

The record is ``$ASYNCRECALL_HOME/trusted.json``::

    {"version": 1, "files": {"/abs/project/.asyncrecall/settings.toml": {"sha256": "..."}}}

It is replaced whole (a temporary file in the same folder, flushed, then renamed over
it), made with mode 0600, and changed under a lock, so two ``trust`` commands never
lose each other's entry. A record that is unreadable, malformed, not a regular file or
writable by anyone but its owner trusts nothing (and ``trust`` refuses to write over it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

from asyncrecall._exceptions import ConfigError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the record is still replaced whole
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "TRUST_FILE",
    "TrustState",
    "content_hash",
    "record_trust",
    "revoke_trust",
    "trust_state",
]

#: The record's name in ``$ASYNCRECALL_HOME``.
TRUST_FILE: Final = "trusted.json"
_VERSION: Final = 1

#: ``trusted``: this content of this file was trusted; ``changed``: the file was trusted
#: with other content; ``untrusted``: never (or the trust was revoked).
TrustState: TypeAlias = Literal["trusted", "changed", "untrusted"]


def content_hash(data: bytes) -> str:
    """The SHA-256 of ``data``, in hex: what trust is given to."""
    return hashlib.sha256(data).hexdigest()


def _key(path: Path) -> str:
    return os.path.realpath(path)


def trust_state(home: Path, path: Path, data: bytes) -> TrustState:
    """Whether the file at ``path``, read as ``data``, is trusted in ``home``'s record.
    ``data`` is what the caller read and will use: the hash is of those bytes, not of
    a second read the folder's author could change in between."""
    try:
        files = _read(home)
    except ConfigError:
        return "untrusted"
    entry = files.get(_key(path))
    if not isinstance(entry, dict):
        return "untrusted"
    return "trusted" if entry.get("sha256") == content_hash(data) else "changed"


def record_trust(home: Path, path: Path, data: bytes) -> None:
    """Trust ``data`` as the content of the file at ``path``."""
    with _locked(home):
        files = _read(home)
        files[_key(path)] = {"sha256": content_hash(data)}
        _write(home, files)


def revoke_trust(home: Path, path: Path) -> bool:
    """Forget the trust in the file at ``path``; whether there was any."""
    with _locked(home):
        files = _read(home)
        if files.pop(_key(path), None) is None:
            return False
        _write(home, files)
        return True


def _read(home: Path) -> dict[str, Any]:
    """The record's entries; ``{}`` when there is no record; a :class:`ConfigError` when
    it cannot be believed."""
    record = home / TRUST_FILE
    try:
        fd = os.open(record, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read the trust record {record}: {exc}") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"the trust record {record} is not a regular file")
        if os.name == "posix" and (
            info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or info.st_uid != os.getuid()
        ):
            raise ConfigError(
                f"the trust record {record} is writable by others or not yours: "
                "remove it and trust your folders again"
            )
        raw = handle.read()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"the trust record {record} is not JSON: {exc}") from exc
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise ConfigError(f"the trust record {record} has no `files` object")
    return files


def _write(home: Path, files: dict[str, Any]) -> None:
    import tempfile  # only ``trust`` writes: every other command only reads the record

    record = home / TRUST_FILE
    text = json.dumps({"version": _VERSION, "files": files}, indent=1, sort_keys=True) + "\n"
    handle, partial = tempfile.mkstemp(dir=home, prefix=f".{TRUST_FILE}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:  # mkstemp: mode 0600
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, record)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """Hold the record's lock (a file beside it) while its entries are read and replaced."""
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(home / f".{TRUST_FILE}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot write the trust record in {home}: {exc}") from exc
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    except OSError as exc:
        raise ConfigError(f"cannot write the trust record in {home}: {exc}") from exc
    finally:
        os.close(fd)

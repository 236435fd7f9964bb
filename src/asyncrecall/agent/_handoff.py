"""Extraction handed on at exit: a file per session that a detached worker runs.

A command that exits with an extraction still out (``run`` always does: its one
query's extraction starts as the answer completes) does not wait for it. It writes
what the extraction needs, the session's unprocessed turns and the end offset, to a
**hand-off file**, and a worker process that outlives it (see ``asyncrecall._handoff``)
runs that extraction. Nothing here knows how the worker is started or configured.

Layout, in the store's state area (:func:`handoff_dir`)::

    <memory folder>.state/handoff/<session>.json   what to extract (an atomic replace)
    <memory folder>.state/handoff/<session>.lock   locked while someone owns it
    <memory folder>.state/handoff/.worker.lock     held by the one worker that drains
    <memory folder>.state/handoff/worker.log       what the workers had to say

For a PostgreSQL store the files live in the user's cache instead (one folder per
database and namespace, under ``$ASYNCRECALL_HOME/handoff/``): the database holds the
cursors, this machine holds the work it has not done yet.

Ownership is an exclusive lock on the ``.lock`` file (``flock``; see
:mod:`asyncrecall._platform`), taken **before** the ``.json`` is written and let go
once it is: a ``.json`` whose lock anyone can take is **queued** (or **stale**: its
worker died, however it died, ``kill -9`` included, since the system drops a lock with
its last holder). A worker claims one by taking its lock.

One worker at a time drains a store's hand-offs: it holds ``.worker.lock`` (the
**drain lock**). A command that owes an extraction writes its hand-off, lets its lock
go, then tries the drain lock: taken, it starts a worker and passes the lock on (the
descriptor is inherited where locks are, POSIX; elsewhere, Windows, the command lets go
and the worker takes the drain lock itself, with a wait; if another worker takes it
first, that one drains); held, a worker is draining and the hand-off waits in its
queue. A worker runs every queued hand-off, oldest first, then lets the drain lock go
and looks once more: a command that found the lock held had queued its hand-off
before, so the worker sees it then, takes the lock again and goes on (unless another
worker took it first: then that one does). So however many commands end at once, one
worker process runs per store, and no hand-off waits for a next session.

Running a hand-off is one :meth:`~asyncrecall.memory.MemoryExtractor.extract` call
with the session's id: the extractor's own cursor and journal make a repeat safe (a
slice already extracted asks nobody; a crash during the writes is rolled forward), so
a worker killed at any step loses nothing and repeats nothing. The ``.json`` is
removed only after the extraction returned (or failed for good).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from asyncrecall import _platform
from asyncrecall.memory import ForeignText, MemoryExtractor, Store, TranscriptTurn
from asyncrecall.models import PromptPrefix

__all__ = [
    "HANDOFF_SUPPORTED",
    "Handoff",
    "HandoffDir",
    "handoff_dir",
    "store_handoff_dir",
]

#: Whether this platform can hand extraction on (it needs file locks: POSIX, Windows).
HANDOFF_SUPPORTED: Final = _platform.LOCKS

_VERSION: Final = 1
_JSON: Final = ".json"
_LOCK: Final = ".lock"
_DRAIN: Final = ".worker"  # its lock file: .worker.lock (no session id starts with ".")
LOG_NAME: Final = "worker.log"
_LOG_LIMIT: Final = 1 << 20  # a log over 1 MiB starts again (the old one kept as .1)
_CLAIM_RETRY_S: Final = 0.02


@dataclass(frozen=True, slots=True)
class Handoff:
    """One session's extraction left to do: ``turns`` (unprocessed, in order) up to
    ``end``; ``noted``: the session was already counted for consolidation;
    ``attempts``: extractions of it that failed (a worker that died is not one);
    ``foreign``: the text the session's model was shown that the user did not type
    (its writes are vetted against it), ``partial``: some of it was not kept;
    ``ended``: the session ended with this hand-off (its cursor goes once it is done),
    else it goes on (an agent's turn end: its next hand-off starts at the cursor);
    ``prefix``: how the session's main turns began (the extraction's side query begins
    the same way; ``None``: it keeps its own system prompt)."""

    session_id: str
    end: int
    turns: tuple[TranscriptTurn, ...]
    noted: bool = False
    created_at: float = 0.0
    attempts: int = 0
    foreign: tuple[ForeignText, ...] = ()
    partial: bool = False
    ended: bool = True
    prefix: PromptPrefix | None = None

    def with_attempts(self, attempts: int) -> Handoff:
        return replace(self, attempts=attempts)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _VERSION,
            "session": self.session_id,
            "end": self.end,
            "noted": self.noted,
            "attempts": self.attempts,
            "created_at": self.created_at or time.time(),
            "turns": [
                {"offset": t.offset, "role": t.role, "text": t.text, "after_tools": t.after_tools}
                for t in self.turns
            ],
            "foreign": [{"label": f.label, "text": f.text} for f in self.foreign],
            "partial": self.partial,
            "ended": self.ended,
            **({"prefix": self.prefix.to_json()} if self.prefix is not None else {}),
        }

    @classmethod
    def from_json(cls, data: Any) -> Handoff:
        """Parse a hand-off file's JSON; ``ValueError`` when it is not one."""
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise ValueError("not a hand-off file of this version")
        turns = []
        for raw in data.get("turns") or ():
            role = raw.get("role") if isinstance(raw, dict) else None
            if role not in ("user", "assistant") or not isinstance(raw.get("offset"), int):
                raise ValueError(f"bad turn {raw!r}")
            turns.append(
                TranscriptTurn(
                    raw["offset"], role, str(raw.get("text", "")), raw.get("after_tools") is True
                )
            )
        foreign = []
        for raw in data.get("foreign") or ():
            if not isinstance(raw, dict) or not isinstance(raw.get("text"), str):
                raise ValueError(f"bad outside text {raw!r:.80}")
            foreign.append(ForeignText(str(raw.get("label") or "outside text"), raw["text"]))
        session, end = data.get("session"), data.get("end")
        if not isinstance(session, str) or not isinstance(end, int):
            raise ValueError("a hand-off needs a session and an end")
        return cls(
            session,
            end,
            tuple(turns),
            noted=bool(data.get("noted")),
            created_at=float(data.get("created_at") or 0.0),
            attempts=int(data.get("attempts") or 0),
            foreign=tuple(foreign),
            partial=data.get("partial") is True,
            ended=data.get("ended") is not False,
            prefix=PromptPrefix.from_json(data["prefix"]) if "prefix" in data else None,
        )


def handoff_dir(extractor: MemoryExtractor, *, cache: Path) -> Path:
    """Where the hand-offs of ``extractor``'s store live: beside a folder's extraction
    state, else (a database) ``cache/<digest of the store's key>``."""
    return _root(extractor.state_dir, extractor.backend.key, cache)


def store_handoff_dir(store: Store, *, cache: Path) -> Path:
    """:func:`handoff_dir` of an extractor of ``store`` with the store's own extraction
    state (for a process that holds no extractor)."""
    backend = store.extraction_backend()
    return _root(backend.state_dir, backend.key, cache)


def _root(state_dir: Path | None, key: str, cache: Path) -> Path:
    if state_dir is not None:
        return state_dir / "handoff"
    return cache / hashlib.sha256(key.encode()).hexdigest()[:16]


class HandoffDir:
    """The hand-off files of one store (see the module doc)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"HandoffDir({str(self.root)!r})"

    @property
    def log_path(self) -> Path:
        return self.root / LOG_NAME

    def path(self, session_id: str) -> Path:
        return self.root / f"{session_id}{_JSON}"

    def write(self, handoff: Handoff) -> None:
        """Take the session's lock, write its hand-off (atomically), let the lock go: the
        hand-off is queued for whichever worker drains (see the module doc)."""
        fd = self._lock(handoff.session_id, block=True)
        assert fd is not None
        try:
            _atomic_write(self.path(handoff.session_id), json.dumps(handoff.to_json()))
        finally:
            os.close(fd)

    def take_drain(self, *, wait: float = 0.0) -> int | None:
        """The drain lock if no worker holds it (its descriptor), else ``None``.
        ``wait``: seconds to try for while someone holds it (the command that started
        this worker, letting go where a lock cannot be inherited)."""
        fd = self._lock(_DRAIN, block=False)
        deadline = time.monotonic() + wait
        while fd is None and time.monotonic() < deadline:
            time.sleep(_CLAIM_RETRY_S)
            fd = self._lock(_DRAIN, block=False)
        return fd

    def read(self, session_id: str) -> Handoff | None:
        """The session's hand-off, ``None`` when there is none (or it is unreadable)."""
        try:
            return Handoff.from_json(json.loads(self.path(session_id).read_text("utf-8")))
        except (OSError, ValueError):
            return None

    def pending(self) -> list[str]:
        """Sessions with a hand-off file, oldest first (whoever owns them)."""
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return []
        files = [e for e in entries if e.name.endswith(_JSON) and not e.name.startswith(".")]
        files.sort(key=lambda e: _mtime(e))
        return [e.name[: -len(_JSON)] for e in files]

    def claim(self, session_id: str) -> int | None:
        """The session's lock if nobody holds it and its hand-off is still there (queued,
        or a dead worker's: stale), else ``None``. The caller runs it, then
        :meth:`complete`."""
        fd = self._lock(session_id, block=False)
        if fd is None:
            return None
        if not self.path(session_id).exists():  # done by its owner just before we looked
            os.close(fd)
            return None
        return fd

    def stale(self) -> list[str]:
        """Sessions whose hand-off nobody owns (probed, not kept: see :meth:`claim`)."""
        found = []
        for session in self.pending():
            fd = self._lock(session, block=False)
            if fd is not None:
                os.close(fd)
                found.append(session)
        return found

    def complete(self, session_id: str, fd: int) -> None:
        """Remove the session's hand-off (then its lock file) and release the lock."""
        try:
            with contextlib.suppress(FileNotFoundError):
                self.path(session_id).unlink()
            # Windows removes no file that is open (ours, or a worker's look): it stays,
            # empty, for the session's next lock.
            with contextlib.suppress(OSError):
                (self.root / f"{session_id}{_LOCK}").unlink()
        finally:
            os.close(fd)

    def update(self, handoff: Handoff) -> None:
        """Rewrite a hand-off the caller holds the lock of (atomically)."""
        _atomic_write(self.path(handoff.session_id), json.dumps(handoff.to_json()))

    def open_log(self) -> int:
        """An append descriptor on the workers' log (restarted when over 1 MiB)."""
        self.root.mkdir(parents=True, exist_ok=True)
        log = self.log_path
        with contextlib.suppress(OSError):
            if log.stat().st_size > _LOG_LIMIT:
                os.replace(log, log.with_suffix(".log.1"))
        return os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def _lock(self, session_id: str, *, block: bool) -> int | None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / f"{session_id}{_LOCK}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            taken = _platform.lock(fd, block=block)
        except BaseException:
            os.close(fd)
            raise
        if not taken:
            os.close(fd)
            return None
        return fd


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0


def _atomic_write(path: Path, text: str) -> None:
    """``text`` to ``path`` through a temporary file and ``os.replace``: a reader sees
    the old file or the new one, never half of one. Not fsynced: that would lengthen
    every exit, and a hand-off lives for seconds; what a power loss takes with it is
    one query's extraction, never a memory (those writes are the store's, fsynced)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

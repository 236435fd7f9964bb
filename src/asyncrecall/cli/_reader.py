"""Reading the memory folder at process entry, while the rest of the program imports.

A new ``asyncrecall run`` or ``chat`` spends most of its start-up importing (the
OpenAI SDK above all). :func:`start_reading_memory` runs in
:func:`asyncrecall.cli.main` right after the command line is parsed (once) and its
settings resolved, before the command imports its machinery: it starts a daemon
thread that scans the folder (from its persisted index: nothing is parsed when it is
unchanged) and prepares the lexical term counts (from theirs). The session built later
adopts that store and that selector (:func:`adopt`), so the first user query's instant
lexical pass finds them ready and rides on the first request.

A folder that changed much since its index was written (over
:data:`CHILD_THRESHOLD_BYTES` to parse: a few notes are parsed in the thread) is parsed
in a child process instead (``python -c``: the same interpreter, environment and
paths), which writes the folder's persisted index and lexical counts and exits; the
thread waits for it, then loads them as from an unchanged folder. Parsing hundreds of
changed notes in the thread costs it several times the CPU of loading the child's
result, all of it holding the interpreter's lock that the command's imports need
(``benchmarks/cli.md``). The child runs on
another core and never holds that lock. It is given :data:`CHILD_TIMEOUT_S`; when it
fails, times out or cannot start, the thread parses as before.
``ASYNCRECALL_READ_AHEAD=thread`` always parses in the thread (for side-by-side
measurements, ``benchmarks/cli.md``).

With memory off (``--no-memory``, ``ASYNCRECALL_MEMORY=0``, ``memory = false``), a
database store, or any other command, nothing starts. A bad flag or a bad settings file
is reported before anything starts.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from asyncrecall.cli._settings import Settings
    from asyncrecall.memory import FolderStore, LexicalSelector, RecallResult

__all__ = [
    "FolderWarmup",
    "adopt",
    "discard_reader_files",
    "index_folder",
    "reader_settings",
    "start_reading_memory",
    "sweep_reader_files",
    "write_reader_file",
]

logger = logging.getLogger("asyncrecall.memory")

#: More to parse than this goes to a child process (a dozen ordinary notes, ~16 KiB,
#: parse in the thread in less time than a child process takes to start).
CHILD_THRESHOLD_BYTES: Final = 16 * 1024
#: How long the thread waits for the child (generous: far more than it needs for
#: thousands of changed notes).
CHILD_TIMEOUT_S: Final = 30.0
_CHILD_CODE: Final = (
    "import sys; from asyncrecall.cli._reader import index_folder; index_folder(sys.argv[1])"
)
_PRIME_CODE: Final = (
    "import sys; from asyncrecall.cli._memory_config import prime_child; "
    "sys.exit(prime_child(sys.argv[1:]))"
)


@dataclass(frozen=True)
class FolderWarmup:
    """A memory folder being read ahead of the session that will use it: in a thread,
    or (``run QUESTION``) in a reader process that also runs the question's instant pass."""

    store: FolderStore
    lexical: LexicalSelector
    thread: threading.Thread | None
    primed: PrimedRecall | None = None


class PrimedRecall:
    """The instant pass of ``run``'s question, computed by a reader process: see
    :class:`asyncrecall.cli._memory_config.ReadAheadManager`. :meth:`take` never waits.

    The reader writes into ``out``, a file this process made (see :func:`_prime`) and
    removes as soon as the results are taken, at exit, or on a terminating signal
    (:func:`discard_reader_files`)."""

    def __init__(self, query: str, child: subprocess.Popen[bytes], out: str) -> None:
        self.query = query
        self._child, self._out = child, out
        self._results: dict[str, Any] | None = None
        atexit.register(self._forget)

    def take(self, limit: int) -> RecallResult | None:
        """The pass's result at ``limit`` files, or ``None`` (not done, failed, or no
        result at that limit)."""
        if self._results is None:
            # The reader fills the empty file with its results, then records what the
            # next process may reuse (``prime_child``): the results count from then.
            found = self._read()
            if found is None:
                if self._child.poll() is None:
                    return None  # not written yet, or being written
                found = self._read() or {}  # it ended: what it wrote, if anything
            self._results = found
            self._forget()
        data = self._results.get(str(limit))
        return decode_result(data) if data is not None else None

    def _read(self) -> dict[str, Any] | None:
        """The results once completely written, else ``None`` (a JSON object is not
        complete before its last byte)."""
        import json

        try:
            with open(self._out, "rb") as file:
                raw = file.read()
        except OSError:
            return None
        if not raw:
            return None
        try:
            found = json.loads(raw)
        except ValueError:
            logger.debug("the reader process's result is not complete (yet)")
            return None
        return found if isinstance(found, dict) else {}

    def _forget(self) -> None:
        _remove_reader_file(self._out)


#: The reader files this process made, or is about to make, and has not removed yet.
_READER_FILES: list[str] = []
#: Reader files are ``<temporary folder>/asyncrecall-primed-<pid of the command>-*.json``.
READER_PREFIX: Final = "asyncrecall-primed-"
#: A reader file whose name names no command (or, where a process cannot be probed,
#: any) is swept once this old (seconds).
_READER_MAX_AGE_S: Final = 3600.0


def discard_reader_files() -> None:
    """Remove every reader file of this process now (a terminating signal: ``atexit``
    will not run). A reader still running cannot write it again: it never creates it."""
    for path in list(_READER_FILES):
        _remove_reader_file(path)


def _new_reader_file() -> str:
    """Make an empty reader file: exclusively, 0600, not through a link, under a name
    no one can guess with this process's id in it (a dead owner's file is swept:
    :func:`sweep_reader_files`). Its path is listed before the file exists, so a
    terminating signal at any point from here on removes it (:func:`discard_reader_files`)."""
    import tempfile

    # os.urandom, not secrets: this runs before the command's imports, and secrets
    # imports hmac and base64 for nothing here.
    name = f"{READER_PREFIX}{os.getpid()}-{os.urandom(8).hex()}.json"
    path = os.path.join(tempfile.gettempdir(), name)
    _READER_FILES.append(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        os.close(os.open(path, flags | getattr(os, "O_BINARY", 0), 0o600))
    except OSError:
        _READER_FILES.remove(path)
        raise
    return path


def _remove_reader_file(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
    with contextlib.suppress(ValueError):
        _READER_FILES.remove(path)


def write_reader_file(path: str, data: bytes) -> bool:
    """The reader process's write of its results into ``path``, the file its command
    made: opened without creating it and without following a link (a command that has
    already removed it gets nothing back in the temporary folder); ``False`` when it
    cannot be written."""
    flags = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def sweep_reader_files(now: float | None = None) -> int:
    """Remove the reader files of commands that died without removing theirs (``kill
    -9``): their owner's process is gone, or (where that cannot be asked, or the name
    names no process) they are over an hour old. Only this user's files. Returns how
    many were removed."""
    import tempfile
    import time

    folder = tempfile.gettempdir()
    now = time.time() if now is None else now
    uid = os.getuid() if hasattr(os, "getuid") else None
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if not (entry.name.startswith(READER_PREFIX) and entry.name.endswith(".json")):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if uid is not None and info.st_uid != uid:
            continue
        owner = entry.name[len(READER_PREFIX) :].split("-", 1)[0]
        alive = _alive(int(owner)) if owner.isdigit() else None
        if alive is False or (alive is None and now - info.st_mtime > _READER_MAX_AGE_S):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed += 1
    return removed


def _alive(pid: int) -> bool | None:
    """Whether process ``pid`` exists; ``None`` where that cannot be asked safely."""
    if os.name != "posix":
        return None  # os.kill(pid, 0) is not a probe there
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def encode_result(result: RecallResult) -> dict[str, Any]:
    """``result`` as JSON-ready data (:func:`decode_result` reads it back)."""
    docs = [
        {**{f.name: getattr(d, f.name) for f in dataclasses.fields(d)}, "path": str(d.path)}
        for d in result.selected
    ]
    return {
        "prompt": result.prompt,
        "strategy": result.strategy,
        "fallback_reason": result.fallback_reason,
        "reason": result.reason,
        "selected": docs,
    }


def decode_result(data: Mapping[str, Any]) -> RecallResult:
    """The :class:`~asyncrecall.memory.RecallResult` :func:`encode_result` wrote."""
    from asyncrecall.memory import MemoryDoc, RecallResult

    docs = tuple(MemoryDoc(**{**d, "path": Path(d["path"])}) for d in data["selected"])
    return RecallResult(
        data["prompt"], docs, data["strategy"], data["fallback_reason"], reason=data.get("reason")
    )


_started: dict[Path, FolderWarmup] = {}
_lock = threading.Lock()


def start_reading_memory(settings: Settings, question: str | None = None) -> FolderWarmup | None:
    """Start reading the folder a command with ``settings`` will recall from; ``None``
    when it will not recall (memory off, a database store). ``question``: ``run``'s,
    when it is on the command line: a reader process reads the folder and runs the
    question's instant pass (see :class:`PrimedRecall`), so this interpreter reads
    nothing before its first request; the thread when it cannot start."""
    if not settings.memory_enabled or settings.store:
        return None
    root = settings.memory_folder()
    if question and question.strip():
        primed = _prime(root, question, reader_settings(settings, root))
        if primed is not None:
            return primed
    return warm_folder(root)


#: What of the command's settings the reader process's pass depends on (it is given
#: them resolved: it reads no command line, environment or settings file).
_READER_SETTINGS: Final = (
    "quarantine",
    "recall_file_chars",
    "recall_file_lines",
    "skip_trivial",
    "instant_files",
    "recall_files",
)


def reader_settings(settings: Settings, root: Path) -> dict[str, object]:
    """The part of ``settings`` the reader process needs, as JSON-ready data (the
    folder ``root`` resolved)."""
    return {"memory_dir": str(root), **{name: getattr(settings, name) for name in _READER_SETTINGS}}


def warm_folder(root: Path) -> FolderWarmup:
    """Start (once per folder and process) reading ``root`` in a daemon thread."""
    from asyncrecall.memory import FolderStore, LexicalSelector, Recaller

    key = root.expanduser().absolute()
    with _lock:
        found = _started.get(key)
        if found is not None:
            return found
        # No postings: building them costs the start-up more than a query or two saves.
        store, lexical = FolderStore(key), LexicalSelector(postings=False)
        in_child = os.environ.get("ASYNCRECALL_READ_AHEAD", "").strip().lower() != "thread"

        def parse_changes() -> None:
            if in_child and store.unparsed_bytes() > CHILD_THRESHOLD_BYTES and _in_child(key):
                store.reread_index()

        thread = Recaller(store, lexical).start_warming(first=parse_changes)
        found = _started[key] = FolderWarmup(store, lexical, thread)
        return found


def _prime(root: Path, question: str, given: Mapping[str, object]) -> FolderWarmup | None:
    """Start the reader process of :class:`PrimedRecall` for ``root``; ``None`` when it
    cannot start (the thread reads the folder then)."""
    import json

    from asyncrecall.memory import FolderStore, LexicalSelector

    key = root.expanduser().absolute()
    with _lock:
        if key in _started:
            return _started[key]
        try:  # the reader only writes into it
            out = _new_reader_file()
        except OSError:
            logger.debug("cannot make the reader process's file", exc_info=True)
            return None
        try:
            child = subprocess.Popen(
                [sys.executable, "-c", _PRIME_CODE, out, question, json.dumps(dict(given))],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except (OSError, ValueError):  # ValueError: a NUL in the question
            logger.debug("cannot start the folder's reader process", exc_info=True)
            _remove_reader_file(out)
            return None
        primed = PrimedRecall(question, child, out)
        found = _started[key] = FolderWarmup(
            FolderStore(key), LexicalSelector(postings=False), None, primed
        )
        return found


def index_folder(root: str) -> None:
    """The child's work: parse the folder, tokenise it, write both persisted indexes and
    the record of quarantined paths."""
    from asyncrecall.memory import FolderStore, LexicalSelector

    store = FolderStore(Path(root))
    LexicalSelector(postings=False).prepare(store.warm_scan())
    store.quarantined_paths()


def _in_child(root: Path) -> bool:
    """Run :func:`index_folder` for ``root`` in a child process; whether it succeeded.
    Its output is dropped (the thread's scan after it warns of a bad file, once)."""
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD_CODE, str(root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        logger.debug("cannot start the folder's reader process", exc_info=True)
        return False
    try:
        code = child.wait(CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        logger.debug("the folder's reader process took over %.0f s", CHILD_TIMEOUT_S)
        return False
    return code == 0


def adopt(root: Path) -> FolderWarmup | None:
    """The warm-up started for ``root`` in this process, if any."""
    with _lock:
        return _started.get(root.expanduser().absolute())

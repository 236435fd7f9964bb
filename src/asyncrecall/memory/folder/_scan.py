"""Scanning the memory folder: which files are topic files, newest first, cached.

Rules:

- a topic file is any ``*.md`` below the folder except the top-level ``MEMORY.md``;
  names starting with ``.`` (our lock and temporary files, editors' swap files) and
  directories starting with ``.`` are ignored;
- a file is skipped, with one warning on the ``asyncrecall.memory`` logger, when it has
  no front matter, a missing or unknown type, is not UTF-8, is over 1 MiB, or is a link
  that points outside the folder, or has a control character (a newline ...) in its
  path. The warning is given once per file state (size and
  modification time): a later scan of the same bad file is silent;
- nothing outside the folder is ever opened: every candidate's real path is checked to
  lie below the folder's real path before it is read, and links to directories are not
  followed;
- a scan returns at most ``limit`` (200) documents, newest modification time first;
- each file's parse is cached on (size, mtime), so a warm scan stats files and parses
  nothing; :meth:`Scanner.scan_cached` is that warm scan or ``None``, never reading a
  file (recall uses it to decide whether it may run on the event loop);
- where the kernel can say that nothing changed since the last walk (Linux, a local
  file system: :mod:`._watch`), a warm scan does not even stat: it returns the last
  walk's answer;
- the parses persist per folder in ``.cache/scan-v1.marshal`` (written by
  ``scan(persist=True)``, atomically, when anything was parsed): a new scanner's first
  walk starts from them, so a new process on an unchanged folder parses nothing (the
  index loads in a fraction of a parse's time; a changed file is parsed again, as its
  size or modification time tell). ``marshal``, not JSON (many times slower to load): the
  file is ours, in a hidden folder, and starts with a header naming its format and the
  Python that wrote it; anything else is ignored;
- ``scan_cached(budget_bytes=N)`` may parse, inline, files not cached whose sizes add
  up to at most ``N`` bytes (once the YAML parser is loaded), where a cached-only scan
  would answer ``None``: a note or two saved since the last walk.

The scanner is thread-safe (recall runs scans in a worker thread).
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import operator
import os
import re
import stat
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

from asyncrecall.memory._document import FrontMatterError, parse_document, parser_loaded
from asyncrecall.memory._limits import INDEX_NAME, MAX_FILE_BYTES, SCAN_LIMIT, inside
from asyncrecall.memory._types import MEMORY_TYPES, MemoryDoc
from asyncrecall.memory.folder._held import (
    Stamps,
    dir_stamps,
    new_token,
    read_held,
    read_token,
    still,
    write_held,
)
from asyncrecall.memory.folder._watch import FolderWatch

__all__ = ["Scanner"]

logger = logging.getLogger("asyncrecall.memory")

_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_TYPES: Final = frozenset(MEMORY_TYPES)
_REL_PATH: Final = operator.itemgetter(1)
_MTIME: Final = operator.itemgetter(4)
#: Where the parses persist (a hidden folder: never walked).
_INDEX_DIR: Final = ".cache"
_INDEX_NAME: Final = "scan-v1.marshal"
# Version 2: each row also holds the memory's origin and quarantine.
# Version 3: quarantine by the order of the sources (only the user lifts a hold), so a
# row a version-2 reader decided by the newest source alone is parsed again.
_INDEX_HEADER: Final = ("asyncrecall-scan", 3, marshal.version, sys.version_info[:2])


class _Candidate(NamedTuple):
    """A ``*.md`` file found by the walk, with the stat of its target (a tuple: the
    warm scan builds 200 of these per recall)."""

    path: str
    rel_path: str
    real_path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class _Entry:
    """A cached parse: the document, or the reason the file was skipped."""

    key: tuple[int, int]
    doc: MemoryDoc | None
    reason: str | None


class Scanner:
    """Walks one memory folder and keeps a per-file parse cache."""

    def __init__(self, root: Path, *, watch: bool = True) -> None:
        self._root = root
        self._cache: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._warned_links: set[tuple[str, str]] = set()
        self._scanned = False  # a full scan has run: the cache reflects the folder
        # The folder watch (None: every scan walks) and what it vouches for: the last
        # walk's candidates, sorted, and the documents computed from them per limit.
        self._watch_slot: list[FolderWatch | None] = [None]
        self._watch_refused: str | None = None if watch else "*"
        self._walked: list[_Candidate] | None = None
        self._answers: dict[int | None, list[MemoryDoc]] = {}
        self._index_read = False  # the persisted parses were read (or found missing)
        self._index_dirty = False  # parsed since the index was last read or written
        self._budget = 0  # bytes the current cached-only scan may still parse
        # The write token and folder times last recorded (_held).
        self._held_key: tuple[str, Stamps] | None = None
        weakref.finalize(self, _close_watch, self._watch_slot)

    def scan(self, *, limit: int | None = SCAN_LIMIT, persist: bool = False) -> list[MemoryDoc]:
        """The valid documents, newest first, at most ``limit`` (``None``: all).

        ``persist``: write the folder's parse index when anything was parsed (warm-up
        paths ask for it; the write paths do not pay for it)."""
        docs = self._scan(limit, cached_only=False, persist=persist)
        assert docs is not None
        return docs

    def scan_cached(
        self, *, limit: int | None = SCAN_LIMIT, budget_bytes: int = 0
    ) -> list[MemoryDoc] | None:
        """What :meth:`scan` returns when every file's parse is cached (a walk and a stat
        per file, nothing read: well under a millisecond for 200 files; nothing at all
        when the folder watch says nothing changed), else ``None`` without reading any
        file. ``budget_bytes``: files up to that many bytes in all may be parsed here.

        Never waits: while another thread scans, ``None`` at once."""
        if not self._scanned:
            return None  # a new scanner: no need to walk to know that
        if not self._lock.acquire(blocking=False):
            return None  # a scan runs in a worker thread: the caller must not block on it
        try:
            self._budget = budget_bytes if budget_bytes > 0 and parser_loaded() else 0
            return self._scan_locked(limit, cached_only=True, persist=False)
        finally:
            self._budget = 0
            self._lock.release()

    def unparsed_bytes(self, *, limit: int | None = SCAN_LIMIT) -> int:
        """How many bytes a scan would parse now: the sizes of the newest ``limit`` files
        whose parse is neither cached nor in the folder's persisted index (read here if
        it was not yet). Walks the folder; reads and parses no topic file."""
        with self._lock:
            try:
                real_root = os.path.realpath(self._root)
            except OSError:
                return 0
            if not os.path.isdir(real_root):
                return 0
            if not self._index_read:
                self._read_index(real_root)
            candidates = self._sorted_walk(real_root, None)
            cache = self._cache
            return sum(
                candidate.size
                for candidate in candidates[:limit]
                if (entry := cache.get(candidate.rel_path)) is None
                or entry.key != (candidate.size, candidate.mtime_ns)
            )

    def read_one(self, rel: str) -> MemoryDoc | None:
        """The document in the one file ``rel`` (a writer reading back what it just
        wrote), parsed and cached as a scan parses it, so the next scan need not; ``None``
        where a scan would not list it (a hidden, linked or invalid file, not a topic
        file). Walks nothing."""
        parts = rel.split("/")
        if (
            not rel.endswith(".md")
            or rel == INDEX_NAME
            or _CONTROL.search(rel)
            or any(not part or part.startswith(".") for part in parts)
        ):
            return None
        with self._lock:
            try:
                real_root = os.path.realpath(self._root)
                path = os.path.join(real_root, *parts)
                if os.path.normcase(os.path.realpath(path)) != os.path.normcase(path):
                    return None  # through a link: the walk lists it its own way
                info = os.stat(path, follow_symlinks=False)
            except OSError:
                return None
            if not stat.S_ISREG(info.st_mode):
                return None
            return self._load(_Candidate(path, rel, path, info.st_size, info.st_mtime_ns))

    def quarantined(self) -> set[str]:
        """The relative paths of every quarantined document: from the folder's record
        (:mod:`._held`: no file walked or parsed) while it holds, else from a full scan
        (every file, not only the newest 200), recorded when no writer of ours wrote
        during it and no folder changed during it nor within :data:`._held.SETTLE_NS`
        before."""
        try:
            real_root = os.path.realpath(self._root)
        except OSError:
            return set()
        recorded = read_held(real_root)
        if recorded is not None:
            return recorded
        return self._record_held(real_root, read_token(real_root), settled_only=True)

    def record_quarantined(self) -> None:
        """Record the quarantined paths now, a folder changed just now included: for the
        store's writers, which hold the folder's lock and replace its write token first
        (no write of ours can go unseen, whatever the clock's resolution), so that the
        next process need not scan after a save."""
        with contextlib.suppress(OSError):
            real_root = os.path.realpath(self._root)
            self._record_held(real_root, new_token(real_root), settled_only=False)

    def _record_held(self, real_root: str, token: str, *, settled_only: bool) -> set[str]:
        stamps = dir_stamps(real_root)
        held = {doc.rel_path for doc in self.scan(limit=None) if doc.quarantined}
        if (
            stamps is not None
            and (token, stamps) != self._held_key
            and (still(stamps) or not settled_only)
            and read_token(real_root) == token
            and dir_stamps(real_root) == stamps
        ):
            write_held(real_root, stamps, held, token)
            self._held_key = (token, stamps)
        return held

    def reread_index(self) -> None:
        """Read the folder's persisted index again (another process has just written
        it): its parses replace the cached ones that no longer match their file."""
        with self._lock:
            try:
                real_root = os.path.realpath(self._root)
            except OSError:
                return
            self._read_index(real_root, replace=True)

    def _scan(
        self, limit: int | None, *, cached_only: bool, persist: bool
    ) -> list[MemoryDoc] | None:
        with self._lock:
            return self._scan_locked(limit, cached_only=cached_only, persist=persist)

    def _scan_locked(
        self, limit: int | None, *, cached_only: bool, persist: bool
    ) -> list[MemoryDoc] | None:
        watch = self._watch_slot[0]
        walked = self._walked
        if walked is not None and watch is not None and watch.unchanged(str(self._root)):
            answer = self._answers.get(limit)
            if answer is not None:
                return list(answer)
            return self._documents(walked, limit, cached_only=cached_only)
        try:
            real_root = os.path.realpath(self._root)
        except OSError:
            return []
        if not os.path.isdir(real_root):
            return []
        if not self._index_read and not cached_only:
            self._read_index(real_root)
        watch = self._watch_for(real_root)
        if watch is not None:
            watch.rewatch()  # before the walk: a change during it counts
        candidates = self._sorted_walk(real_root, watch)
        self._walked, self._answers = candidates, {}
        docs = self._documents(candidates, limit, cached_only=cached_only)
        if docs is None:
            return None
        self._scanned = True
        if len(self._cache) > 4 * max(len(candidates), SCAN_LIMIT):
            live = {c.rel_path for c in candidates}
            self._cache = {k: v for k, v in self._cache.items() if k in live}
        if persist and self._index_dirty:
            self._write_index(real_root, candidates)
        return docs

    def _documents(
        self, candidates: list[_Candidate], limit: int | None, *, cached_only: bool
    ) -> list[MemoryDoc] | None:
        """The first ``limit`` valid documents of the walk's sorted candidates; ``None``
        (with ``cached_only``) as soon as one would need reading."""
        docs: list[MemoryDoc] = []
        cache = self._cache
        for candidate in candidates:
            if limit is not None and len(docs) >= limit:
                break
            cached = cache.get(candidate.rel_path)
            if cached is not None and cached.key == (candidate.size, candidate.mtime_ns):
                doc = cached.doc
            elif cached_only and candidate.size > self._budget:
                return None
            else:
                if cached_only:
                    self._budget -= candidate.size
                doc = self._load(candidate)
            if doc is not None:
                docs.append(doc)
        self._answers[limit] = docs
        return list(docs)

    def _watch_for(self, real_root: str) -> FolderWatch | None:
        """The folder watch for this real root, opened on the first walk (or again when
        the root path now leads elsewhere, or after a fork)."""
        watch = self._watch_slot[0]
        if watch is not None and watch.real_root == real_root and not watch.orphaned:
            return watch
        if watch is not None:
            watch.close()
            self._watch_slot[0] = None
        if self._watch_refused in {"*", real_root}:
            return None
        watch = FolderWatch.open(real_root)
        self._watch_slot[0] = watch
        self._watch_refused = None if watch is not None else real_root
        return watch

    # -- the walk ---------------------------------------------------------------------

    def _walk(self, real_root: str, watch: FolderWatch | None) -> list[_Candidate]:
        """Every ``*.md`` below the root with its stat, hidden names and the index left out.

        The warm recall runs this on the event loop for up to 200 files per user message
        (where no folder watch spares it), so the common case (a plain file with an
        ordinary name) takes the short path: one ``stat`` and a tuple; links, odd names
        and folders take :meth:`_unusual`. Each folder is watched before it is listed.
        """
        found: list[_Candidate] = []
        stack: list[tuple[str, str]] = [(real_root, "")]
        control = _CONTROL.search
        while stack:
            directory, prefix = stack.pop()
            if watch is not None:
                watch.add(directory)
            try:
                entries = list(os.scandir(directory))
            except OSError as exc:
                self._warn_once(prefix or ".", f"cannot list folder: {exc.strerror}", "dir")
                continue
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                rel = prefix + name
                try:
                    is_link = entry.is_symlink()
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_dir:
                    stack.append((entry.path, f"{rel}/"))
                elif is_link or not name.endswith(".md") or rel == INDEX_NAME or control(rel):
                    candidate = self._unusual(real_root, entry, rel, is_link)
                    if candidate is not None:
                        found.append(candidate)
                        if is_link and watch is not None:
                            watch.distrust()  # its target's folder is not watched
                else:
                    try:
                        info = entry.stat()
                    except OSError:
                        continue  # removed during the walk
                    if stat.S_ISREG(info.st_mode):
                        path = entry.path
                        found.append(_Candidate(path, rel, path, info.st_size, info.st_mtime_ns))
                        if info.st_nlink > 1 and watch is not None:
                            watch.distrust()  # a write through its other name is unseen
        return found

    def _sorted_walk(self, real_root: str, watch: FolderWatch | None) -> list[_Candidate]:
        """:meth:`_walk`'s candidates, newest first, then by path (two stable sorts with
        C-level keys)."""
        candidates = self._walk(real_root, watch)
        candidates.sort(key=_REL_PATH)
        candidates.sort(key=_MTIME, reverse=True)
        return candidates

    def _unusual(
        self, real_root: str, entry: os.DirEntry[str], rel: str, is_link: bool
    ) -> _Candidate | None:
        """A link, a name that is not a topic file, or one with control characters."""
        if is_link and entry.is_dir():
            if not inside(real_root, os.path.realpath(entry.path)):
                self._warn_once(rel, "link to a folder outside the memory folder", "link")
            return None  # links to folders are never followed
        if not entry.name.endswith(".md") or rel == INDEX_NAME:
            return None
        if _CONTROL.search(rel):
            # A newline in a path would add a line to the selector's manifest.
            shown = rel.encode("unicode_escape").decode("ascii")  # one log line
            self._warn_once(shown, "control characters in its name", "name")
            return None
        return self._candidate(real_root, entry, rel, is_link)

    def _candidate(
        self, real_root: str, entry: os.DirEntry[str], rel: str, is_link: bool
    ) -> _Candidate | None:
        real = entry.path
        if is_link:
            real = os.path.realpath(entry.path)
            if not inside(real_root, real):
                self._warn_once(rel, "link pointing outside the memory folder", "link")
                return None
        try:
            info = os.stat(real) if is_link else entry.stat()
        except OSError:
            return None  # a dangling link or a file removed during the walk
        if not stat.S_ISREG(info.st_mode):
            return None
        return _Candidate(entry.path, rel, real, info.st_size, info.st_mtime_ns)

    # -- parsing, cached ----------------------------------------------------------------

    def _load(self, candidate: _Candidate) -> MemoryDoc | None:
        key = (candidate.size, candidate.mtime_ns)
        cached = self._cache.get(candidate.rel_path)
        if cached is not None and cached.key == key:
            return cached.doc
        doc, reason = self._parse(candidate)
        self._cache[candidate.rel_path] = _Entry(key, doc, reason)
        self._index_dirty = True
        if reason is not None:
            logger.warning("skipping memory file %s: %s", candidate.rel_path, reason)
        return doc

    def _parse(self, candidate: _Candidate) -> tuple[MemoryDoc | None, str | None]:
        if candidate.size > MAX_FILE_BYTES:
            return None, f"over 1 MiB ({candidate.size} bytes)"
        try:
            # O_NOFOLLOW: the real path was checked; refuse it if it became a link since.
            # O_BINARY (Windows): the bytes as written, no CRLF translation, no stop at ^Z.
            flags = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
            fd = os.open(candidate.real_path, os.O_RDONLY | flags)
            with os.fdopen(fd, "rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            return None, f"cannot read it: {exc.strerror}"
        if len(raw) > MAX_FILE_BYTES:
            return None, "over 1 MiB"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None, "not UTF-8 text"
        if "\x00" in text:
            return None, "not UTF-8 text (holds NUL bytes)"
        stem = candidate.rel_path.rsplit("/", 1)[-1].removesuffix(".md")
        try:
            parsed = parse_document(text, default_name=stem)
        except FrontMatterError as exc:
            return None, str(exc)
        doc = MemoryDoc(
            path=Path(candidate.path),
            rel_path=candidate.rel_path,
            name=parsed.name,
            description=parsed.description,
            type=parsed.type,
            body=parsed.body,
            mtime=candidate.mtime_ns / 1e9,
            size=candidate.size,
            origin=parsed.origin,
            quarantined=parsed.quarantined,
        )
        return doc, None

    # -- the persisted parses -----------------------------------------------------------

    def _read_index(self, real_root: str, *, replace: bool = False) -> None:
        """Seed the parse cache from the folder's index (each entry still checked against
        the walk's size and modification time before it is used). ``replace``: its
        entries replace cached ones of another size or modification time too."""
        self._index_read = True
        try:
            with open(os.path.join(real_root, _INDEX_DIR, _INDEX_NAME), "rb") as handle:
                data = marshal.loads(handle.read())
            if not isinstance(data, tuple) or len(data) != 2 or data[0] != _INDEX_HEADER:
                return
            cache = self._cache
            base = Path(real_root)  # a child of it parses only its own relative part
            for rel, size, mtime_ns, name, description, kind, body, origin, held in data[1]:
                if kind not in _TYPES:
                    continue
                known = cache.get(rel)
                if known is not None and (not replace or known.key == (size, mtime_ns)):
                    continue
                doc = MemoryDoc(
                    path=base / rel,
                    rel_path=str(rel),
                    name=str(name),
                    description=str(description),
                    type=kind,
                    body=str(body),
                    mtime=mtime_ns / 1e9,
                    size=int(size),
                    origin=str(origin),
                    quarantined=bool(held),
                )
                cache[rel] = _Entry((int(size), int(mtime_ns)), doc, None)
        except (OSError, ValueError, TypeError, EOFError, AttributeError):
            return  # missing, from another Python, or edited: parsed again, rewritten

    def _write_index(self, real_root: str, candidates: list[_Candidate]) -> None:
        """Write the parses of the walk's valid files, atomically; a folder we cannot
        write is left alone."""
        cache = self._cache
        rows = []
        for candidate in candidates:
            entry = cache.get(candidate.rel_path)
            if entry is None or entry.doc is None:
                continue
            doc = entry.doc
            rows.append(
                (
                    doc.rel_path,
                    entry.key[0],
                    entry.key[1],
                    doc.name,
                    doc.description,
                    doc.type,
                    doc.body,
                    doc.origin,
                    doc.quarantined,
                )
            )
        directory = os.path.join(real_root, _INDEX_DIR)
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{_INDEX_NAME}.", suffix=".tmp")
        except OSError:
            logger.debug("cannot write the scan index of %s", real_root, exc_info=True)
            return
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(marshal.dumps((_INDEX_HEADER, rows)))
            os.replace(tmp, os.path.join(directory, _INDEX_NAME))
            self._index_dirty = False
        except OSError:
            logger.debug("cannot write the scan index of %s", real_root, exc_info=True)
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _warn_once(self, rel: str, reason: str, kind: str) -> None:
        if (rel, kind) in self._warned_links:
            return
        self._warned_links.add((rel, kind))
        logger.warning("skipping memory file %s: %s", rel, reason)


def _close_watch(slot: list[FolderWatch | None]) -> None:
    """A scanner's finalizer: it may run anywhere, even inside the watch's own code."""
    watch = slot[0]
    if watch is not None:
        watch.close(later=True)

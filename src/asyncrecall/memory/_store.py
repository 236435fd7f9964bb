"""The memory folder: reading documents and the index, saving and forgetting memories.

Layout::

    <memory folder>/
        MEMORY.md            the index: one line per memory, ``- [Title](file.md) — hook``
        some-memory.md       topic files (front matter + body), possibly in sub-folders
        .memory.lock         the lock that serialises writers across processes

Writes are atomic (a temporary file in the same folder, then ``os.replace``) and every
read-modify-write of the folder holds the ``filelock`` lock, so two processes saving at
once lose nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._document import checked_fields, render_document, safe_file_stem
from asyncrecall.memory._scan import INDEX_NAME, MAX_FILE_BYTES, SCAN_LIMIT, Scanner, _inside
from asyncrecall.memory._threads import run_off_loop
from asyncrecall.memory._types import MemoryDoc, MemoryType

__all__ = ["INDEX_MAX_BYTES", "INDEX_MAX_LINES", "MemoryStore"]

INDEX_MAX_LINES: Final = 200
INDEX_MAX_BYTES: Final = 25_000
_LOCK_NAME: Final = ".memory.lock"
_LOCK_TIMEOUT_S: Final = 30.0


class MemoryStore:
    """One memory folder. Cheap to create; nothing is touched until a method is called."""

    #: A warm scan stats files and parses nothing: recall may run it on the event loop.
    inline_scan = True

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser().absolute()
        self._scanner = Scanner(self.root)

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.root)!r})"

    @property
    def location(self) -> str:
        """The folder, for messages."""
        return str(self.root)

    async def candidates(self, query: str, *, exclude: Collection[str] = ()) -> list[MemoryDoc]:
        """What recall offers a selector: the newest files (:meth:`scan`).

        A warm folder (every parse cached: nothing changed since the last walk, as the
        kernel says on Linux, or a stat per file) is scanned right here, which costs
        less than handing the work to a thread: starting one blocks
        the event loop until the new thread has run, and a thread that holds the GIL
        delays the loop by up to the interpreter's switch interval (5 ms). A cold one is
        scanned in a worker thread that a cancel abandons and exit never waits for.
        """
        warm = self.scan_cached()
        if warm is not None:
            return warm
        return await run_off_loop(lambda _stop: self.scan(), name="asyncrecall-scan")

    @property
    def index_path(self) -> Path:
        """``MEMORY.md`` of this folder."""
        return self.root / INDEX_NAME

    # -- reading ------------------------------------------------------------------------

    def ensure(self) -> Path:
        """Create the folder and an empty ``MEMORY.md`` if missing; returns the folder."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError), open(self.index_path, "x", encoding="utf-8"):
                pass
        except OSError as exc:
            raise MemoryStoreError(
                f"cannot create memory folder {self.root}: {exc.strerror}"
            ) from exc
        return self.root

    def scan(self, *, limit: int | None = SCAN_LIMIT) -> list[MemoryDoc]:
        """The valid topic files, newest first, at most ``limit`` (200; ``None``: all).

        Invalid files are skipped with one warning each; a missing folder scans empty.
        """
        return self._scanner.scan(limit=limit)

    def scan_cached(
        self, *, limit: int | None = SCAN_LIMIT, budget_bytes: int = 0
    ) -> list[MemoryDoc] | None:
        """:meth:`scan` when no file needs reading (every parse is cached, or those that
        are not add up to ``budget_bytes`` at most), else ``None``."""
        return self._scanner.scan_cached(limit=limit, budget_bytes=budget_bytes)

    def warm_scan(self) -> list[MemoryDoc]:
        """:meth:`scan` for warm-up paths: a new store starts from the folder's persisted
        parses, and they are written back when anything had to be parsed."""
        return self._scanner.scan(persist=True)

    def get(self, name_or_rel_path: str) -> MemoryDoc:
        """The memory with this relative path or name, or :class:`MemoryStoreError`."""
        key = name_or_rel_path.strip()
        docs = self.scan(limit=None)
        stem_path = f"{safe_file_stem(key)}.md"
        tests: tuple[Callable[[MemoryDoc], bool], ...] = (
            lambda d: d.rel_path == key,
            lambda d: d.name == key,
            lambda d: d.name.casefold() == key.casefold(),
            lambda d: d.rel_path == stem_path,
        )
        for wanted in tests:
            found = next((doc for doc in docs if wanted(doc)), None)
            if found is not None:
                return found
        raise MemoryStoreError(f"no memory named {key!r} in {self.root}")

    def index_for_prompt(self) -> str:
        """``MEMORY.md`` for the system prompt, cut at 200 lines or 25,000 bytes.

        When cut, a warning line at the end says so. A missing index reads as "".
        """
        raw = self._read_index_bytes()
        if raw is None:
            return ""
        text = raw.decode("utf-8", errors="replace").strip("\n")
        if not text:
            return ""
        lines = text.split("\n")
        return cut_index(lines, total_lines=len(lines), total_bytes=len(text.encode("utf-8")))

    def _read_index_bytes(self) -> bytes | None:
        try:
            real_root = os.path.realpath(self.root)
            real = os.path.realpath(self.index_path)
            if not _inside(real_root, real):
                return None  # never read outside the folder, even through MEMORY.md
            with open(real, "rb") as handle:
                return handle.read(MAX_FILE_BYTES)
        except OSError:
            return None

    # -- writing ------------------------------------------------------------------------

    def save_memory(
        self,
        name: str,
        description: str,
        type: MemoryType | str,
        content: str,
        *,
        extra: Mapping[str, Any] | None = None,  # issue 14: extra front matter keys
    ) -> MemoryDoc:
        """Create or update the topic file for ``name`` and its index line.

        The file name is derived from the name (see :func:`safe_file_stem`); a memory
        of the same name is updated in place. An empty name, an unknown type or content
        over 1 MiB raise :class:`MemoryStoreError`.
        """
        name, description, kind = checked_fields(name, description, type)
        text = render_document(
            name=name, description=description, type=kind, body=content, extra=extra
        )
        if len(text.encode("utf-8")) > MAX_FILE_BYTES:
            raise MemoryStoreError(f"memory {name!r} is over 1 MiB; save a shorter one")
        with self._locked():
            docs = self.scan(limit=None)
            existing = next((d for d in docs if d.name == name), None)
            rel = existing.rel_path if existing else self._free_rel_path(name)
            _atomic_write(self.root / rel, text)
            self._rewrite_index(rel, _index_line(name, rel, description))
            return self._doc(rel)

    def forget(self, name_or_rel_path: str) -> MemoryDoc:
        """Remove a memory's topic file and its index line; returns what was removed."""
        with self._locked():
            doc = self.get(name_or_rel_path)
            try:
                os.unlink(self.root / doc.rel_path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise MemoryStoreError(f"cannot remove {doc.path}: {exc.strerror}") from exc
            self._rewrite_index(doc.rel_path, None)
            return doc

    def _free_rel_path(self, name: str) -> str:
        rel = f"{safe_file_stem(name)}.md"
        if (self.root / rel).exists():
            # Another memory owns that file name (``Foo bar`` and ``foo-bar``): disambiguate.
            rel = f"{safe_file_stem(name)}-{_short_hash(name)}.md"
        return rel

    def _doc(self, rel: str) -> MemoryDoc:
        for doc in self.scan(limit=None):
            if doc.rel_path == rel:
                return doc
        raise MemoryStoreError(f"memory file {rel} was written but cannot be read back")

    def _rewrite_index(self, rel: str, line: str | None) -> None:
        """Replace (or drop, when ``line`` is None) the index line linking to ``rel``."""
        raw = self._read_index_bytes()
        lines = raw.decode("utf-8", errors="replace").splitlines() if raw else []
        link = re.compile(r"\]\(" + re.escape(rel) + r"\)")
        out: list[str] = []
        placed = False
        for existing in lines:
            if link.search(existing):
                if line is not None and not placed:
                    out.append(line)
                    placed = True
                continue
            out.append(existing)
        if line is not None and not placed:
            while out and not out[-1].strip():
                out.pop()
            out.append(line)
        _atomic_write(self.index_path, "\n".join(out) + "\n" if out else "")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        from filelock import FileLock, Timeout  # imported here: reading never locks

        self.ensure()
        lock = FileLock(str(self.root / _LOCK_NAME), timeout=_LOCK_TIMEOUT_S)
        try:
            lock.acquire()
        except Timeout as exc:
            raise MemoryStoreError(
                f"memory folder {self.root} is locked by another process "
                f"(waited {_LOCK_TIMEOUT_S:.0f} s for {_LOCK_NAME})"
            ) from exc
        try:
            yield
        finally:
            lock.release()


def _index_line(name: str, rel: str, description: str) -> str:
    title = name.replace("[", "(").replace("]", ")")
    return f"- [{title}]({rel}) — {description}" if description else f"- [{title}]({rel})"


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
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


def cut_index(lines: list[str], *, total_lines: int, total_bytes: int) -> str:
    """The first index lines within 200 lines and 25,000 bytes, with the folder's warning
    line when cut (``total_*``: the whole index's size)."""
    kept = "\n".join(lines[:INDEX_MAX_LINES])
    cut = total_lines > INDEX_MAX_LINES
    if len(kept.encode("utf-8")) > INDEX_MAX_BYTES:
        head = kept.encode("utf-8")[:INDEX_MAX_BYTES].decode("utf-8", errors="ignore")
        kept, cut = head.rsplit("\n", 1)[0] if "\n" in head else head, True
    if not cut:
        return kept
    shown = kept.count("\n") + 1
    return (
        f"{kept}\n\n> WARNING: {INDEX_NAME} is {total_lines} lines and {total_bytes} bytes; "
        f"only the first {shown} lines were loaded (limits: {INDEX_MAX_LINES} lines, "
        f"{INDEX_MAX_BYTES:,} bytes). Keep index entries to one short line and move "
        "detail into topic files."
    )

"""The memory folder: reading documents and the index, saving and forgetting memories.

Layout::

    <memory folder>/
        MEMORY.md            the index: one line per memory, ``- [Title](file.md) — hook``
        some-memory.md       topic files (front matter + body), possibly in sub-folders
        .memory.lock         the lock that serialises writers across processes
    <memory folder>.state/
        history/             every save and forget, before and after (``_history``)

Writes are atomic (a temporary file in the same folder, then ``os.replace``) and every
read-modify-write of the folder holds the ``filelock`` lock, so two processes saving at
once lose nothing. A write may carry a precondition (``expected``: the memory as its
writer read it), checked under the lock; every write is recorded in the history before
it is made, so each one can be undone (:meth:`FolderStore.revert`). Each write also
repairs the index: a topic file it does not list (a crash between the file's replace
and the index's) gets its line back, a line linking to a file that is gone is dropped.
An import saves as one batch (:meth:`FolderStore.save_batch`, ``_batch``): the lock
taken and the folder scanned once, the index written once, each file as a save writes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._atomic import atomic_write
from asyncrecall.memory._document import (
    FrontMatterError,
    checked_fields,
    checked_text,
    front_matter,
    name_in_any_case,
    parse_document,
    render_document,
    safe_file_stem,
)
from asyncrecall.memory._history import (
    FolderHistory,
    HistoryRecord,
    default_state_dir,
    revert_target,
    undo_plan,
)
from asyncrecall.memory._limits import (
    INDEX_NAME,
    MAX_FILE_BYTES,
    SCAN_LIMIT,
    cut_index,
    index_line,
    inside,
)
from asyncrecall.memory._pending import PENDING_KEY, PendingChange, waits, with_pending
from asyncrecall.memory._precondition import ANYTHING, Expected, check_expected
from asyncrecall.memory._provenance import (
    LEGACY_SOURCE,
    PROVENANCE_KEY,
    Source,
    after_write,
    is_quarantined,
    new_source,
    parse_provenance,
    provenance_json,
    same_keys,
)
from asyncrecall.memory._store import LIBRARY_ORIGIN
from asyncrecall.memory._threads import run_off_loop
from asyncrecall.memory._types import MemoryDoc, MemoryType
from asyncrecall.memory.folder._batch import SaveBatch
from asyncrecall.memory.folder._index import (
    INDEX_BYTES,
    edited,
    index_lines,
    index_text,
    link_target,
)
from asyncrecall.memory.folder._scan import Scanner
from asyncrecall.memory.folder._shape import FolderShape

if TYPE_CHECKING:
    from asyncrecall.memory._transfer import MemoryRecord
    from asyncrecall.memory.folder._extraction import ConsolidationGate, FolderBackend

__all__ = ["FolderStore"]

_LOCK_NAME: Final = ".memory.lock"
_LOCK_TIMEOUT_S: Final = 30.0


class FolderStore(FolderShape):
    """One memory folder: the :class:`~asyncrecall.memory.Store` of one person on one
    machine. Cheap to create; nothing is touched until a method is called."""

    #: A warm scan stats files and parses nothing: recall may run it on the event loop.
    inline_scan = True

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser().absolute()
        self._scanner = Scanner(self.root)
        self.history = FolderHistory(default_state_dir(self.root))
        # The folder lock is re-entrant within this store (a consolidation holds it across
        # the writes of one action): the depth counts this thread's nested holds.
        self._thread_lock = threading.RLock()
        self._lock_depth = 0

    def __repr__(self) -> str:
        return f"FolderStore({str(self.root)!r})"

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

    def unparsed_bytes(self) -> int:
        """How many bytes :meth:`warm_scan` would parse now (files changed since the
        folder's persisted index was written); nothing is parsed."""
        return self._scanner.unparsed_bytes()

    def reread_index(self) -> None:
        """Take up the persisted index another process (the command line's reader) has
        just written for this folder."""
        self._scanner.reread_index()

    def get(self, name_or_rel_path: str) -> MemoryDoc:
        """The memory with this relative path or name, or :class:`MemoryStoreError`.

        A key names a memory by its exact relative path, else its exact name, else its
        name in any letter case when only one memory has it; never by anything looser
        (``C# tips`` is not ``C++ tips``, whose file is ``c-tips.md``).
        """
        return find_memory(self.scan(limit=None), name_or_rel_path, where=str(self.root))

    def find(self, name: str) -> MemoryDoc | None:
        """The memory called exactly ``name`` (``None``: there is none)."""
        return next((d for d in self.scan(limit=None) if d.name == name), None)

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
            if not inside(real_root, real):
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
        expected: Expected = ANYTHING,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
        sources: Sequence[Source] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> MemoryDoc:
        """Create or update the topic file for ``name`` and its index line.

        The file name is derived from the name (see :func:`safe_file_stem`); a memory
        of the same name is updated in place. An empty name, an unknown type or content
        over 1 MiB raise :class:`MemoryStoreError`; ``expected`` (the memory as read,
        ``None`` for "must not exist") that no longer holds raises
        :class:`~asyncrecall.MemoryConflictError` and writes nothing. ``origin`` and
        ``write_id`` go into the history record. ``sources`` (default: one source of
        ``origin``, now; untrusted unless ``origin`` names a trusted one, see
        :meth:`Store.save_memory <asyncrecall.memory.Store.save_memory>`) are added to the
        memory's ``provenance`` front matter, whose earlier sources are kept.
        """
        name, description, kind = checked_fields(name, description, type)
        checked_text(f"memory {name!r}", content)
        added = tuple(sources) if sources is not None else (new_source(origin),)
        with self._locked():
            docs = self.scan(limit=None)
            existing = next((d for d in docs if d.name == name), None)
            check_expected(expected, existing, name=name)
            rel, line = self._write_memory(
                name, description, kind, content, existing,
                added=added, extra=extra, origin=origin, write_id=write_id,
            )  # fmt: skip
            self._rewrite_index(rel, line, docs)
            return self._doc(rel)

    def _write_memory(
        self,
        name: str,
        description: str,
        kind: MemoryType,
        content: str,
        existing: MemoryDoc | None,
        *,
        added: tuple[Source, ...],
        extra: Mapping[str, Any] | None,
        origin: str,
        write_id: str,
    ) -> tuple[str, str]:
        """Write the topic file of a save of ``name`` (``existing``: the memory of that
        name now) with its history record, the caller holding the lock and having
        checked the fields; returns its relative path and its index line, which the
        caller puts in the index."""
        rel = existing.rel_path if existing else self._free_rel_path(name)
        before = _read_text(self.root / rel) if existing else None
        kept = _provenance(before) if before is not None else ()
        plain = {k: v for k, v in (extra or {}).items() if k != PROVENANCE_KEY}
        unchanged = before is not None and _content(before) == render_document(
            name=name, description=description, type=kind, body=content, extra=plain
        )
        if before is not None and not unchanged and waits(kept, added):
            # An untrusted change to a memory recall uses waits beside it (_pending).
            change = PendingChange(description, kind, content, added)
            text = with_pending(before, change)
            self.history.append(
                name, "save", path=rel, before=before, after=text,
                origin=origin, write_id=write_id,
            )  # fmt: skip
            atomic_write(self.root / rel, text)
            assert existing is not None  # before is its text
            return rel, index_line(name, rel, existing.description)
        if unchanged:
            # The memory already says this: an untrusted write adds nothing to it,
            # and a write is made only for a new kind of source (a merge's) or the
            # user's word lifting a hold.
            added = added if added and added[-1].trusted else ()
            new = after_write(kept, added)
            if same_keys(new, kept) and is_quarantined(new) == is_quarantined(kept):
                added, kept = (), ()
        merged = after_write(kept, added)
        extra = {**plain, PROVENANCE_KEY: provenance_json(merged)} if merged else plain
        text = render_document(
            name=name, description=description, type=kind, body=content, extra=extra
        )
        if not merged:
            text = before or text
        if len(text.encode("utf-8")) > MAX_FILE_BYTES:
            raise MemoryStoreError(f"memory {name!r} is over 1 MiB; save a shorter one")
        if before != text:
            self.history.append(
                name, "save", path=rel, before=before, after=text,
                origin=origin, write_id=write_id,
            )  # fmt: skip
            atomic_write(self.root / rel, text)
        return rel, index_line(name, rel, description)

    def forget(
        self,
        name_or_rel_path: str,
        *,
        expected: Expected = ANYTHING,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
    ) -> MemoryDoc:
        """Remove a memory's topic file and its index line; returns what was removed.

        ``name_or_rel_path`` as :meth:`get` takes it; ``expected`` as for
        :meth:`save_memory`. The removed text stays in the history.
        """
        with self._locked():
            docs = self.scan(limit=None)
            doc = find_memory(docs, name_or_rel_path, where=str(self.root))
            check_expected(expected, doc, name=doc.name)
            self.history.append(
                doc.name, "forget", path=doc.rel_path,
                before=_read_text(doc.path), after=None, origin=origin, write_id=write_id,
            )  # fmt: skip
            try:
                os.unlink(self.root / doc.rel_path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise MemoryStoreError(f"cannot remove {doc.path}: {exc.strerror}") from exc
            self._rewrite_index(doc.rel_path, None, docs)
            return doc

    def quarantined_paths(self) -> set[str]:
        """The relative paths of the quarantined memories (see ``_provenance``); a new
        process reads them from the folder's record while it holds (``_held``)."""
        return self._scanner.quarantined()

    def confirm(self, name_or_rel_path: str) -> MemoryDoc:
        """The user's word for a memory: a ``confirmed`` source is added to its
        provenance, which lifts a quarantine; its text and other keys are kept. A change
        waiting beside it (``_pending``) is applied, with that change's sources."""
        with self._locked():
            doc = self.get(name_or_rel_path)
            text = _read_text(doc.path) or ""
            keys = front_matter(text)
            extra = {
                k: v
                for k, v in keys.items()
                if k not in ("name", "description", "type", PROVENANCE_KEY, PENDING_KEY)
            }
            change = PendingChange.from_json(keys.get(PENDING_KEY))
            if change is not None:  # the waiting change is applied, with its sources
                return self.save_memory(
                    doc.name, change.description, change.type, change.body, extra=extra,
                    expected=doc, origin="confirmed",
                    sources=(*change.sources, Source.now("confirmed")),
                )  # fmt: skip
            return self.save_memory(
                doc.name, doc.description, doc.type, doc.body, extra=extra,
                expected=doc, origin="confirmed", sources=(Source.now("confirmed"),),
            )  # fmt: skip

    def pending_of(self, doc: MemoryDoc) -> PendingChange | None:
        """The untrusted change waiting beside ``doc`` for ``memory confirm`` (``_pending``),
        or ``None``."""
        text = _read_text(doc.path)
        return PendingChange.from_json(front_matter(text).get(PENDING_KEY)) if text else None

    def pending_names(self) -> set[str]:
        """The names of the memories with a change waiting beside them."""
        return {doc.name for doc in self.scan(limit=None) if self.pending_of(doc) is not None}

    def provenance_of(self, doc: MemoryDoc) -> tuple[Source, ...]:
        """Where ``doc``'s writes came from (its ``provenance`` front matter; a file
        without one is the user's own)."""
        text = _read_text(doc.path)
        return _provenance(text) if text is not None else (LEGACY_SOURCE,)

    def history_of(self, name_or_rel_path: str) -> list[HistoryRecord]:
        """Every recorded write of a memory, oldest first: by an existing memory's key (as
        :meth:`get`), or by the exact name of one that is gone."""
        return self.history.records(self._history_name(name_or_rel_path))

    def revert(
        self, name_or_rel_path: str, *, to: int | None = None, origin: str = "user"
    ) -> MemoryDoc | None:
        """Undo writes of one memory: back to what record ``to`` wrote, or (``to`` None) to
        what the newest record replaced. Returns the memory as it now is (``None``: the
        revert removed it). The revert is itself a recorded write, so it can be undone."""
        with self._locked():
            name = self._history_name(name_or_rel_path)
            target = revert_target(self.history.records(name), name, to)
            text = target.before if to is None else target.after
            with self.save_batch() as batch:  # a batch of one: the same restore as an undo's
                return batch.restore(name, text, target.path, origin=origin, write_id="")

    def revert_write(self, write_id: str, *, origin: str = "user") -> dict[str, MemoryDoc | None]:
        """Undo every record of one write (a consolidation, an import: ``write_id``) as one
        step: each memory it wrote back to what it was before (see
        :func:`~asyncrecall.memory._history.undo_plan`, which refuses, writing nothing,
        when one was written since). The undo is itself one write, ``undo:<write_id>``,
        made as one batch (:meth:`save_batch`: one scan, one index write)."""
        with self._locked():
            plan = undo_plan(write_id, self.history.touched_by(write_id))
            paths = {n: self.history.records(n)[-1].path for n in plan}
            with self.save_batch() as batch:  # one scan, one index write (``_batch``)
                return {
                    name: batch.restore(
                        name, text, paths[name], origin=origin, write_id=f"undo:{write_id}"
                    )
                    for name, text in plan.items()
                }

    def recent_writes(self, *, limit: int = 50) -> list[HistoryRecord]:
        """The newest ``limit`` records of every memory, newest first."""
        return self.history.every_record()[::-1][:limit]

    def _history_name(self, key: str) -> str:
        try:
            return self.get(key).name
        except MemoryStoreError:
            return " ".join(key.split())

    # -- export and import (``memory export``/``import``) ------------------------------

    def export_records(self) -> list[MemoryRecord]:
        """Every memory with its provenance, times and other keys, in the index's order."""
        from asyncrecall.memory.folder._transfer import export_records

        return export_records(self)

    def import_record(
        self, record: MemoryRecord, *, trusted: bool = True, write_id: str = "", as_is: bool = False
    ) -> MemoryDoc:
        """Save ``record`` (created or replaced) with all it carries."""
        from asyncrecall.memory.folder._transfer import import_record

        return import_record(self, record, trusted=trusted, write_id=write_id, as_is=as_is)

    def import_records(
        self,
        records: Sequence[MemoryRecord],
        *,
        trusted: bool = True,
        write_id: str = "",
        as_is: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[MemoryDoc]:
        """Save every record as :meth:`import_record` does, in one :meth:`save_batch`."""
        from asyncrecall.memory.folder._transfer import import_records

        return import_records(
            self, records, trusted=trusted, write_id=write_id, as_is=as_is, progress=progress
        )

    @contextlib.contextmanager
    def save_batch(self) -> Iterator[SaveBatch]:
        """Several saves under one hold of the folder lock (see :class:`~._batch.SaveBatch`):
        the index is written when the block ends, however it ends."""
        with self._locked():
            batch = SaveBatch(self, self.scan(limit=None))
            try:
                yield batch
            finally:
                batch.close()

    # -- where extraction and consolidation keep their state -----------------------------

    def extraction_backend(self, *, state_dir: Path | None = None) -> FolderBackend:
        """Extraction's view of this folder: provenance in the front matter, cursors and
        journals in ``state_dir`` (default ``<folder>.state/``)."""
        from asyncrecall.memory.folder._extraction import FolderBackend

        return FolderBackend(self, state_dir=state_dir)

    def consolidation_gate(self, **kwargs: Any) -> ConsolidationGate:
        """When an automatic consolidation of this folder is due, and its file lock
        (``kwargs``: ``min_hours``, ``min_sessions``, ``clock``)."""
        from asyncrecall.memory.folder._extraction import ConsolidationGate

        return ConsolidationGate.for_store(self, **kwargs)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder lock across several writes (re-entrant in this store): a
        consolidation checks and applies one action under it."""
        with self._locked():
            yield

    def repair_index(self) -> bool:
        """Give every topic file its index line and drop lines to files that are gone;
        True when the index changed. Looks first without the lock: a sound index (the
        common case) costs a scan and a read, and a missing folder is left missing."""
        if not self.root.is_dir() or self._index_sound(self.scan(limit=None)):
            return False
        with self._locked():
            before = self._read_index_bytes()
            self._rewrite_index(None, None, self.scan(limit=None))
            return self._read_index_bytes() != before

    def _index_sound(self, docs: Sequence[MemoryDoc]) -> bool:
        raw = self._read_index_bytes()
        lines = index_lines(raw)
        linked = {t for t in map(link_target, lines) if t is not None}
        return all(self._exists(t) for t in linked) and all(d.rel_path in linked for d in docs)

    def _free_rel_path(self, name: str) -> str:
        rel = f"{safe_file_stem(name)}.md"
        if (self.root / rel).exists():
            # Another memory owns that file name (``Foo bar`` and ``foo-bar``): disambiguate.
            rel = f"{safe_file_stem(name)}-{_short_hash(name)}.md"
        return rel

    def _doc(self, rel: str) -> MemoryDoc:
        """The memory in the topic file ``rel`` just written (only that file is read)."""
        doc = self._scanner.read_one(rel)
        if doc is None:
            raise MemoryStoreError(f"memory file {rel} was written but cannot be read back")
        return doc

    def _rewrite_index(
        self,
        rel: str | None,
        line: str | None,
        docs: Sequence[MemoryDoc],
        *,
        lines: Sequence[str] | None = None,
    ) -> list[str]:
        """Replace (or drop, when ``line`` is None) the index line linking to ``rel``, and
        repair the rest (see :func:`~._index.edited`): ``docs`` (the folder's memories)
        each keep a line, and a line linking to a topic file that does not exist is
        dropped. ``lines``: edit these instead of the file's (a batch's draft). Returns
        the lines written."""
        raw = self._read_index_bytes()
        if lines is None:
            lines = index_lines(raw)
        present = self._top_level_files()
        out = edited(lines, rel, line, docs, lambda t: t in present or self._exists(t))
        text = index_text(out)
        if raw is None or raw.decode("utf-8", errors=INDEX_BYTES) != text:
            atomic_write(self.index_path, text, errors=INDEX_BYTES)
        return out

    def _unwritable(self, exc: OSError) -> MemoryStoreError:
        """The one-line error of a write the folder refused (read-only, full, ...)."""
        where = f" ({exc.filename})" if exc.filename else ""
        reason = exc.strerror or str(exc)
        return MemoryStoreError(f"cannot write in memory folder {self.root}: {reason}{where}")

    def _top_level_files(self) -> frozenset[str]:
        """The names of the files directly in the folder (one listing; a file in a
        sub-folder is looked up by :meth:`_exists`)."""
        try:
            with os.scandir(self.root) as entries:
                return frozenset(e.name for e in entries if e.is_file())
        except OSError:
            return frozenset()

    def _exists(self, rel: str) -> bool:
        try:
            return os.path.isfile(self.root / rel)
        except (OSError, ValueError):
            return True  # cannot tell: keep the line

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            if self._lock_depth:
                self._lock_depth += 1
                try:
                    yield
                finally:
                    self._lock_depth -= 1
                return
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
            except OSError as exc:
                raise self._unwritable(exc) from exc
            self._lock_depth = 1
            try:
                yield
                self._scanner.record_quarantined()  # still under the lock (``_held``)
            except OSError as exc:  # every write is atomic: what was there still is
                raise self._unwritable(exc) from exc
            finally:
                self._lock_depth = 0
                lock.release()


def find_memory(docs: Sequence[MemoryDoc], key: str, *, where: str) -> MemoryDoc:
    """The memory ``key`` names among ``docs`` (see :meth:`FolderStore.get`), or
    :class:`MemoryStoreError` saying there is none, or which ones a loose key fits."""
    key = key.strip()
    found = next((d for d in docs if d.rel_path == key), None)
    if found is None:
        found = next((d for d in docs if d.name == key), None)
    if found is not None:
        return found
    name = name_in_any_case(key, (d.name for d in docs), where=where)
    if name is None:
        raise MemoryStoreError(f"no memory named {key!r} in {where}")
    return next(d for d in docs if d.name == name)


def _content(text: str) -> str | None:
    """A topic file's text as :func:`render_document` writes it, without its provenance
    (``None``: it does not parse)."""
    try:
        parsed = parse_document(text, default_name="")
    except FrontMatterError:
        return None
    fields = front_matter(text)
    extra = {
        k: v for k, v in fields.items() if k not in ("name", "description", "type", PROVENANCE_KEY)
    }
    return render_document(
        name=parsed.name, description=parsed.description, type=parsed.type,
        body=parsed.body, extra=extra,
    )  # fmt: skip


def _provenance(text: str) -> tuple[Source, ...]:
    """The sources a topic file's text records; a file without any is the user's own."""
    return parse_provenance(front_matter(text).get(PROVENANCE_KEY)) or (LEGACY_SOURCE,)


def _read_text(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.read()
    except OSError:
        return None


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]


def __getattr__(name: str) -> Any:
    """``MemoryStore``: the old name of :class:`FolderStore`, kept for one release."""
    if name == "MemoryStore":
        import warnings

        warnings.warn(
            "MemoryStore is deprecated: use asyncrecall.memory.FolderStore",
            DeprecationWarning,
            stacklevel=2,
        )
        return FolderStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

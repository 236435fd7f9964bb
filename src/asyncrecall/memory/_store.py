"""The store interface: :class:`Store`, what every caller may ask of a memory store.

Two stores implement it:

- :class:`~asyncrecall.memory.FolderStore`, the memory folder (one person, one machine);
- :class:`~asyncrecall.memory.PostgresStore`, a table in PostgreSQL shared by any number
  of worker processes (``--store postgresql://...``).

:class:`Store` is an abstract base class, not a structural protocol, so that conformance
is checked where it matters: a store that leaves out an operation cannot be
instantiated (the abstract methods say which), ``isinstance(x, Store)`` means the class
declared it implements the contract (not that it happens to have a ``scan``), and the
defaults that are the same for every store (``with``/``async with``, :meth:`count`,
:meth:`warm_scan`) live here once. Every operation a caller (recall, the agent, the
MCP server, the CLI, extraction, export and import) uses is declared here; nothing is
found by ``getattr`` or signature probing. An operation only one store has is either
given a documented default here (:meth:`scan_cached`, :meth:`close`, :attr:`namespace`)
or expressed as a typed capability (:attr:`changes`: a :class:`ChangeWatch` or
``None``).

Reading and writing are synchronous (the CLI, the agent's memory tool and extraction's
worker threads call them); :meth:`Store.candidates` is the one coroutine: what recall
offers a selector for a query, run inside the recall task, which the turn never awaits.

Also here, because the store hands them out: :class:`ExtractionBackend` (extraction's and
consolidation's view of a store) and :class:`Gate` (when an automatic consolidation is
due), each implemented by a store's own wing.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, Self

from asyncrecall import _telemetry
from asyncrecall.memory._limits import SCAN_LIMIT
from asyncrecall.memory._precondition import ANYTHING, Expected
from asyncrecall.memory._provenance import Source
from asyncrecall.memory._types import MemoryDoc, MemoryType

if TYPE_CHECKING:
    from asyncrecall.memory._history import HistoryRecord
    from asyncrecall.memory._journal import Journal
    from asyncrecall.memory._pending import PendingChange
    from asyncrecall.memory._provenance import SourceOffsets

__all__ = [
    "LIBRARY_ORIGIN",
    "ChangeWatch",
    "ExtractionBackend",
    "Gate",
    "MemoryRecord",
    "Store",
    "StoreChange",
]

#: The origin of a write that did not say where its text came from (an application
#: calling :meth:`Store.save_memory` with no ``origin``): untrusted, so the memory is
#: held until the user confirms it. A caller that knows the text is the user's own
#: passes ``origin="user"``.
LIBRARY_ORIGIN: Final = "library"


@dataclass(frozen=True, slots=True)
class StoreChange:
    """A change seen by a store: a ``save`` or ``forget`` (by any process), or a
    ``reconnect`` of its feed (changes may have been missed).

    ``memory_id`` is what a notification carries instead of the memory's name
    (:meth:`ChangeWatch.memory_id`; "" for a reconnect); ``name`` is known only for this
    store's own writes (``None`` for another process's)."""

    op: str
    memory_id: str
    version: int
    seen_at: float
    name: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory and what it carries beyond its :class:`MemoryDoc`: what export and import
    copy (``_transfer``)."""

    doc: MemoryDoc
    #: POSIX time it was created; ``None`` when the store does not know.
    created_at: float | None = None
    #: Provenance, ``{session id: (offsets...)}``.
    source_offsets: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: Front matter keys beyond name, description, type, provenance and creation time.
    front_matter: Mapping[str, Any] = field(default_factory=dict)
    #: Where its writes came from (``()``: no provenance, the user's own).
    provenance: tuple[Source, ...] = ()


class ChangeWatch(Protocol):
    """A store's change feed (:attr:`Store.changes`): every write by any process, as it
    commits. A capability: a store shared by processes has one (PostgreSQL's
    ``LISTEN``/``NOTIFY``); a folder has none."""

    @property
    def generation(self) -> int:
        """Bumped by every change seen (any process) and every reconnect of the feed."""
        ...

    def add_change_listener(self, callback: Callable[[StoreChange], None]) -> Callable[[], None]:
        """Call ``callback`` on each change seen (on the feed's thread, or on the writer's
        for this store's own writes: keep it short, never call the store from it);
        returns a function that removes it."""
        ...

    def memory_id(self, name: str) -> str:
        """What the changes about the memory ``name`` carry instead of its name
        (:attr:`StoreChange.memory_id`)."""
        ...


class Store(ABC):
    """A place memories live: listed, read, saved under a precondition with their
    provenance, held until the user confirms them, forgotten, undone from their history,
    exported and imported, and offered to recall.

    **Keys.** A memory is named by its ``name`` (unique in the store) and has a relative
    path (``rel_path``, what selectors and manifests speak). :meth:`get` and
    :meth:`forget` take either: the exact relative path, else the exact name, else the
    name in another letter case when only one memory has it; never anything looser.

    **Writes** are atomic (a reader sees the memory before or after, never a mix) and
    each is recorded in the history before it is made, so each can be undone
    (:meth:`revert`). A write may carry a precondition, ``expected``: the
    :class:`MemoryDoc` as its writer read it from this store (the memory must still say
    exactly that), ``None`` (it must not exist), or :data:`ANYTHING` (no
    precondition); one that no longer holds raises :class:`~asyncrecall.MemoryConflictError`
    and writes nothing. Of two writers expecting one version, at most one writes.

    **Provenance and holds.** Every write adds a :class:`Source` (where its text came
    from) to the memory's provenance. A memory with an untrusted source that no
    lifting source followed is *held* (``MemoryDoc.quarantined``): stored and listed,
    but recall leaves it out, and so does the system prompt's index
    (:meth:`quarantined_paths` says which); only the user lifts a hold (:meth:`confirm`, or a later
    write whose source is ``attested``). An untrusted change to a memory recall uses
    does not replace it: it waits beside it (:meth:`pending_of`) until confirmed. A
    write without an explicit origin is untrusted (:data:`LIBRARY_ORIGIN`).

    **Errors.** A missing memory, an invalid name or type, content over 1 MiB, or a
    store that cannot be written raise :class:`~asyncrecall.MemoryStoreError` (one
    line); recall's reads (:meth:`candidates`, :meth:`index_for_prompt`,
    :meth:`quarantined_paths`) never raise for an unreachable store: they log a
    warning and answer empty.

    **Life cycle.** Cheap to create; :meth:`close` (or ``with``, ``async with``,
    :meth:`aclose`) releases what it holds and is idempotent.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each of :data:`TRACED_OPERATIONS` a store class defines is traced and timed
        while OpenTelemetry is on (``asyncrecall.store.<operation>`` spans, the
        ``asyncrecall.store.operation.duration`` histogram; see ``_telemetry``); off, the
        cost is one check a call."""
        super().__init_subclass__(**kwargs)
        for name in TRACED_OPERATIONS:
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "__isabstractmethod__", False):
                setattr(cls, name, _traced(name, method))

    #: Whether :meth:`scan` may run on the event loop (no network round trip): recall
    #: then takes :meth:`scan_cached`'s answer in its own step when there is one, and
    #: calls :meth:`candidates` otherwise.
    inline_scan: ClassVar[bool] = False

    # -- where --------------------------------------------------------------------------

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the memories are, for messages: a folder, or a database and namespace."""

    @property
    def namespace(self) -> str | None:
        """The namespace of a store shared by tenants (``None``: the store has one, as a
        folder has)."""
        return None

    @property
    def changes(self) -> ChangeWatch | None:
        """The store's change feed (every write by any process), or ``None`` for a store
        without one (a folder: its scans see every change by themselves)."""
        return None

    @abstractmethod
    def ensure(self) -> Path | str:
        """Make the store ready for writes (create the folder and its index, or connect
        and create the schema); returns where it is."""

    # -- reading ------------------------------------------------------------------------

    @abstractmethod
    def scan(self, *, limit: int | None = SCAN_LIMIT) -> list[MemoryDoc]:
        """The memories, newest first (by modification time), at most ``limit``
        (``None``: all). Held memories are listed too (``MemoryDoc.quarantined``)."""

    def scan_cached(
        self, *, limit: int | None = SCAN_LIMIT, budget_bytes: int = 0
    ) -> list[MemoryDoc] | None:
        """:meth:`scan`'s answer if it needs no reading beyond ``budget_bytes`` (0: none
        at all), else ``None``. Default: ``None`` (a store whose scan is a round trip
        never answers without one)."""
        return None

    def warm_scan(self) -> list[MemoryDoc]:
        """:meth:`scan` for warm-up paths (a folder starts from its persisted parses and
        writes them back). Default: :meth:`scan`."""
        return self.scan()

    def count(self) -> int:
        """How many memories the store holds. Default: the length of a full :meth:`scan`."""
        return len(self.scan(limit=None))

    @abstractmethod
    def get(self, name_or_rel_path: str) -> MemoryDoc:
        """The memory this key names (see the class's keys), or
        :class:`~asyncrecall.MemoryStoreError` saying there is none, or which ones a
        loose key fits."""

    @abstractmethod
    def find(self, name: str) -> MemoryDoc | None:
        """The memory called exactly ``name`` (``None``: there is none)."""

    @abstractmethod
    def index_for_prompt(self) -> str:
        """The index (``MEMORY.md`` or its equivalent: one line per memory) for the
        system prompt, cut at 200 lines or 25,000 bytes with a warning line. Held
        memories' lines are the caller's to leave out (:meth:`quarantined_paths`). An
        unreachable store reads as ""."""

    @abstractmethod
    async def candidates(self, query: str, *, exclude: Collection[str] = ()) -> list[MemoryDoc]:
        """The memories recall offers a selector for ``query`` (``exclude``: paths to
        leave out if the store can; recall filters them again). Never raises for an
        unreachable store: it logs a warning and returns no candidates."""

    # -- writing ------------------------------------------------------------------------

    @abstractmethod
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
        """Create or update the memory called ``name``; returns it as stored.

        A memory of the same name is updated in place (its relative path kept); an
        empty name, an unknown type or content over 1 MiB raise
        :class:`~asyncrecall.MemoryStoreError` and write nothing; ``expected`` as in the
        class's writes. ``origin`` and ``write_id`` go into the history record.
        ``sources`` (default: one source of ``origin``, now) are added to the memory's
        provenance, whose earlier sources are kept. **The default origin is untrusted**
        (:data:`LIBRARY_ORIGIN`): the memory is held, or its change waits beside a
        memory recall uses, until the user confirms it; pass ``origin="user"`` for the
        user's own words. ``extra``: front matter keys beyond name, description and
        type, kept with the memory.
        """

    @abstractmethod
    def forget(
        self,
        name_or_rel_path: str,
        *,
        expected: Expected = ANYTHING,
        origin: str = LIBRARY_ORIGIN,
        write_id: str = "",
    ) -> MemoryDoc:
        """Remove the memory this key names (see the class's keys); returns what was
        removed, whose text stays in the history. ``expected`` as in the class's
        writes; no such memory (or an ambiguous key) is a
        :class:`~asyncrecall.MemoryStoreError` and nothing is removed."""

    # -- provenance and holds -----------------------------------------------------------

    @abstractmethod
    def provenance_of(self, doc: MemoryDoc) -> tuple[Source, ...]:
        """Where ``doc``'s writes came from, in write order (a memory without any
        recorded is the user's own)."""

    @abstractmethod
    def quarantined_paths(self) -> set[str]:
        """The relative paths of the held memories (none while the store is
        unreachable)."""

    @abstractmethod
    def confirm(self, name_or_rel_path: str) -> MemoryDoc:
        """The user's word for a memory: a ``confirmed`` source is added to its
        provenance, which lifts a hold; its text and other keys are kept. A change
        waiting beside it is applied, with that change's sources. Only the user's
        command calls it: nothing else lifts a hold."""

    @abstractmethod
    def pending_of(self, doc: MemoryDoc) -> PendingChange | None:
        """The untrusted change waiting beside ``doc`` for :meth:`confirm`, or ``None``."""

    @abstractmethod
    def pending_names(self) -> set[str]:
        """The names of the memories with a change waiting beside them."""

    # -- history ------------------------------------------------------------------------

    @abstractmethod
    def history_of(self, name_or_rel_path: str) -> list[HistoryRecord]:
        """Every recorded write of a memory, oldest first: by an existing memory's key,
        or by the exact name of one that is gone."""

    @abstractmethod
    def revert(
        self, name_or_rel_path: str, *, to: int | None = None, origin: str = "user"
    ) -> MemoryDoc | None:
        """Undo writes of one memory: back to what record ``to`` wrote, or (``to``
        ``None``) to what the newest record replaced. Returns the memory as it now is
        (``None``: the revert removed it). The revert is itself a recorded write."""

    @abstractmethod
    def revert_write(self, write_id: str, *, origin: str = "user") -> dict[str, MemoryDoc | None]:
        """Undo every record of one write (a consolidation, an import: ``write_id``) as
        one step, refusing (writing nothing) when a memory it wrote was written since;
        each memory as it now is. The undo is itself one write, ``undo:<write_id>``."""

    @abstractmethod
    def recent_writes(self, *, limit: int = 50) -> list[HistoryRecord]:
        """The newest ``limit`` records of every memory, newest first."""

    # -- export and import --------------------------------------------------------------

    @abstractmethod
    def export_records(self) -> list[MemoryRecord]:
        """Every memory with its provenance, times and other keys, in the index's order."""

    @abstractmethod
    def import_record(
        self, record: MemoryRecord, *, trusted: bool = True, write_id: str = "", as_is: bool = False
    ) -> MemoryDoc:
        """Save ``record`` (created or replaced) with all it carries; ``trusted`` false:
        held until confirmed (a copy never lifts a hold either); ``write_id`` goes into
        the history; ``as_is`` (an export): no ``import`` source added."""

    def import_records(
        self,
        records: Sequence[MemoryRecord],
        *,
        trusted: bool = True,
        write_id: str = "",
        as_is: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[MemoryDoc]:
        """Save every record, in order, as :meth:`import_record` saves one, as one batch
        (what ``memory import`` and ``export`` call): the store ends as the saves one by
        one would leave it, and the batch's cost grows with the number of records, not
        with their square (a folder is scanned once, its index written once).
        ``progress(done, total)`` is called after each save. A failure stops the batch:
        the records saved before it stay saved, and listed; returns the copies.

        This default saves them one by one (the database store keeps it: each save is
        keyed by its name, none reads the whole namespace); a store whose single save
        reads the whole of it overrides it, as the folder store does."""
        saved: list[MemoryDoc] = []
        for record in records:
            saved.append(
                self.import_record(record, trusted=trusted, write_id=write_id, as_is=as_is)
            )
            if progress is not None:
                progress(len(saved), len(records))
        return saved

    # -- extraction's state -------------------------------------------------------------

    @abstractmethod
    def extraction_backend(self, *, state_dir: Path | None = None) -> ExtractionBackend:
        """Extraction's view of this store: provenance, cursors and journals where the
        memories live (``state_dir``: a folder's state folder instead of
        ``<folder>.state/``; ignored by a store without one)."""

    @abstractmethod
    def consolidation_gate(self, **kwargs: Any) -> Gate:
        """When an automatic consolidation of this store is due, and its lock
        (``kwargs``: ``min_hours``, ``min_sessions``, ``clock``)."""

    # -- life cycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Release what the store holds (connections, threads); idempotent. Default:
        nothing to release."""
        return None

    async def aclose(self) -> None:
        """:meth:`close` from a coroutine, in a worker thread (a store's close may wait
        for its own threads)."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


#: The store operations traced and timed while OpenTelemetry is on.
TRACED_OPERATIONS: Final = (
    "scan", "get", "candidates", "save_memory", "forget", "confirm", "revert",
    "revert_write", "import_record", "import_records", "export_records",
)  # fmt: skip

#: The store operation running in this context: one inside another (a store's own
#: call of its public operations) is not traced or counted twice.
_IN_OPERATION: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "asyncrecall_store_operation", default=False
)


def _traced(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` with a span and a duration while OpenTelemetry is on."""
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def traced_async(self: Store, *args: Any, **kwargs: Any) -> Any:
            telemetry = _telemetry.current()
            if telemetry is None or _IN_OPERATION.get():
                return await method(self, *args, **kwargs)
            token = _IN_OPERATION.set(True)
            try:
                with telemetry.store_operation(name, self):
                    return await method(self, *args, **kwargs)
            finally:
                _IN_OPERATION.reset(token)

        return traced_async

    @functools.wraps(method)
    def traced(self: Store, *args: Any, **kwargs: Any) -> Any:
        telemetry = _telemetry.current()
        if telemetry is None or _IN_OPERATION.get():
            return method(self, *args, **kwargs)
        token = _IN_OPERATION.set(True)
        try:
            with telemetry.store_operation(name, self):
                result = method(self, *args, **kwargs)
            telemetry.stored(name, result)
            return result
        finally:
            _IN_OPERATION.reset(token)

    return traced


class ExtractionBackend(Protocol):
    """What extraction and consolidation need of a store (all synchronous: the callers
    run them in worker threads); a store hands out its own
    (:meth:`Store.extraction_backend`)."""

    @property
    def store(self) -> Store:
        """The store the memories are written to."""
        ...

    @property
    def files_root(self) -> Path | None:
        """The memory folder when memories are files (proposed paths are then checked
        against links too); ``None`` for a database, where the names' rules suffice."""
        ...

    @property
    def state_dir(self) -> Path | None:
        """The folder extraction's state is kept in (``None``: the store's own tables)."""
        ...

    @property
    def key(self) -> str:
        """One string per memory place (folder, or database and namespace): single flight."""
        ...

    def cursor(self, session_id: str) -> int:
        """The session's processed offset (0 when it never extracted)."""
        ...

    def journal(self, session_id: str) -> Journal | None:
        """The pending journal a crashed extraction of this session left, or ``None``."""
        ...

    def stale_journals(self, older_than: float) -> list[tuple[Journal, float]]:
        """Journals written over ``older_than`` seconds ago (their writers died: a live
        one commits within milliseconds), with when each was written (epoch seconds)."""
        ...

    def write_journal(self, journal: Journal) -> None:
        """Persist ``journal`` (atomically) before any of its writes."""
        ...

    def commit(self, journal: Journal) -> None:
        """Move the cursor to ``journal.end`` and drop the journal (never backwards)."""
        ...

    def end_session(self, session_id: str) -> bool:
        """The session will never extract again (its process ended and what it owed is
        extracted): drop its cursor, unless a journal of it still waits to be rolled
        forward. Returns whether it was dropped (or there was none)."""
        ...

    def get(self, name: str) -> MemoryDoc | None:
        """The memory called exactly ``name``, as it is now (``None``: there is none)."""
        ...

    def save(
        self,
        name: str,
        description: str,
        type: str,
        content: str,
        source_offsets: SourceOffsets | None,
        *,
        expected: Expected = ANYTHING,
        origin: str = "extraction",
        write_id: str = "",
        sources: Sequence[Source] | None = None,
    ) -> MemoryDoc:
        """Create or update the memory ``name`` with its provenance (idempotent);
        ``sources`` are added to its ``provenance`` (see ``_provenance``).

        ``expected`` is the memory as the writer read it (``None``: absent); when it no
        longer holds, :class:`~asyncrecall.MemoryConflictError` and nothing written."""
        ...

    def forget(
        self,
        name_or_rel_path: str,
        *,
        expected: Expected = ANYTHING,
        origin: str = "extraction",
        write_id: str = "",
    ) -> MemoryDoc:
        """Remove a memory (and its provenance), under the same precondition as :meth:`save`;
        ``write_id`` goes into the history record."""
        ...

    def provenance(self, doc: MemoryDoc) -> tuple[Source, ...]:
        """Where ``doc``'s writes came from (``_provenance``)."""
        ...

    def locked(self) -> AbstractContextManager[None]:
        """Hold the store's write lock across several writes where it has one (a folder); a
        database's writes are each one transaction, and this holds nothing."""
        ...

    def last_seq(self, name: str) -> int:
        """The number of ``name``'s newest history record (0: never written)."""
        ...

    def history_after(self, name: str, seq: int) -> list[HistoryRecord]:
        """``name``'s history records numbered above ``seq``, oldest first."""
        ...

    def source_offsets(self, doc: MemoryDoc) -> dict[str, tuple[int, ...]]:
        """A memory's provenance (``{}`` when it has none)."""
        ...

    def trim_index(self) -> bool:
        """Keep the index within its limits; True when it was cut."""
        ...

    def repair_index(self) -> bool:
        """List every memory in the index, drop lines to memories that are gone (a crash
        between a memory's write and its index line's); True when it changed."""
        ...


class Gate(Protocol):
    """When an automatic consolidation is due, and its lock (a folder's or a database's);
    a store hands out its own (:meth:`Store.consolidation_gate`)."""

    def note_session(self) -> None: ...

    def due(self) -> bool: ...

    def acquire(self) -> bool: ...

    def release(self, *, completed: bool) -> None: ...

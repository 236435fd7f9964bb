"""What this process has in flight on each endpoint, so that the main turn wins.

Some servers run one request at a time and, when a second request arrives while a
streamed answer runs, end that stream early: llama-cpp-python's server with its default
``interrupt_requests`` ends it with ``[DONE]`` and no finish reason. Our own side
queries (the recall's, extraction's) are such second requests. So, per endpoint (base
URL) and per process:

* every side query (:meth:`Traffic.side_request`) is registered while it is in flight,
  and every streamed main turn (:meth:`Traffic.main_stream`) while it streams;
* a main stream that ends without a finish reason (:meth:`Traffic.cut`) after a side
  query of ours was in flight during it (still out, or already answered: the server
  serves it before we read the cut) makes those still out **give way** (they are
  cancelled and raise :class:`SideRequestYielded`), marks the endpoint as one that
  interrupts, and tells the caller, who sends the main request again (the agent);
* on an endpoint that has shown it interrupts, a *background* side query (made inside
  :func:`background_requests`: extraction) never overlaps a main turn: it waits until
  no main stream runs before it is sent, and gives way as soon as one starts;
* across processes of this user, through file locks (``flock``; see
  :mod:`asyncrecall._platform` for Windows) on two marker files per endpoint
  (in the temporary folder), made only by a process that did
  :func:`enable_cross_process` (the extraction worker): a main stream holds a shared
  lock on the ``main`` marker while it runs (when the file exists), such a process's
  background side query one on the ``background`` marker while it is out. A main
  stream cut while another process of ours has a background query out (the detached
  extraction worker of an earlier command) counts that one as ours and is sent again;
  so does one that was out during the stream and is gone by the cut (it leaves a
  fourth file, ``overlap-…``, touched before it lets go of its marker);
  and on an endpoint that interrupts, a background query waits while any process of
  ours streams a main turn there, and gives way when one starts (looked at every
  :data:`POLL_S` while it is out);
* what one process learned is known to the next: an endpoint seen to interrupt leaves
  a third file, ``interrupts-…``, beside the markers (written by a worker, or by any
  process once a worker made the folder), and every process starts knowing it. A
  command that saw no cut itself still hands a careful worker off: without it, that
  worker's query would cut the next command's main turn.

Nothing here knows what a side query is for; the agent decides what is background.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import os
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Final

from asyncrecall import _platform
from asyncrecall._exceptions import ModelError, ModelProtocolError

__all__ = [
    "ModelStreamCut",
    "SideRequestYielded",
    "Traffic",
    "background_requests",
    "enable_cross_process",
    "forget_traffic",
    "traffic",
]

_GIVE_WAY: Final = "asyncrecall: side query gave way to the main turn"
#: Seconds between two looks at other processes' main streams (background queries only).
POLL_S: Final = 0.1
#: A file's time is the kernel's coarse clock (a tick behind ``time.time()``, at worst).
_FILE_CLOCK_SLACK_S: Final = 0.05
_CROSS: dict[str, bool] = {"on": False}
_BACKGROUND: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "asyncrecall_background_requests", default=False
)


def enable_cross_process() -> None:
    """This process's background side queries are seen by the other processes of this
    user (the extraction worker: see the module doc); it makes the marker files."""
    _CROSS["on"] = True


class SideRequestYielded(ModelError):
    """Our side query was dropped so that a main turn of the same endpoint goes first."""


class ModelStreamCut(ModelProtocolError):
    """A main stream ended after some chunks without a finish reason. ``ours_in_flight``:
    side queries of this process were in flight to the endpoint then (they gave way), so
    the cut was very likely the server making room for them: sending again is safe."""

    def __init__(self, message: str, *, model: str | None = None, ours_in_flight: int = 0):
        super().__init__(message, model=model)
        self.ours_in_flight = ours_in_flight


@contextlib.contextmanager
def background_requests() -> Iterator[None]:
    """Side queries made inside (in this task and those it starts) are background work:
    on an endpoint that interrupts they never overlap a main turn (see the module)."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


@dataclass(eq=False, slots=True)
class _Side:
    task: asyncio.Task[object] | None
    background: bool
    gave_way: bool = False


@dataclass(eq=False, slots=True)
class Traffic:
    """One endpoint's requests from this process (see the module doc)."""

    base_url: str
    #: The endpoint ended a main stream when our side query arrived (learned once).
    interrupts: bool = False
    main_streams: int = 0
    _sides: set[_Side] = field(default_factory=set)
    #: Side queries of ours in flight at some time while the main streams ran.
    _overlapped: int = 0
    _streaming_since: float = 0.0  # wall clock (file times are compared to it)
    _quiet: list[asyncio.Future[None]] = field(default_factory=list)
    _main_fd: int | None = None  # the main marker, shared-locked while we stream

    @property
    def side_requests(self) -> int:
        """Our side queries in flight to this endpoint."""
        return len(self._sides)

    @contextlib.contextmanager
    def main_stream(self) -> Iterator[None]:
        """Register a streamed main turn while it runs; on an endpoint that interrupts,
        background side queries in flight give way at once."""
        self.main_streams += 1
        if self.main_streams == 1:
            self._overlapped = len(self._sides)
            self._streaming_since = time.time()
            self._lock_main(True)
        if self.interrupts:
            self._give_way(background_only=True)
        try:
            yield
        finally:
            self.main_streams -= 1
            if self.main_streams == 0:
                self._lock_main(False)
                waiters, self._quiet = self._quiet, []
                for waiter in waiters:
                    with contextlib.suppress(RuntimeError):  # its loop is closed
                        waiter.get_loop().call_soon_threadsafe(_wake, waiter)

    @contextlib.asynccontextmanager
    async def side_request(self, model: str) -> AsyncIterator[None]:
        """Register one side query while it is in flight. A background one on an
        endpoint that interrupts first waits for the main turns to end. Our give-way
        cancel becomes :class:`SideRequestYielded`; anyone else's propagates."""
        background = _BACKGROUND.get()
        careful = background and self.interrupts
        while careful and (self.main_streams or self._held_elsewhere("main")):
            if self.main_streams:
                waiter = asyncio.get_running_loop().create_future()
                self._quiet.append(waiter)
                await waiter
            else:
                await asyncio.sleep(POLL_S)
        task = asyncio.current_task()
        side = _Side(task, background)
        self._sides.add(side)
        if self.main_streams:
            self._overlapped += 1
        marker = self._mark() if background else None
        watch = (
            asyncio.get_running_loop().create_task(self._watch(side), name="asyncrecall-give-way")
            if careful
            else None
        )
        try:
            yield
        except asyncio.CancelledError as exc:
            # Only our give-way, and only when the caller did not cancel too.
            ours = side.gave_way and exc.args == (_GIVE_WAY,) and task is not None
            if ours and task is not None and task.uncancel() == 0:
                raise SideRequestYielded(
                    f"{self.base_url}: side query dropped so that the main turn goes "
                    "first (the server runs one request at a time)",
                    model=model,
                ) from None
            raise
        finally:
            self._sides.discard(side)
            if marker is not None:
                # Out while another process's main stream ran: that one may have been
                # cut for us and must know it after our marker is gone.
                if side.gave_way or self._held_elsewhere("main"):
                    self._touch("overlap")
                os.close(marker)
            if watch is not None:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)

    async def _watch(self, side: _Side) -> None:
        """A background query's look-out: it gives way when another process of ours
        starts a main stream on the endpoint."""
        while not side.gave_way:
            await asyncio.sleep(POLL_S)
            if self._held_elsewhere("main") and not self.main_streams:
                self._give_way(background_only=True)

    def cut(self) -> int:
        """A main stream ended without a finish reason: how many side queries of ours were
        in flight during it, this process's (those still out give way) plus one when
        another process of ours has a background one out or had one out since the stream
        began; the endpoint is then known to interrupt."""
        elsewhere = self._held_elsewhere("background") or self._touched_since(
            "overlap", self._streaming_since
        )
        count = max(len(self._sides), self._overlapped) + (1 if elsewhere else 0)
        if count:
            self.learn_interrupts()
            self._give_way(background_only=False)
        return count

    def learn_interrupts(self) -> None:
        """The endpoint interrupts: known from now on here, and to the processes that
        start later (the ``interrupts`` file, where markers are made; see the module)."""
        self.interrupts = True
        path = self.marker_path("interrupts")
        if os.path.exists(path) or not (_CROSS["on"] or os.path.isdir(os.path.dirname(path))):
            return
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))

    def remembered_interrupts(self) -> bool:
        """Whether a process of ours saw this endpoint interrupt (its file is there)."""
        return os.path.exists(self.marker_path("interrupts"))

    def forget_interrupts(self) -> None:
        """Forget, here and for later processes, that the endpoint interrupts."""
        self.interrupts = False
        for kind in ("interrupts", "overlap"):
            with contextlib.suppress(OSError):
                os.unlink(self.marker_path(kind))

    def _give_way(self, *, background_only: bool) -> None:
        for side in list(self._sides):
            if background_only and not side.background:
                continue
            if not side.gave_way and side.task is not None and not side.task.done():
                side.gave_way = True
                side.task.cancel(_GIVE_WAY)

    def marker_path(self, kind: str = "background") -> str:
        """The ``main``, ``background``, ``overlap`` or ``interrupts`` file of this
        endpoint."""
        digest = hashlib.sha256(self.base_url.encode()).hexdigest()[:16]
        folder = _platform.user_temp_dir("asyncrecall")
        return os.path.join(folder, f"{kind}-{digest}.lock")

    def _open_marker(self, kind: str, *, create: bool) -> int | None:
        """The marker file (made only when ``create``), ``None`` when absent."""
        if not _platform.LOCKS:  # pragma: no cover - no such platform runs this
            return None
        path = self.marker_path(kind)
        try:
            if not create:
                return os.open(path, os.O_RDWR)
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None

    def _mark(self) -> int | None:
        """A shared lock on the background marker (``None`` where it cannot be had, or
        this process does not make markers)."""
        if not _CROSS["on"]:
            return None
        fd = self._open_marker("background", create=True)
        if fd is None:
            return None
        try:
            taken = _platform.lock(fd, shared=True, block=False)
        except OSError:
            taken = False
        if not taken:
            os.close(fd)
            return None
        return fd

    def _touch(self, kind: str) -> None:
        """Set the ``kind`` file's time to now (made if missing; markers' folder only)."""
        fd = self._open_marker(kind, create=True)
        if fd is None:
            return
        try:
            os.utime(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _touched_since(self, kind: str, since: float) -> bool:
        """Whether the ``kind`` file was touched at or after ``since`` (wall clock)."""
        try:
            return os.stat(self.marker_path(kind)).st_mtime >= since - _FILE_CLOCK_SLACK_S
        except OSError:
            return False

    def _lock_main(self, streaming: bool) -> None:
        """Hold (``streaming``) or drop the shared lock on the main marker (one open file
        for the process, opened on its first main stream)."""
        if self._main_fd is None:
            if not streaming:
                return
            # Only when a worker made the file: a plain process leaves no file behind.
            self._main_fd = self._open_marker("main", create=_CROSS["on"])
            if self._main_fd is None:
                return
        # Blocking: the only exclusive lock ever taken is a look (_held_elsewhere), held
        # for a few microseconds; a non-blocking try that met one would stream unseen.
        with contextlib.suppress(OSError):
            if streaming:
                _platform.lock(self._main_fd, shared=True)
            else:
                _platform.unlock(self._main_fd)

    def _held_elsewhere(self, kind: str) -> bool:
        """Whether some process of ours holds the ``kind`` marker (another open file of
        this process counts too: the caller knows its own)."""
        # A worker makes the main marker on its first look, so main streams that
        # start from then on hold it.
        fd = self._open_marker(kind, create=_CROSS["on"] and kind == "main")
        if fd is None:
            return False
        try:
            return not _platform.lock(fd, block=False)
        except OSError:
            return True
        finally:
            os.close(fd)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_TRAFFIC: dict[str, Traffic] = {}


def traffic(base_url: str) -> Traffic:
    """The registry of the endpoint at ``base_url`` (without a trailing slash)."""
    key = base_url.rstrip("/")
    found = _TRAFFIC.get(key)
    if found is None:
        found = _TRAFFIC[key] = Traffic(key)
        found.interrupts = found.remembered_interrupts()
    return found


def forget_traffic(*urls: str) -> None:
    """Forget what every endpoint was seen to do, here and in the ``interrupts`` files
    of those known here and of ``urls`` (tests sharing one server)."""
    for key in {*_TRAFFIC, *(url.rstrip("/") for url in urls)}:
        Traffic(key).forget_interrupts()
    _TRAFFIC.clear()

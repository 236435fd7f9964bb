"""What this process has in flight on each endpoint, so that what the user waits for wins.

Some servers run one request at a time. The user waits for two kinds of request there:
the main turn's stream and the foreground side query (the recall of ``run`` or ``chat``,
``memory recall``'s). Background side queries (extraction, consolidation: made inside
:func:`background_requests`) are for later, and must never make the user wait. Some
of those servers also, when a second request arrives while a streamed answer runs,
end that stream early: llama-cpp-python's server with its default
``interrupt_requests`` ends it with ``[DONE]`` and no finish reason. So, per endpoint
(base URL) and per process:

* every side query (:meth:`Traffic.side_request`) is registered while it is in flight,
  and every streamed main turn (:meth:`Traffic.main_stream`) while it streams; a main
  stream and a foreground side query are *foreground* requests, and so is everything
  inside :meth:`Traffic.foreground` (a command that is about to send them);
* in the extraction worker (a process that did :func:`enable_cross_process`: nobody
  waits for it, and it cannot know how many requests the server runs at once), and on
  an endpoint seen to interrupt, a background side query is never out while a
  foreground request of ours is: it waits until none is before it is sent, and one in
  flight **gives way** as soon as one starts (it is cancelled, which hangs up its
  connection, and raises :class:`SideRequestYielded`; its caller asks again later,
  nothing is lost). Elsewhere (a session's own extraction on a server that runs
  requests side by side) it runs beside them;
* a background side query is sent streamed (:func:`in_background`): a server that runs
  one request at a time may go on computing a non-streamed answer after the client
  hung up (llama-cpp-python does), and stops a streamed one; llama-cpp-python also
  ends it early, by itself, when another request waits (that too is giving way);
* a main stream that ends without a finish reason (:meth:`Traffic.cut`) after a side
  query of ours was in flight during it (still out, or already answered: the server
  serves it before we read the cut) makes those still out give way, marks the
  endpoint as one that interrupts, and tells the caller, who sends the main request
  again (the agent);
* across processes of this user, through file locks (``flock``; see
  :mod:`asyncrecall._platform` for Windows) on two marker files per endpoint
  (in the temporary folder), made only by a process that did
  :func:`enable_cross_process` (the extraction worker): a process holds a shared lock
  on the ``main`` marker while it has a foreground request out or about to go (when the
  file exists), such a process's background side query one on the ``background``
  marker while it is out. A background query waits while any process of ours holds the
  ``main`` marker, and gives way when one takes it (a careful one, as above: looked at
  every :data:`POLL_S` while it is out). A main stream cut while another process of
  ours has a background query out counts that one as ours and is sent again; so does
  one that was out during the stream and is gone by the cut (it leaves a fourth file,
  ``overlap-…``, touched before it lets go of its marker);
* what one process learned is known to the next: an endpoint seen to interrupt leaves
  a third file, ``interrupts-…``, beside the markers (written by a worker, or by any
  process once a worker made the folder), and every process starts knowing it.

Nothing here knows what a side query is for; the agent decides what is background.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import os
import tempfile
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
    "in_background",
    "traffic",
]

_GIVE_WAY: Final = "asyncrecall: side query gave way to the main turn"
#: Seconds between two looks at other processes' foreground requests (background
#: queries only).
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
    they never overlap a foreground request of ours (see the module)."""
    token = _BACKGROUND.set(True)
    try:
        yield
    finally:
        _BACKGROUND.reset(token)


def in_background() -> bool:
    """Whether a side query made here is background work (:func:`background_requests`):
    the model then sends it in a form the server stops when we hang up (streamed)."""
    return _BACKGROUND.get()


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
    #: Foreground requests of this process out or about to go (main streams included).
    foreground_requests: int = 0
    _sides: set[_Side] = field(default_factory=set)
    #: Side queries of ours in flight at some time while the main streams ran.
    _overlapped: int = 0
    _streaming_since: float = 0.0  # wall clock (file times are compared to it)
    _quiet: list[asyncio.Future[None]] = field(default_factory=list)
    _main_fd: int | None = None  # the main marker, shared-locked while foreground
    _paths: dict[tuple[str, str | None], str] = field(default_factory=dict)

    @property
    def side_requests(self) -> int:
        """Our side queries in flight to this endpoint."""
        return len(self._sides)

    @property
    def careful(self) -> bool:
        """Whether background side queries here keep out of the foreground's way: in a
        process that makes markers (the extraction worker: nobody waits for it, and it
        cannot know what the server can run at once), and on an endpoint that interrupts.
        Elsewhere (a session's own extraction, on a server that runs requests side by
        side) they run beside the user's requests."""
        return _CROSS["on"] or self.interrupts

    @contextlib.contextmanager
    def main_stream(self) -> Iterator[None]:
        """Register a streamed main turn while it runs (a foreground request)."""
        self.main_streams += 1
        if self.main_streams == 1:
            self._overlapped = len(self._sides)
            self._streaming_since = time.time()
        try:
            with self.foreground():
                yield
        finally:
            self.main_streams -= 1

    @contextlib.contextmanager
    def foreground(self) -> Iterator[None]:
        """While inside, background side queries to this endpoint, of this process and
        of the other processes of ours that make markers, are not sent, and those in
        flight give way at once (for every foreground request, and for a command about
        to send one)."""
        self.foreground_requests += 1
        if self.foreground_requests == 1 or self._main_fd is None:
            self._lock_main(True)
        if self.careful:
            self._give_way(background_only=True)
        try:
            yield
        finally:
            self.foreground_requests -= 1
            if self.foreground_requests == 0:
                self._lock_main(False)
                waiters, self._quiet = self._quiet, []
                for waiter in waiters:
                    with contextlib.suppress(RuntimeError):  # its loop is closed
                        waiter.get_loop().call_soon_threadsafe(_wake, waiter)

    @contextlib.asynccontextmanager
    async def side_request(self, model: str) -> AsyncIterator[None]:
        """Register one side query while it is in flight. A background one first waits
        until no foreground request of ours is out (see the module); a foreground one
        is a foreground request. Our give-way cancel becomes :class:`SideRequestYielded`;
        anyone else's propagates."""
        background = _BACKGROUND.get()
        careful = background and self.careful
        while careful and (self.foreground_requests or self._held_elsewhere("main")):
            if self.foreground_requests:
                waiter = asyncio.get_running_loop().create_future()
                self._quiet.append(waiter)
                await waiter
            else:
                await asyncio.sleep(POLL_S)
        if not background:
            with self.foreground():
                async with self._registered(model, background=False, careful=False):
                    yield
            return
        async with self._registered(model, background=True, careful=careful):
            yield

    @contextlib.asynccontextmanager
    async def _registered(
        self, model: str, *, background: bool, careful: bool
    ) -> AsyncIterator[None]:
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
        sends a foreground request to the endpoint (or is about to)."""
        while not side.gave_way:
            await asyncio.sleep(POLL_S)
            if self._held_elsewhere("main") and not self.foreground_requests:
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
        # Looked up on every foreground request: remembered per temporary folder (the
        # one ``tempfile`` chose; a program may still set another).
        key = (kind, tempfile.tempdir)
        path = self._paths.get(key)
        if path is None:
            digest = hashlib.sha256(self.base_url.encode()).hexdigest()[:16]
            folder = _platform.user_temp_dir("asyncrecall")
            path = self._paths[key] = os.path.join(folder, f"{kind}-{digest}.lock")
        return path

    def _open_marker(self, kind: str, *, create: bool) -> int | None:
        """The marker file (made only when ``create``), ``None`` when absent."""
        if not _platform.LOCKS:  # pragma: no cover - no such platform runs this
            return None
        path = self.marker_path(kind)
        try:
            if not create:
                return os.open(path, os.O_RDWR)
            try:
                return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            except FileNotFoundError:  # the folder first (not on every side query)
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
        """Hold (``streaming``: a foreground request is out or about to go) or drop the
        shared lock on the main marker (one open file for the process, opened on its
        first foreground request after the file was made)."""
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

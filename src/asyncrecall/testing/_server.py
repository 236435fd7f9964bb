"""A local OpenAI-compatible server on 127.0.0.1 for tests, benchmarks and the demo.

It runs in its own thread with its own event loop, so sync tests, async tests (in
another loop), CLI subprocesses and benchmarks can all talk to it over real sockets.
Answers are scripted per model name (:meth:`LocalServer.script`), or drawn from a
default (:meth:`LocalServer.set_default`). Every request is recorded, including
whether the client hung up before the answer was complete.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeAlias

from asyncrecall.testing._http import ClientGone, Connection, HttpRequest
from asyncrecall.testing._replies import (
    RecordedRequest,
    Reply,
    completion_body,
    error_body,
    rejection,
    stream_events,
)

__all__ = ["LocalServer", "ReplySource"]

ReplySource: TypeAlias = Reply | str | Callable[[RecordedRequest], Reply | str]
"""A default answer: a reply, a text, or a callable from the request to either."""

Predicate: TypeAlias = Callable[[RecordedRequest], bool]

_GATE_POLL = 0.002  # seconds between looks at a threading.Event gate


def _as_reply(value: Reply | str) -> Reply:
    return Reply(text=value) if isinstance(value, str) else value


class LocalServer:
    """An OpenAI-compatible chat completions server on 127.0.0.1 with real sockets.

    Use as a context manager (``with LocalServer() as server:``) or call
    :meth:`start` and :meth:`stop`. Endpoints: ``POST /v1/chat/completions``
    (streamed as SSE or not) and ``GET /v1/models``. A model with neither a scripted
    reply nor a default is answered 404 with an OpenAI-style error body.

    Example::

        with LocalServer() as server:
            server.script("main", Reply(text="hello", chunk_size=2))
            model = OpenAIModel(model="main", base_url=server.base_url)
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._lock = threading.Condition()
        self._scripts: dict[str, collections.deque[Reply]] = {}
        self._defaults: dict[str, ReplySource] = {}
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._async_waiters: set[Callable[[], None]] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._open: dict[asyncio.Task[None], Connection] = {}

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> LocalServer:
        """Start the server thread and wait until it listens."""
        if self._thread is not None:
            raise RuntimeError("LocalServer already started")
        self._thread = threading.Thread(
            target=self._run, name="asyncrecall-localserver", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("LocalServer failed to start") from self._startup_error
        return self

    def stop(self) -> None:
        """Close every connection, stop the loop and join the thread."""
        thread, loop, stop = self._thread, self._loop, self._stop_requested
        if thread is None:
            return
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if not self._ready.is_set() or self._port == 0:
            raise RuntimeError("LocalServer is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` — what an OpenAI client takes as base URL."""
        return f"http://{self._host}:{self.port}/v1"

    # -- scripting ---------------------------------------------------------------

    def script(self, model: str, *replies: Reply | str) -> None:
        """Queue replies for ``model``, answered first in, first out (a str is a text reply)."""
        with self._lock:
            self._scripts.setdefault(model, collections.deque()).extend(map(_as_reply, replies))

    def set_default(self, model: str, reply: ReplySource) -> None:
        """What ``model`` answers when its script is empty.

        A callable gets the :class:`RecordedRequest` and returns the reply (it runs
        in the server thread; benchmarks use it to draw latencies).
        """
        with self._lock:
            self._defaults[model] = reply

    def pending(self, model: str) -> int:
        """How many scripted replies for ``model`` are not used yet."""
        with self._lock:
            return len(self._scripts.get(model, ()))

    def reset(self) -> None:
        """Forget scripts, defaults, records and errors."""
        with self._lock:
            self._scripts.clear()
            self._defaults.clear()
            self._requests.clear()
            self._errors.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the recorded requests, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by default callables or the handler (answered as 500)."""
        with self._lock:
            return list(self._errors)

    # -- waiting -------------------------------------------------------------------

    def _first(self, predicate: Predicate) -> RecordedRequest | None:
        return next((r for r in self._requests if predicate(r)), None)

    def wait_for(
        self, predicate: Predicate = lambda r: True, *, timeout: float = 5.0
    ) -> RecordedRequest:
        """Block until a recorded request matches ``predicate``; return the first that does.

        The predicate is checked again whenever any record changes, so it may look at
        ``first_byte_at``, ``disconnected`` etc. Raises :class:`TimeoutError` (a hang
        guard, not a synchronisation tool).
        """
        with self._lock:
            found = self._lock.wait_for(lambda: self._first(predicate), timeout=timeout)
        if found is None:
            raise TimeoutError(f"no request matched within {timeout}s; saw {self._summary()}")
        return found

    async def await_for(
        self,
        predicate: Predicate = lambda r: True,
        *,
        timeout: float = 5.0,  # noqa: ASYNC109 - a hang guard mirroring wait_for
    ) -> RecordedRequest:
        """:meth:`wait_for` for async code: waits without blocking the caller's loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RecordedRequest] = loop.create_future()

        def resolve(found: RecordedRequest) -> None:
            if not future.done():
                future.set_result(found)

        def check() -> None:  # runs under self._lock, in any thread
            found = self._first(predicate)
            if found is not None:
                with contextlib.suppress(RuntimeError):  # the caller's loop closed
                    loop.call_soon_threadsafe(resolve, found)

        with self._lock:
            self._async_waiters.add(check)
            check()
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            raise TimeoutError(
                f"no request matched within {timeout}s; saw {self._summary()}"
            ) from None
        finally:
            with self._lock:
                self._async_waiters.discard(check)

    def wait_disconnected(
        self, request: RecordedRequest, *, timeout: float = 5.0
    ) -> RecordedRequest:
        """Block until the server saw the client hang up on ``request``."""
        return self.wait_for(lambda r: r is request and r.disconnected, timeout=timeout)

    async def await_disconnected(
        self,
        request: RecordedRequest,
        *,
        timeout: float = 5.0,  # noqa: ASYNC109 - a hang guard mirroring wait_disconnected
    ) -> RecordedRequest:
        """:meth:`wait_disconnected` for async code."""
        return await self.await_for(lambda r: r is request and r.disconnected, timeout=timeout)

    def _summary(self) -> str:
        with self._lock:
            return repr(self._requests)

    def _changed(self) -> None:
        """Wake every waiter; call with the lock held."""
        self._lock.notify_all()
        for check in list(self._async_waiters):
            check()

    def _update(self, request: RecordedRequest, **fields: Any) -> None:
        with self._lock:
            for name, value in fields.items():
                setattr(request, name, value)
            self._changed()

    # -- the server thread -----------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # surfaced by start()
            self._startup_error = exc
        finally:
            self._ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self) -> None:
        self._stop_requested = asyncio.Event()
        server = await asyncio.start_server(self._on_connection, self._host, self._port)
        self._port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stop_requested.wait()
        finally:
            # Stop accepting first, and let connections already accepted reach the
            # server's books: one accepted as the server closes could not attach to it
            # and would be left unclosed.
            loop = asyncio.get_running_loop()
            for listening in server.sockets:
                # A proactor loop (Windows) has no readers to remove: it just closes.
                with contextlib.suppress(NotImplementedError):
                    loop.remove_reader(listening.fileno())
            for _ in range(3):
                await asyncio.sleep(0)
            server.close()
            # Abort the sockets rather than cancel the handlers: each handler then sees
            # its client gone and ends normally (a cancelled start_server handler makes
            # asyncio log a CancelledError, and could leave its socket unclosed).
            for connection in list(self._open.values()):
                connection.abort()
            if sys.version_info >= (3, 13):
                # A connection accepted whose handler has not started yet is in no list
                # of ours: the server aborts every transport it accepted.
                server.abort_clients()
            if self._connections:
                _, stuck = await asyncio.wait(self._connections, timeout=5)
                for task in stuck:
                    task.cancel()
                if stuck:
                    await asyncio.wait(stuck)
            await server.wait_closed()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        connection = Connection(reader, writer)
        self._open[task] = connection
        try:
            while True:
                try:
                    request = await connection.read_request()
                except ValueError as exc:
                    body = json.dumps(self._error_body(400, str(exc))).encode()
                    with contextlib.suppress(ClientGone):
                        await connection.send_full(
                            400, body, content_type="application/json", keep_alive=False
                        )
                    break
                if request is None or not await self._handle(connection, request):
                    break
        finally:
            await connection.close()
            self._connections.discard(task)
            self._open.pop(task, None)

    async def _handle(self, connection: Connection, http: HttpRequest) -> bool:
        """Answer one request; return whether the connection stays open."""
        path = http.path.split("?", 1)[0].rstrip("/")
        if http.method == "GET" and path in ("/v1/models", "/models"):
            with self._lock:
                names = sorted(set(self._scripts) | set(self._defaults))
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "local"} for n in names]
            return await self._send_json(connection, http, 200, {"object": "list", "data": data})
        if http.method != "POST" or path not in ("/v1/chat/completions", "/chat/completions"):
            return await self._send_error(
                connection, http, 404, f"no route for {http.method} {path}"
            )
        return await self._record_and_answer(connection, http, path)

    async def _record_and_answer(
        self, connection: Connection, http: HttpRequest, path: str
    ) -> bool:
        """Parse the JSON body, record the request and answer it (:meth:`_answer`)."""
        try:
            body = json.loads(http.body or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
        except ValueError as exc:
            return await self._send_error(connection, http, 400, f"invalid JSON body: {exc}")
        with self._lock:
            record = RecordedRequest(
                index=len(self._requests),
                method=http.method,
                path=path,
                headers=dict(http.headers),
                body=body,
                arrived_at=time.monotonic(),
            )
            self._requests.append(record)
            self._changed()
        try:
            return await self._answer(connection, http, record)
        except ClientGone:
            self._update(record, disconnected=True, finished_at=None)
            return False
        except Exception as exc:
            with self._lock:
                self._errors.append(exc)
            message = f"{type(self).__name__} failed: {type(exc).__name__}: {exc}"
            with contextlib.suppress(ClientGone):
                await self._send_error(connection, http, 500, message, record)
            return False

    @staticmethod
    def _error_body(status: int, message: str) -> dict[str, Any]:
        """The error object of this server's API (OpenAI's)."""
        return error_body(status, message)

    async def _send_error(
        self,
        connection: Connection,
        http: HttpRequest,
        status: int,
        message: str,
        record: RecordedRequest | None = None,
        headers: dict[str, str] | None = None,
    ) -> bool:
        body = self._error_body(status, message)
        return await self._send_json(connection, http, status, body, record, headers)

    def _choose(self, record: RecordedRequest) -> tuple[int, str] | Reply:
        """The reply for ``record`` (consumed unless it rejects the request), or an error."""
        with self._lock:
            queue = self._scripts.get(record.model)
            default = self._defaults.get(record.model)
            if queue:
                reply = queue[0]
                if not self._rejects(reply, record):
                    queue.popleft()
                return reply
        if default is None:
            if queue is None:
                return 404, f"model '{record.model}' not found"
            return 404, f"model '{record.model}' has no scripted reply left"
        return _as_reply(default(record) if callable(default) else default)

    def _waiting_behind(self, record: RecordedRequest) -> bool:
        """Whether another request is unanswered at the server (the one slot is wanted)."""
        with self._lock:
            return any(
                r is not record and r.finished_at is None and not r.disconnected
                for r in self._requests
            )

    @staticmethod
    def _rejects(reply: Reply, record: RecordedRequest) -> bool:
        return rejection(reply, record) is not None

    async def _answer(
        self, connection: Connection, http: HttpRequest, record: RecordedRequest
    ) -> bool:
        chosen = self._choose(record)
        if not isinstance(chosen, Reply):
            status, message = chosen
            return await self._send_json(
                connection, http, status, error_body(status, message), record
            )
        reply = chosen
        self._update(record, reply=reply)
        if (refused := rejection(reply, record)) is not None:
            status = reply.rejection_status
            return await self._send_json(
                connection, http, status, error_body(status, refused), record
            )
        if reply.gate is not None:
            while not reply.gate.is_set():
                await connection.sleep(_GATE_POLL)
        if reply.hang:
            await connection.gone.wait()
            connection.check()
        await connection.sleep(reply.first_token_delay)
        if reply.status != 200:
            message = reply.error_message or f"scripted error {reply.status}"
            headers = {}
            if reply.retry_after is not None:
                headers["retry-after-ms"] = str(max(1, round(reply.retry_after * 1000)))
            return await self._send_json(
                connection, http, reply.status, error_body(reply.status, message), record, headers
            )
        if reply.error_in_200 is not None:
            body = error_body(500, reply.error_in_200)
            return await self._send_json(connection, http, 200, body, record)
        if not record.stream:
            return await self._send_json(
                connection, http, 200, completion_body(reply, record), record
            )
        # Records are updated just before the bytes go out, so a client that has read
        # the response always finds them up to date.
        self._update(record, first_byte_at=time.monotonic(), status=200)
        await connection.send_head(
            200,
            {
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "Transfer-Encoding": "chunked",
                "Connection": "keep-alive" if http.keep_alive else "close",
            },
        )
        events = [f"data: {json.dumps(event)}\n\n" for event in stream_events(reply, record)]
        if reply.stream_error is not None:
            error = json.dumps(error_body(500, reply.stream_error))
            events = [*events[:1], f"data: {error}\n\n"]
        if reply.malformed_stream:
            events = [*events[:1], "data: {this is not json\n\n"]
        if reply.end_after is not None:
            events = events[: reply.end_after]
        for n, event in enumerate(events):
            if n == reply.stall_after:
                await connection.gone.wait()
                connection.check()
            if n == reply.drop_after:  # the server's own hang-up: not `disconnected`
                connection.abort()
                return False
            if n:
                await connection.sleep(reply.chunk_delay)
            await connection.send_chunk(event.encode())
            if reply.interrupt and self._waiting_behind(record):
                self._update(record, finished_at=time.monotonic(), interrupted=True)
                await connection.send_chunk(b"data: [DONE]\n\n", last=True)
                return http.keep_alive
        self._update(record, finished_at=time.monotonic())
        if reply.end_after is not None:  # a cut answer ends without [DONE] too
            await connection.send_chunk(b"", last=True)
            return http.keep_alive
        await connection.send_chunk(b"data: [DONE]\n\n", last=True)
        return http.keep_alive

    async def _send_json(
        self,
        connection: Connection,
        http: HttpRequest,
        status: int,
        payload: Any,
        record: RecordedRequest | None = None,
        headers: dict[str, str] | None = None,
    ) -> bool:
        if record is not None:
            now = time.monotonic()
            self._update(record, first_byte_at=now, finished_at=now, status=status)
        await connection.send_full(
            status,
            json.dumps(payload).encode(),
            content_type="application/json",
            keep_alive=http.keep_alive,
            headers=headers,
        )
        return http.keep_alive

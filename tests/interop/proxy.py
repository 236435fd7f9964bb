"""A recording HTTP/1.1 proxy in front of a real server: what went on the wire.

Each request is recorded with its JSON body, the status answered, whether the answer
was complete, and whether the client hung up before it was (a cancel mid-stream).
It runs in its own thread and event loop, so tests in any loop and CLI subprocesses
can all go through it. Only what an OpenAI client sends is understood: requests with
``Content-Length`` bodies; responses with ``Content-Length`` or chunked bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any


@dataclass(eq=False)
class ProxiedRequest:
    """One request that went through the proxy (updated live by the proxy thread)."""

    method: str
    path: str
    body: dict[str, Any]
    sent_at: float = field(default_factory=time.monotonic)
    status: int | None = None
    complete: bool = False
    """The whole answer reached the client."""
    client_hung_up: bool = False
    """The client closed the connection before the answer was complete."""

    @property
    def response_format_type(self) -> str | None:
        response_format = self.body.get("response_format")
        return response_format.get("type") if isinstance(response_format, dict) else None


class RecordingProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream_port`` and records every request."""

    def __init__(self, upstream_port: int) -> None:
        #: When set, a chat completion that names no ``max_tokens`` is sent upstream with
        #: this cap (the record keeps what the client sent): a framework's agent loop
        #: sets none, and the tiny model may otherwise write until its context is full.
        self.max_tokens: int | None = None
        self._upstream = upstream_port
        self._records: list[ProxiedRequest] = []
        self._changed = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        future.result(timeout=10)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    @property
    def requests(self) -> list[ProxiedRequest]:
        with self._changed:
            return list(self._records)

    def clear(self) -> None:
        with self._changed:
            self._records.clear()

    def wait_for(
        self, predicate: Callable[[ProxiedRequest], bool], *, timeout: float = 30
    ) -> ProxiedRequest:
        """The first record matching ``predicate``, waiting for it (a hang guard)."""
        with self._changed:
            found = self._changed.wait_for(
                lambda: next((r for r in self._records if predicate(r)), None), timeout=timeout
            )
        if found is None:
            raise TimeoutError(f"no proxied request matched in {timeout}s: {self._records}")
        return found

    def _update(self, record: ProxiedRequest, **fields: Any) -> None:
        with self._changed:
            for name, value in fields.items():
                setattr(record, name, value)
            self._changed.notify_all()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", 0)

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        await self._server.wait_closed()

    async def _on_client(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream_reader, upstream_writer = await asyncio.open_connection(
            "127.0.0.1", self._upstream
        )
        pending: asyncio.Queue[ProxiedRequest] = asyncio.Queue()
        in_flight: list[ProxiedRequest] = []
        up = asyncio.create_task(
            self._client_to_server(client_reader, upstream_writer, pending, in_flight)
        )
        down = asyncio.create_task(
            self._server_to_client(upstream_reader, client_writer, pending, in_flight)
        )
        try:
            await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            if up.done():  # the client hung up: whatever is not complete was cut short
                for record in in_flight:
                    if not record.complete:
                        self._update(record, client_hung_up=True)
        finally:
            for pump in (up, down):
                pump.cancel()
            await asyncio.wait({up, down})
            for writer in (upstream_writer, client_writer):
                writer.close()
                with contextlib.suppress(ConnectionError, OSError):
                    await writer.wait_closed()
            self._tasks.discard(task)

    async def _client_to_server(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: asyncio.Queue[ProxiedRequest],
        in_flight: list[ProxiedRequest],
    ) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, OSError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, path, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
                length = int(_header(head, b"content-length") or b"0")
                body = await reader.readexactly(length)
                try:
                    data = json.loads(body) if body else {}
                except ValueError:
                    data = {}
                record = ProxiedRequest(method, path, data if isinstance(data, dict) else {})
                with self._changed:
                    self._records.append(record)
                    self._changed.notify_all()
                in_flight.append(record)
                pending.put_nowait(record)
                head, body = self._capped(head, body, record)
                writer.write(head + body)
                await writer.drain()

    async def _server_to_client(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: asyncio.Queue[ProxiedRequest],
        in_flight: list[ProxiedRequest],
    ) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, OSError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                record = await pending.get()
                self._update(record, status=int(head.split(b" ", 2)[1]))
                writer.write(head)
                length = _header(head, b"content-length")
                if length is not None:
                    writer.write(await reader.readexactly(int(length)))
                elif b"chunked" in (_header(head, b"transfer-encoding") or b"").lower():
                    while True:
                        size_line = await reader.readuntil(b"\r\n")
                        size = int(size_line.split(b";")[0], 16)
                        writer.write(size_line + await reader.readexactly(size + 2))
                        await writer.drain()
                        if size == 0:
                            break
                await writer.drain()
                self._update(record, complete=True)
                in_flight.remove(record)

    def _capped(self, head: bytes, body: bytes, record: ProxiedRequest) -> tuple[bytes, bytes]:
        cap = self.max_tokens
        wants = record.body
        if cap is None or not record.path.endswith("/chat/completions") or not wants:
            return head, body
        if "max_tokens" in wants or "max_completion_tokens" in wants:
            return head, body
        body = json.dumps({**wants, "max_tokens": cap}).encode()
        lines = [
            line
            for line in head.split(b"\r\n")
            if line and line.partition(b":")[0].strip().lower() != b"content-length"
        ]
        lines.append(b"Content-Length: " + str(len(body)).encode())
        return b"\r\n".join(lines) + b"\r\n\r\n", body


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None

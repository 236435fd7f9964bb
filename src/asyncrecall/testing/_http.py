"""A minimal HTTP/1.1 server connection for the local test server.

Just what an OpenAI client needs: requests with ``Content-Length`` bodies,
keep-alive, plain and chunked (SSE) responses. One task pumps the socket into a
buffer, so the server always knows when the client hangs up — even while it is
waiting to answer — which is what the cancellation tests check.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

__all__ = ["ClientGone", "Connection", "HttpRequest"]

_MAX_HEAD = 64 * 1024
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    411: "Length Required",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


class ClientGone(Exception):
    """The client closed the connection before the response was complete."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One parsed request: method, target path, lower-cased headers, body bytes."""

    method: str
    path: str
    version: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return connection == "keep-alive"
        return connection != "close"


class Connection:
    """One accepted socket. The pump task is the only reader of the stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._buffer = bytearray()
        self._arrived = asyncio.Event()
        self.gone = asyncio.Event()
        """Set once the client has closed its side (EOF) or the socket failed."""
        self._pump = asyncio.create_task(self._pump_loop(), name="localserver-pump")

    async def _pump_loop(self) -> None:
        try:
            while chunk := await self._reader.read(65536):
                self._buffer += chunk
                self._arrived.set()
        except (ConnectionError, OSError):
            pass
        finally:
            self.gone.set()
            self._arrived.set()

    async def read_request(self) -> HttpRequest | None:
        """The next request, or ``None`` when the client closed the connection between requests.

        Raises :class:`ValueError` on a malformed request.
        """
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            if len(self._buffer) > _MAX_HEAD:
                raise ValueError("request head too large")
            if self.gone.is_set():
                return None
            self._arrived.clear()
            await self._arrived.wait()
        head = bytes(self._buffer[:end]).decode("latin-1")
        del self._buffer[: end + 4]
        request_line, *header_lines = head.split("\r\n")
        try:
            method, path, version = request_line.split(" ", 2)
        except ValueError:
            raise ValueError(f"bad request line {request_line!r}") from None
        headers: dict[str, str] = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"bad header line {line!r}")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise ValueError("chunked request bodies are not supported")
        length = int(headers.get("content-length", "0"))
        while len(self._buffer) < length:
            if self.gone.is_set():
                return None
            self._arrived.clear()
            await self._arrived.wait()
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return HttpRequest(method.upper(), path, version, headers, body)

    async def sleep(self, seconds: float) -> None:
        """Sleep, but raise :class:`ClientGone` as soon as the client hangs up."""
        if seconds <= 0:
            self.check()
            return
        gone = asyncio.ensure_future(self.gone.wait())
        try:
            await asyncio.wait({gone}, timeout=seconds)
        finally:
            gone.cancel()
        self.check()

    def check(self) -> None:
        """Raise :class:`ClientGone` if the client has hung up."""
        if self.gone.is_set():
            raise ClientGone

    async def send_head(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        """Status line and headers (and, in the same write, ``body`` if given)."""
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        await self._write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    async def send_full(
        self,
        status: int,
        body: bytes,
        *,
        content_type: str,
        keep_alive: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        """A whole response with a ``Content-Length`` body."""
        await self.send_head(
            status,
            {
                "Content-Type": content_type,
                "Content-Length": str(len(body)),
                "Connection": "keep-alive" if keep_alive else "close",
                **(headers or {}),
            },
            body,
        )

    async def send_chunk(self, data: bytes, *, last: bool = False) -> None:
        """One chunk of a ``Transfer-Encoding: chunked`` body; ``last`` also ends the body."""
        out = b"%x\r\n%s\r\n" % (len(data), data) if data else b""
        await self._write(out + (b"0\r\n\r\n" if last else b""))

    async def _write(self, data: bytes) -> None:
        self.check()
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self.gone.set()
            raise ClientGone from exc

    def abort(self) -> None:
        """Drop the connection at once (the client sees a broken response)."""
        self._writer.transport.abort()
        self.gone.set()

    async def close(self) -> None:
        """Close the socket and stop the pump; the socket is closed even if cancelled."""
        try:
            self._pump.cancel()
            await asyncio.wait({self._pump})
        finally:
            self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()

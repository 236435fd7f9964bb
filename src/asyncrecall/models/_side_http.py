"""The side query's HTTP exchange, lean: one JSON POST on asyncio streams.

A side query is one small non-streamed POST per user message. Through the OpenAI SDK
it costs about 1.7 ms of CPU on the event loop (request building, the HTTP library's
connection pool, which also does bookkeeping in proportion to its connections); the
same exchange written directly on asyncio streams costs about 0.19 ms (idle 2-core
machine, medians, side by side: ``asyncrecall bench overhead``, ``recall_cpu_us``).
That CPU runs on the loop while the agent works towards its own first request, so it
is latency the user sees; with many sessions in one process it is most of the
recall's cost.

:class:`SideHTTP` speaks just what a side query needs: HTTP/1.1 (``http`` and
``https``), keep-alive (at most 100 idle connections, each dropped after 5 s idle, as
the SDK's pool does), ``Content-Length`` or chunked answers (gzip or deflate decoded).
Its headers are the SDK client's own (authorisation, organisation, project, user agent,
custom default headers), and its failures are the SDK's exception types, so errors and
what an endpoint is learned to refuse are handled exactly as before. Cancelling the
awaiting task aborts the connection: the server sees the side query hang up. When the
cancel came through a cancel signal (recall dropped at a new user message or the end
of a run), a replacement connection is opened at once in the background, so that the
next recall does not connect on its way to the agent's first request.

It is used only where it can stand in for the SDK without surprise:
:meth:`SideHTTP.for_client` answers ``None`` (keep the SDK) for a client the caller
built (it may carry a transport, proxy or certificates of its own), when an environment
proxy applies to the endpoint, and when ``ASYNCRECALL_SIDE_HTTP=sdk``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import threading
import time
import urllib.request
import zlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast
from urllib.parse import urlsplit

import openai

from asyncrecall._cancel import cancelled_by_signal

__all__ = ["SIDE_HTTP_ENV", "SideHTTP"]

#: ``sdk``: send side queries through the OpenAI SDK instead (troubleshooting).
SIDE_HTTP_ENV: Final = "ASYNCRECALL_SIDE_HTTP"
_IDLE_MAX: Final = 100
_IDLE_EXPIRY_S: Final = 5.0
_HEAD_LIMIT: Final = 1 << 16

_STATUS_ERRORS: Final[dict[int, type[openai.APIStatusError]]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


class _BadResponse(Exception):
    """The server's answer is not the HTTP/1.1 we can read."""


@dataclass(frozen=True, slots=True)
class _Request:
    """What the SDK's exceptions keep as ``request``."""

    method: str
    url: str


@dataclass(frozen=True, slots=True)
class _Response:
    """What the SDK's status errors keep as ``response``."""

    status_code: int
    headers: Mapping[str, str]
    request: _Request
    text: str = field(repr=False)


class SideHTTP:
    """POSTs JSON to ``<base_url>/chat/completions`` on a small keep-alive pool."""

    def __init__(self, base_url: str, headers: Mapping[str, str], *, timeout: float | None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        path = parts.path.rstrip("/") + "/chat/completions"
        self._target = path + (f"?{parts.query}" if parts.query else "")
        self._url = f"{parts.scheme}://{parts.netloc}{self._target}"
        fields = {"Host": parts.netloc.rpartition("@")[2], **headers, "Connection": "keep-alive"}
        self._head = "".join(f"{name}: {value}\r\n" for name, value in fields.items())
        self._timeout = timeout
        self._ssl: ssl.SSLContext | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: deque[tuple[float, asyncio.StreamReader, asyncio.StreamWriter]] = deque()
        self._spare: asyncio.Task[None] | None = None

    @classmethod
    def for_client(
        cls, client: openai.AsyncOpenAI, base_url: str, *, timeout: float | None
    ) -> SideHTTP | None:
        """A lean exchange with ``client``'s headers, or ``None`` where only the SDK will do
        (the caller decides whether the client is one we built: see the module)."""
        if os.environ.get(SIDE_HTTP_ENV, "").strip().lower() == "sdk":
            return None
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or _proxied(parts):
            return None
        merged = {**client.default_headers, **client.auth_headers}
        headers = {k: v for k, v in merged.items() if isinstance(v, str)}
        return cls(base_url, headers, timeout=timeout)

    def __repr__(self) -> str:
        return f"SideHTTP({self._url!r}, idle={len(self._idle)})"

    async def post_json(self, body: Mapping[str, Any]) -> Any:
        """POST ``body``; the answer's JSON. Raises the SDK's exception types: a status
        error (4xx, 5xx), a connection error, a timeout; ``ValueError`` for a body that
        is not JSON."""
        payload = json.dumps(body).encode()
        request = _Request("POST", self._url)
        try:
            async with asyncio.timeout(self._timeout):
                status, headers, data = await self._exchange(payload)
        except TimeoutError as exc:
            raise openai.APITimeoutError(request=cast(Any, request)) from exc
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise openai.APIConnectionError(request=cast(Any, request)) from exc
        except _BadResponse as exc:
            raise openai.APIConnectionError(message=str(exc), request=cast(Any, request)) from exc
        text = data.decode("utf-8", errors="replace")
        if not 200 <= status < 300:
            raise _status_error(_Response(status, headers, request, text))
        return json.loads(text)

    async def aclose(self) -> None:
        """Close the idle connections (a replacement being opened too)."""
        spare, self._spare = self._spare, None
        if spare is not None and not spare.done():
            spare.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await spare
        idle, self._idle = self._idle, deque()
        for _, _, writer in idle:
            writer.close()
        for _, _, writer in idle:
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    # -- one exchange ------------------------------------------------------------------

    async def _exchange(self, payload: bytes) -> tuple[int, dict[str, str], bytes]:
        head = f"POST {self._target} HTTP/1.1\r\n{self._head}Content-Length: {len(payload)}\r\n\r\n"
        message = head.encode("latin-1") + payload
        while True:
            reused, reader, writer = await self._connection()
            started = False
            try:
                writer.write(message)
                await writer.drain()
                started = True
                status, headers, data, keep = await _read_response(reader)
            except BaseException as exc:
                writer.transport.abort()  # cancelled or failed: the server sees it go
                if cancelled_by_signal(exc):
                    self._replace_aborted()
                # A kept-alive connection the server closed meanwhile: once more, afresh.
                if reused and _closed_before_answer(exc, started):
                    continue
                raise
            if keep:
                self._release(reader, writer)
            else:
                writer.close()
            return status, headers, data

    async def _connection(
        self,
    ) -> tuple[bool, asyncio.StreamReader, asyncio.StreamWriter]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # another loop's connections cannot be used here
            self._idle.clear()
            self._loop = loop
        now = time.monotonic()
        while self._idle:
            at, reader, writer = self._idle.pop()
            if now - at < _IDLE_EXPIRY_S and not reader.at_eof() and not writer.is_closing():
                return True, reader, writer
            writer.close()
        reader, writer = await self._open()
        return False, reader, writer

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            self._host,
            self._port,
            ssl=await self._ssl_context() if self._tls else None,
            server_hostname=self._host if self._tls else None,
            limit=_HEAD_LIMIT,
        )

    def _replace_aborted(self) -> None:
        """A side query dropped through a cancel signal (a new user message, the end of
        a run) had its connection aborted, so that the server stops working on it: open
        its replacement now, in the background, so that the next side query finds a
        connection instead of connecting (and, for HTTPS, shaking hands) on the event
        loop on the way to the agent's first request. One at a time; none when an idle
        connection is there already. A bare cancel (``asyncio.run`` ending with the
        query out) opens none: nothing would close it.
        """
        if self._idle or (self._spare is not None and not self._spare.done()):
            return
        self._spare = asyncio.get_running_loop().create_task(
            self._open_spare(), name="asyncrecall-side-connection"
        )

    async def _open_spare(self) -> None:
        try:
            reader, writer = await self._open()
        except (OSError, ssl.SSLError, TimeoutError):
            return  # the next side query connects, and reports what fails
        self._release(reader, writer)

    def _release(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._idle) >= _IDLE_MAX:
            writer.close()
        else:
            self._idle.append((time.monotonic(), reader, writer))

    async def _ssl_context(self) -> ssl.SSLContext:
        """The trust store for HTTPS, one per process and trust setting: loading one
        takes 40-55 ms of CPU, so it is built once, in a worker thread, never on the
        loop (and never again for the next model of the process)."""
        if self._ssl is None:
            trust = _trust()
            context = _SSL_CONTEXTS.get(trust)
            if context is None:
                context = await asyncio.to_thread(_load_trust, trust)
            self._ssl = context
        return self._ssl


_SSL_CONTEXTS: dict[tuple[str | None, str | None], ssl.SSLContext] = {}
_SSL_LOCK = threading.Lock()


def _trust() -> tuple[str | None, str | None]:
    """(cafile, capath): ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, else certifi's
    bundle, as the SDK's HTTP library trusts (else the system's store)."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if cafile is None and capath is None:
        with contextlib.suppress(ImportError):
            import certifi

            cafile = certifi.where()
    return cafile, capath


def _load_trust(trust: tuple[str | None, str | None]) -> ssl.SSLContext:
    with _SSL_LOCK:
        context = _SSL_CONTEXTS.get(trust)
        if context is None:
            context = _SSL_CONTEXTS[trust] = ssl.create_default_context(
                cafile=trust[0], capath=trust[1]
            )
        return context


async def _read_response(
    reader: asyncio.StreamReader,
) -> tuple[int, dict[str, str], bytes, bool]:
    """One response: status, headers (lower-case names), decoded body, and whether the
    connection may be used again."""
    while True:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, *lines = head.split("\r\n")
        version, _, rest = status_line.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise _BadResponse(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        status = int(code)
        headers: dict[str, str] = {}
        for line in lines:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if status >= 200 or status == 101:
            break  # 1xx (100 Continue...): an interim answer, the real one follows
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise _BadResponse(f"bad Content-Length {headers['content-length']!r}") from None
        body = await reader.readexactly(length)
    else:  # the body runs to the end of the connection
        body, keep = await reader.read(), False
    return status, headers, _decoded(body, headers.get("content-encoding", "")), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = (await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise _BadResponse(f"bad chunk size {size_line[:20]!r}") from None
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)  # the chunk's CRLF


def _decoded(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip", "deflate"):
        try:
            return zlib.decompress(body, zlib.MAX_WBITS | 32)  # gzip or zlib, detected
        except zlib.error as exc:
            raise _BadResponse(f"undecodable {encoding} body: {exc}") from None
    raise _BadResponse(f"unsupported Content-Encoding {encoding!r}")


def _closed_before_answer(exc: BaseException, started: bool) -> bool:
    """Whether a kept-alive connection turned out closed before any answer came."""
    if isinstance(exc, asyncio.IncompleteReadError):
        return not exc.partial
    return isinstance(exc, (ConnectionResetError, BrokenPipeError)) or (
        not started and isinstance(exc, ConnectionError)
    )


def _status_error(response: _Response) -> openai.APIStatusError:
    """The SDK's exception for an error status, with its message and body."""
    message = f"Error code: {response.status_code}"
    body: object = response.text.strip() or None
    try:
        body = json.loads(response.text)
    except ValueError:
        pass
    else:
        error = body.get("error", body) if isinstance(body, dict) else None
        detail = error.get("message") if isinstance(error, dict) else None
        if isinstance(detail, str) and detail:
            message += f" - {detail}"
    if isinstance(body, dict):
        body = body.get("error", body)  # the SDK keeps the error object as the body
    kind = _STATUS_ERRORS.get(response.status_code)
    if kind is None:
        kind = openai.InternalServerError if response.status_code >= 500 else openai.APIStatusError
    return kind(message, response=cast(Any, response), body=body)


def _proxied(parts: Any) -> bool:
    """Whether an environment proxy applies to this endpoint (the SDK would use it)."""
    proxies = urllib.request.getproxies()
    if not any(key in proxies for key in (parts.scheme, "all")):
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")

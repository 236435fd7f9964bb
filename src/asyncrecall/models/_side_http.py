"""The side query's HTTP exchange, lean: one JSON POST on asyncio streams.

A side query is one small non-streamed POST per user message. Through the OpenAI SDK it
costs many times more CPU on the event loop (request building, the HTTP library's
connection pool, which also does bookkeeping in proportion to its connections) than the
same exchange written directly on asyncio streams (``asyncrecall bench overhead``,
``recall_cpu_us``; figures in ``benchmarks/latency.md`` and ``docs/benchmarks.md``).
Reading the answer through h11 alone was the largest share of what is left, so the
common answer is read by hand (``_side_answer``) and the rest by h11. That CPU runs on
the loop while the agent works towards its own first request, so it is latency the user
sees; with many sessions in one process it is most of the recall's cost.

:class:`SideHTTP` speaks just what a side query needs: HTTP/1.1 (``http`` and
``https``), keep-alive (at most 100 idle connections, each dropped after 5 s idle, as
the SDK's pool does), ``Content-Length`` or chunked answers (gzip or deflate decoded).
An answer of the common shape (``HTTP/1.1``, one valid ``Content-Length``, no
``Transfer-Encoding``, strictly formed lines) is read by hand; any other is handed, with
the bytes read so far, to h11 (a maintained, strict HTTP/1.1 parser: conflicting or bad
framing is a connection error, not a guess), which then reads that connection's later
answers too: whichever reads it, an answer gives the same result, or the same error, as
h11 alone gave (``_side_answer`` says how, and its tests compare the two). The body is
capped at 1 MiB before and after decoding (a side query's answer is capped at 256
tokens). Its headers are the SDK client's own (authorisation, organisation, project,
user agent, custom default headers), checked once for control characters (a CR or LF
would inject a header: refused, as the SDK refuses it), and its failures are the SDK's
exception types, so errors and what an endpoint is learned to refuse are handled exactly
as before. Cancelling the awaiting task aborts the connection: the server sees the side
query hang up. When the cancel came through a cancel signal (recall dropped at a new
user message or the end of a run), a replacement connection is opened at once in the
background, so that the next recall does not connect on its way to the agent's first
request.

It is used only where it can stand in for the SDK without surprise:
:meth:`SideHTTP.for_client` answers ``None`` (keep the SDK) for a client the caller
built (it may carry a transport, proxy or certificates of its own), for a base URL
carrying credentials (``user:password@``: the SDK sends them as Basic authorisation),
when any proxy variable is set (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
``NO_PROXY``, any case: the SDK's rules for them are its own), and when
``ASYNCRECALL_SIDE_HTTP=sdk``. An endpoint that answers a redirect (any 3xx) is handed
to the SDK too (which follows it), that side query and every later one. After
:meth:`SideHTTP.aclose` nothing opens a connection again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast
from urllib.parse import urlsplit

import h11
import openai

try:  # the SDK's own HTTP library: httpx2 from openai 3, httpx before
    import httpx2 as _http
except ImportError:  # pragma: no cover - openai before 3
    import httpx as _http  # type: ignore[no-redef]

from asyncrecall._cancel import cancelled_by_signal
from asyncrecall.models._openai_errors import public_url
from asyncrecall.models._side_answer import (
    BODY_LIMIT,
    HEAD_LIMIT,
    BadResponse,
    ClosedEarly,
    read_answer,
)

__all__ = ["BODY_LIMIT", "SIDE_HTTP_ENV", "SideHTTP"]

#: ``sdk``: send side queries through the OpenAI SDK instead (troubleshooting).
SIDE_HTTP_ENV: Final = "ASYNCRECALL_SIDE_HTTP"
_IDLE_MAX: Final = 100
_IDLE_EXPIRY_S: Final = 5.0
# What describes a body's encoding on the wire: the body an error keeps is decoded.
_ENCODING_HEADERS: Final = frozenset({"content-encoding", "content-length", "transfer-encoding"})
_PROXY_VARIABLES: Final = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})
_JSON: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_JSON_ESCAPED: Final = json.JSONEncoder(separators=(",", ":"))

_STATUS_ERRORS: Final[dict[int, type[openai.APIStatusError]]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


class _Redirected(Exception):
    """The endpoint answered a redirect: the SDK (which follows it) takes over."""


def _request(url: str) -> _http.Request:
    """What the SDK's exceptions keep as ``request``: its HTTP library's own type, since
    the SDK reads it as one (its headers, its stream: openai 3.60 copies them)."""
    return _http.Request("POST", url)


def _response(
    status: int, headers: Mapping[str, str], request: _http.Request, body: bytes
) -> _http.Response:
    """What the SDK's status errors keep as ``response``, in its HTTP library's type.
    ``body`` is already decoded, so the headers that describe the encoding stay out."""
    kept = {name: value for name, value in headers.items() if name not in _ENCODING_HEADERS}
    return _http.Response(status, headers=kept, content=body, request=request)


@dataclass(slots=True)
class _Connection:
    """One socket (reused from one exchange to the next), and h11's view of it once an
    answer on it was handed to h11 (see ``_side_answer``)."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    http: h11.Connection | None = None
    idle_since: float = 0.0


class SideHTTP:
    """POSTs JSON to ``<base_url>/chat/completions`` on a small keep-alive pool.

    ``sdk`` (a client of the same endpoint, without retries) takes over when the
    endpoint answers a redirect."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout: float | None,
        sdk: openai.AsyncOpenAI | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {public_url(base_url)!r}")
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        path = parts.path.rstrip("/") + "/chat/completions"
        self._target = path + (f"?{parts.query}" if parts.query else "")
        self._url = public_url(f"{parts.scheme}://{parts.netloc}{self._target}")
        fields = {"Host": parts.netloc.rpartition("@")[2], **headers, "Connection": "keep-alive"}
        self._header_error = _header_problem(fields)
        # What h11 is told was sent, should an answer be handed to it: the head without a
        # body length, validated once here. The bytes written are the same head with the
        # body's Content-Length and the body (which h11 would frame alike): h11 then
        # expects the answer to a POST.
        self._h11_request: h11.Request | None = None
        # The head as written, up to the body's length: the same for every side query.
        self._head_start = b""
        if self._header_error is None:
            try:
                self._h11_request = h11.Request(
                    method="POST", target=self._target, headers=list(fields.items())
                )
            except h11.LocalProtocolError:
                self._header_error = "a header name or value is not valid HTTP"
            else:
                lines = "".join(f"{name}: {value}\r\n" for name, value in fields.items())
                start = f"POST {self._target} HTTP/1.1\r\n{lines}Content-Length: "
                self._head_start = start.encode("ascii")  # h11 took it: ASCII
        self._timeout = timeout
        self._sdk = sdk
        self._redirected = False
        self._closed = False
        self._ssl: ssl.SSLContext | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: deque[_Connection] = deque()
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
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        if parts.username is not None or parts.password is not None or _proxy_environment():
            return None
        merged = {**client.default_headers, **client.auth_headers}
        headers = {k: v for k, v in merged.items() if isinstance(v, str)}
        return cls(base_url, headers, timeout=timeout, sdk=client.with_options(max_retries=0))

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"idle={len(self._idle)}"
        return f"SideHTTP({self._url!r}, {state})"

    async def post_json(self, body: Mapping[str, Any]) -> Any:
        """POST ``body``; the answer's JSON. Raises the SDK's exception types: a status
        error (4xx, 5xx), a connection error (a header that is not valid HTTP, an answer
        that is not, a closed transport), a timeout; ``ValueError`` for a body that is
        not JSON or is over :data:`BODY_LIMIT`."""
        if self._redirected:
            return await self._post_with_sdk(body)
        if self._header_error is not None:
            problem = ValueError(self._header_error)
            raise openai.APIConnectionError(
                message=self._header_error, request=_request(self._url)
            ) from problem
        payload = _json_body(body)
        try:
            async with asyncio.timeout(self._timeout):
                status, headers, data = await self._exchange(payload)
        except TimeoutError as exc:
            raise openai.APITimeoutError(request=_request(self._url)) from exc
        except _Redirected:
            self._redirected = True  # the SDK from now on: it follows what we do not
            return await self._post_with_sdk(body)
        except OSError as exc:
            raise openai.APIConnectionError(request=_request(self._url)) from exc
        except BadResponse as exc:
            raise openai.APIConnectionError(message=str(exc), request=_request(self._url)) from exc
        text = data.decode("utf-8", errors="replace")
        if not 200 <= status < 300:
            response = _response(status, headers, _request(self._url), data)
            raise _status_error(response, text)
        return json.loads(text)

    async def _post_with_sdk(self, body: Mapping[str, Any]) -> Any:
        if self._sdk is None:
            raise openai.APIConnectionError(
                message="the endpoint answered a redirect",
                request=_request(self._url),
            )
        text: str = await self._sdk.post("/chat/completions", body=cast(Any, body), cast_to=str)
        return json.loads(text)

    async def aclose(self) -> None:
        """Close the idle connections (a replacement being opened too); from now on
        nothing opens a connection."""
        self._closed = True
        spare, self._spare = self._spare, None
        if spare is not None and not spare.done():
            spare.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await spare
        idle, self._idle = self._idle, deque()
        for connection in idle:
            connection.writer.close()
        for connection in idle:
            with contextlib.suppress(Exception):
                await connection.writer.wait_closed()

    # -- one exchange ------------------------------------------------------------------

    async def _exchange(self, payload: bytes) -> tuple[int, dict[str, str], bytes]:
        message = b"%b%d\r\n\r\n%b" % (self._head_start, len(payload), payload)
        request = self._h11_request
        assert request is not None
        while True:
            reused, connection = await self._connection()
            writer = connection.writer
            started = False
            try:
                writer.write(message)
                await writer.drain()
                started = True
                answer = await read_answer(connection.reader, connection.http, request)
            except BaseException as exc:
                writer.transport.abort()  # cancelled or failed: the server sees it go
                if cancelled_by_signal(exc):
                    self._replace_aborted()
                # A kept-alive connection the server closed meanwhile: once more, afresh.
                if reused and _closed_before_answer(exc, started):
                    continue
                raise
            connection.http = answer.http
            if answer.reusable:
                if answer.http is not None:
                    answer.http.start_next_cycle()
                self._release(connection)
            else:
                writer.close()
            if 300 <= answer.status < 400:
                raise _Redirected(answer.status)
            return answer.status, answer.headers, answer.body

    async def _connection(self) -> tuple[bool, _Connection]:
        if self._closed:
            raise BadResponse("the side-query transport is closed")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # another loop's connections cannot be used here
            self._idle.clear()
            self._loop = loop
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if (
                now - connection.idle_since < _IDLE_EXPIRY_S
                and not connection.reader.at_eof()
                and not connection.writer.is_closing()
            ):
                return True, connection
            connection.writer.close()
        return False, await self._open()

    async def _open(self) -> _Connection:
        reader, writer = await asyncio.open_connection(
            self._host,
            self._port,
            ssl=await self._ssl_context() if self._tls else None,
            server_hostname=self._host if self._tls else None,
            limit=HEAD_LIMIT,
        )
        return _Connection(reader, writer)

    def _replace_aborted(self) -> None:
        """A side query dropped through a cancel signal (a new user message, the end of
        a run) had its connection aborted, so that the server stops working on it: open
        its replacement now, in the background, so that the next side query finds a
        connection instead of connecting (and, for HTTPS, shaking hands) on the event
        loop on the way to the agent's first request. One at a time; none when an idle
        connection is there already, none once closed. A bare cancel (``asyncio.run``
        ending with the query out) opens none: nothing would close it.
        """
        if self._closed or self._idle or (self._spare is not None and not self._spare.done()):
            return
        self._spare = asyncio.get_running_loop().create_task(
            self._open_spare(), name="asyncrecall-side-connection"
        )

    async def _open_spare(self) -> None:
        try:
            connection = await self._open()
        except (OSError, ssl.SSLError, TimeoutError):
            return  # the next side query connects, and reports what fails
        self._release(connection)

    def _release(self, connection: _Connection) -> None:
        if self._closed or len(self._idle) >= _IDLE_MAX:
            connection.writer.close()
        else:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)

    async def _ssl_context(self) -> ssl.SSLContext:
        """The trust store for HTTPS, one per process and trust setting: loading one
        parses the system's certificates, far too long for the loop, so it is built
        once, in a worker thread, never on the loop (and never again for the next model
        of the process)."""
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


def _json_body(body: Mapping[str, Any]) -> bytes:
    """``body`` encoded as the SDK encodes a request's JSON (compact separators, text as
    UTF-8 rather than ``\\u`` escapes), so a server sees the same bytes whichever path
    sends the side query. Text that UTF-8 cannot hold (a lone surrogate, as a file read
    with surrogate escapes gives) is escaped instead, as before, where the SDK fails."""
    text = _JSON.encode(body)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _JSON_ESCAPED.encode(body).encode()


def _header_problem(fields: Mapping[str, str]) -> str | None:
    """Why these header fields cannot be sent (a control character in a value: a CR or
    LF would start a header of its own), naming the header but not its value (it may be
    the API key); ``None`` when they can."""
    for name, value in fields.items():
        if any((ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F for char in value):
            return (
                f"the {name} header holds a control character (CR, LF or another): "
                "check the API key and the default headers"
            )
    return None


def _closed_before_answer(exc: BaseException, started: bool) -> bool:
    """Whether a kept-alive connection turned out closed before any answer came."""
    return isinstance(exc, (ClosedEarly, ConnectionResetError, BrokenPipeError)) or (
        not started and isinstance(exc, ConnectionError)
    )


def _status_error(response: _http.Response, text: str) -> openai.APIStatusError:
    """The SDK's exception for an error status, with its message and body."""
    message = f"Error code: {response.status_code}"
    body: object = text.strip() or None
    try:
        body = json.loads(text)
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
    return kind(message, response=response, body=body)


def _proxy_environment() -> bool:
    """Whether any proxy variable is set (to anything but blanks): the SDK's HTTP
    library then decides where the request goes, by rules of its own."""
    return any(
        name.lower() in _PROXY_VARIABLES and value.strip() for name, value in os.environ.items()
    )

"""Reading a side query's answer: the common shape by hand, everything else by h11.

Almost every answer to a side query has one shape: ``HTTP/1.1 NNN reason``, a few header
lines, one ``Content-Length``, no ``Transfer-Encoding``, the body. :func:`read_answer`
reads that shape itself, and hands every other answer to h11 (a maintained, strict
HTTP/1.1 parser): the bytes read so far are fed to an h11 connection told of the
request, which reads on from there and keeps that connection from then on, so an answer
off the common shape is read, or refused, exactly as h11 reads or refuses it. h11 alone
spends most of the side query's exchange CPU on building and validating its events.

The hand reader accepts a subset of what h11 accepts and gives the same result for it;
the test of that is differential (``tests/models/test_side_answer.py``: a corpus of
tricky answers and generated ones, read both ways). It is strict (RFC 9112), and hands
over whenever anything differs from the common shape:

* a status line that is exactly ``HTTP/1.1``, a space, a status of 200-599 other than
  204 and 304 (1xx, bodiless and unusual statuses: h11), then an optional reason of
  visible characters, spaces and tabs;
* lines ended by CR LF; a bare LF or CR anywhere in the head hands over (h11 reads a
  bare LF as a line end, so an answer with one may be complete for it already);
* header names that are tokens directly followed by the colon (no whitespace before it,
  no continuation line), values of visible characters, spaces and tabs only (h11 also
  lets other control characters through: those hand over);
* exactly one ``Content-Length`` line, 1-7 ASCII digits, at most :data:`BODY_LIMIT`
  (duplicated, comma-separated, over-long or larger lengths hand over; h11 refuses the
  conflicting ones, merges equal ones and cuts larger bodies at the limit as before);
* no ``Transfer-Encoding`` (chunked answers are h11's) and at most one ``Connection``
  line (h11 merges several); these three names are looked for anywhere in the head, so
  a line that only names one in its value hands over too;
* nothing after the body in what was read (a pipelined or stray byte: h11 keeps it for
  the next answer on that connection, as before); a head over :data:`HEAD_LIMIT` still
  incomplete, a connection closed mid-answer: h11, which raises what it raised.

The connection is kept for the next side query when the answer is HTTP/1.1 without
``Connection: close`` (h11's rule). The body is decoded as its ``Content-Encoding``
says (gzip or deflate), to at most :data:`BODY_LIMIT`, whichever reader framed it.
"""

from __future__ import annotations

import re
import zlib
from typing import Final, NamedTuple, Protocol

import h11

__all__ = [
    "BODY_LIMIT",
    "HEAD_LIMIT",
    "Answer",
    "BadResponse",
    "ClosedEarly",
    "Reader",
    "TooLarge",
    "read_answer",
]

#: The most a side query's answer may hold, before and after decoding (bytes).
BODY_LIMIT: Final = 1 << 20
#: The most an answer's head may hold while incomplete (h11's ``max_incomplete_event_size``).
HEAD_LIMIT: Final = 1 << 16
_READ_SIZE: Final = 1 << 16
_END: Final = h11.EndOfMessage()

# The status line of the common shape; a reason of visible characters, spaces and tabs.
_STATUS_LINE: Final = re.compile(rb"HTTP/1\.1 ([2-5][0-9][0-9])(?: [\t\x20-\x7e\x80-\xff]*)?\r\n")
# Header lines (a token, the colon, a value of visible characters, spaces and tabs) and
# the blank line ending the head. Each repetition ends at the line's CR LF: no backtracking.
_FIELD_LINES: Final = re.compile(
    rb"(?:[-!#$%&'*+.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*\r\n)*\r\n"
)
# One header line of a head the pattern above has accepted (decoded as latin-1).
_FIELD: Final = re.compile(r"([^:]+):([^\r]*)\r\n")
_STATUS_PREFIX: Final = b"HTTP/1.1 "
_BARE_LF: Final = re.compile(rb"(?<!\r)\n")
_NO_BODY_STATUSES: Final = frozenset({204, 304})
_LENGTH_DIGITS: Final = len(str(BODY_LIMIT))


class BadResponse(Exception):
    """The server's answer is not HTTP/1.1 (h11 refused it), or not a body we decode."""


class TooLarge(ValueError):
    """The answer's body is over :data:`BODY_LIMIT` (mapped as a malformed response)."""


class ClosedEarly(ConnectionError):
    """The server closed the connection before sending a single byte of an answer."""


class Reader(Protocol):
    """Where an answer's bytes come from (an :class:`asyncio.StreamReader`)."""

    async def read(self, n: int = -1, /) -> bytes: ...


class Answer(NamedTuple):
    """One answer: status, headers (lower-case names; of repeated names the last),
    the decoded body, and whether its connection may carry the next request."""

    status: int
    headers: dict[str, str]
    body: bytes
    reusable: bool
    #: The h11 connection that read it, kept with the socket from then on (``None``: the
    #: common shape, read by hand).
    http: h11.Connection | None


class _Head(NamedTuple):
    status: int
    headers: dict[str, str]
    body_start: int
    length: int
    reusable: bool


async def read_answer(reader: Reader, http: h11.Connection | None, request: h11.Request) -> Answer:
    """The answer to ``request`` (sent already) from ``reader``.

    ``http``: the connection's h11 state, if an earlier answer on it was handed to h11
    (then h11 reads this one too). Raises :class:`ClosedEarly` when the connection
    closes before a byte came, :class:`BadResponse` for an answer h11 refuses or a
    body that does not decode, :class:`TooLarge` for a body over :data:`BODY_LIMIT`.
    Reads as h11 would: the same sizes, and only while the answer is incomplete.
    """
    if http is not None:
        http.send(request)
        http.send(_END)
        return await _read_with_h11(reader, http, received=0)
    data = await reader.read(_READ_SIZE)
    if not data:
        raise ClosedEarly("closed before answering")
    blank = data.find(b"\r\n\r\n")
    if blank < 0:  # the head came in pieces
        buffer = bytearray(data)
        checked = 0
        while blank < 0:
            if not _may_follow(buffer, checked):
                return await _hand_over(reader, request, buffer, eof=False)
            checked = len(buffer)
            more = await reader.read(_READ_SIZE)
            if not more:
                return await _hand_over(reader, request, buffer, eof=True)
            buffer += more
            blank = buffer.find(b"\r\n\r\n", max(0, checked - 3))
        data = bytes(buffer)
    head = _parse_head(data, blank)
    if head is None:
        return await _hand_over(reader, request, data, eof=False)
    end = head.body_start + head.length
    if len(data) < end:  # the body comes in pieces
        parts, size = [data], len(data)
        while size < end:
            more = await reader.read(_READ_SIZE)
            if not more:
                return await _hand_over(reader, request, b"".join(parts), eof=True)
            parts.append(more)
            size += len(more)
        data = b"".join(parts)
    if len(data) > end:  # bytes after the answer: h11 keeps them for the next one
        return await _hand_over(reader, request, data, eof=False)
    body = _decoded(data[head.body_start :], head.headers.get("content-encoding", ""))
    return Answer(head.status, head.headers, body, head.reusable, None)


def _parse_head(data: bytes, blank: int) -> _Head | None:
    """The head at the start of ``data``, its blank line at ``blank``, if it is of the
    common shape (else ``None``)."""
    status_line = _STATUS_LINE.match(data, 0, blank + 2)
    if status_line is None:
        return None
    fields_start = status_line.end()
    if _FIELD_LINES.fullmatch(data, fields_start, blank + 4) is None:
        return None
    text = data[fields_start : blank + 2].decode("latin-1")
    headers = {name.lower(): value.strip(" \t") for name, value in _FIELD.findall(text)}
    lowered = text.lower()
    length = headers.get("content-length")
    if (
        length is None
        # One such line: the names are tokens and the values hold no line end, so a
        # count of 1 with the header present is that line (more: h11 merges or refuses).
        or lowered.count("content-length:") != 1
        or "transfer-encoding:" in lowered
        or lowered.count("connection:") > 1
        or not 0 < len(length) <= _LENGTH_DIGITS
        or not (length.isascii() and length.isdigit())
        or int(length) > BODY_LIMIT
    ):
        return None
    status = int(status_line[1])
    if status in _NO_BODY_STATUSES:
        return None
    connection = headers.get("connection", "").lower()
    reusable = "close" not in connection or "close" not in (
        token.strip(" \t") for token in connection.split(",")
    )
    return _Head(status, headers, blank + 4, int(length), reusable)


def _may_follow(buffer: bytearray, checked: int) -> bool:
    """Whether an incomplete head could still be of the common shape, and h11 too would
    wait for more of it: it starts as a status line does, holds no bare LF (h11 would
    read a blank line there; ``buffer[:checked]`` was seen to hold none) and is within
    :data:`HEAD_LIMIT`."""
    return (
        len(buffer) <= HEAD_LIMIT
        and buffer[: len(_STATUS_PREFIX)] == _STATUS_PREFIX[: len(buffer)]
        and _BARE_LF.search(buffer, checked) is None
    )


async def _hand_over(
    reader: Reader, request: h11.Request, data: bytes | bytearray, *, eof: bool
) -> Answer:
    """h11 reads the answer from here, given what was read of it (and the end of the
    connection, if that came)."""
    http = h11.Connection(h11.CLIENT, HEAD_LIMIT)
    http.send(request)
    http.send(_END)
    http.receive_data(bytes(data))
    if eof:
        http.receive_data(b"")
    return await _read_with_h11(reader, http, received=len(data))


async def _read_with_h11(reader: Reader, http: h11.Connection, *, received: int) -> Answer:
    """One answer, read through h11. Interim answers (1xx) are skipped."""
    status = 0
    headers: dict[str, str] = {}
    body = bytearray()
    while True:
        try:
            event = http.next_event()
        except h11.RemoteProtocolError as exc:
            raise BadResponse(f"not an HTTP/1.1 answer we can read: {exc}") from None
        if event is h11.NEED_DATA:
            data = await reader.read(_READ_SIZE)
            if not data and not received:
                raise ClosedEarly("closed before answering")
            received += len(data)
            http.receive_data(data)
        elif isinstance(event, h11.Response):
            status = event.status_code
            headers = {
                name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers
            }
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > BODY_LIMIT:
                raise TooLarge(f"an answer over {BODY_LIMIT >> 20} MiB")
        elif isinstance(event, h11.EndOfMessage):
            decoded = _decoded(bytes(body), headers.get("content-encoding", ""))
            reusable = http.our_state is h11.DONE and http.their_state is h11.DONE
            return Answer(status, headers, decoded, reusable, http)
        elif not isinstance(event, h11.InformationalResponse):
            raise BadResponse(f"the connection ended mid-answer ({type(event).__name__})")


def _decoded(body: bytes, encoding: str) -> bytes:
    """``body`` decoded as its Content-Encoding says, to at most :data:`BODY_LIMIT`."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise BadResponse(f"unsupported Content-Encoding {encoding!r}")
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, detected
    try:
        data = inflater.decompress(body, BODY_LIMIT + 1)
    except zlib.error as exc:
        raise BadResponse(f"undecodable {encoding} body: {exc}") from None
    if len(data) > BODY_LIMIT:
        raise TooLarge(f"a {encoding} answer inflating to over {BODY_LIMIT >> 20} MiB")
    if not inflater.eof:
        raise BadResponse(f"a truncated {encoding} body")
    return data

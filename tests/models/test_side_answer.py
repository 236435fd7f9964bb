"""The side query's answer read by hand or by h11 (``models/_side_answer.py``): the same.

Every answer here, a corpus of tricky ones and generated ones, is read twice from the
same bytes cut into the same reads: by :func:`read_answer` as a fresh connection reads
it (the common shape by hand, anything else handed to h11), and by h11 alone, as every
answer was read before the hand reader came (an h11 connection told of the request).
Both must give the same answers (status, headers, decoded body, whether the connection
is kept), then the same next answer from what follows on the connection, or the same
exception with the same message, or both wait for more bytes. The corpus also says
which answers the hand reader must read itself, so the comparison is not vacuous.

The reads never wait (the bytes are all there, or the reader says it has no more yet),
so each read runs to its end in one step, without an event loop. Real sockets: the
side-query tests (``test_side_http.py``) and the model tests, over ``LocalServer``.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Coroutine, Sequence
from typing import Any

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncrecall.models._side_answer import BODY_LIMIT, HEAD_LIMIT, read_answer

REQUEST = h11.Request(
    method="POST",
    target="/v1/chat/completions",
    headers=[
        ("Host", "127.0.0.1:8000"),
        ("Content-Type", "application/json"),
        ("Connection", "keep-alive"),
    ],
)
BODY = json.dumps(
    {"choices": [{"index": 0, "message": {"role": "assistant", "content": '{"ok": true}'}}]}
).encode()


class _Starved(Exception):
    """The reader has no more bytes yet (the connection stays open): the read waits."""


class Chunks:
    """A connection's bytes as its reads return them: each read the next chunk, then the
    end of the connection (``eof``) or nothing yet (:class:`_Starved`)."""

    def __init__(self, chunks: Sequence[bytes], *, eof: bool) -> None:
        self._chunks = [chunk for chunk in chunks if chunk]
        self._eof = eof
        self.reads = 0

    async def read(self, n: int = -1, /) -> bytes:
        self.reads += 1
        if self._chunks:
            chunk = self._chunks.pop(0)
            assert len(chunk) <= n, "a read returns at most what it asks for"
            return chunk
        if self._eof:
            return b""
        raise _Starved


def _run(step: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never waits (its reads return at once) to its end."""
    try:
        step.send(None)
    except StopIteration as done:
        return done.value
    step.close()
    raise AssertionError("the read waited on something other than its reader")


def read_both_ways(
    chunks: Sequence[bytes], *, eof: bool, answers: int = 2
) -> tuple[list[object], list[object], list[bool]]:
    """The outcomes of reading up to ``answers`` answers from one connection's bytes:
    with the hand reader, with h11 alone, and which answers the hand reader read itself."""
    outcomes: dict[bool, list[object]] = {True: [], False: []}
    by_hand: list[bool] = []
    reads: dict[bool, int] = {}
    for lean in (True, False):
        reader = Chunks(chunks, eof=eof)
        http = None if lean else h11.Connection(h11.CLIENT, HEAD_LIMIT)
        for _ in range(answers):
            try:
                answer = _run(read_answer(reader, http, REQUEST))
            except _Starved:
                outcomes[lean].append("waits for more")
                break
            except Exception as exc:
                outcomes[lean].append((type(exc).__name__, str(exc)))
                break
            outcomes[lean].append((answer.status, answer.headers, answer.body, answer.reusable))
            if lean:
                by_hand.append(answer.http is None)
            if not answer.reusable:
                break
            http = answer.http
            if http is not None:
                http.start_next_cycle()
        reads[lean] = reader.reads
    assert reads[True] == reads[False], "both ways read the connection alike"
    return outcomes[True], outcomes[False], by_hand


def _answer(head: str, body: bytes = b"") -> bytes:
    return head.encode("latin-1") + body


def _ok(*headers: str, body: bytes = BODY, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", *headers]
    return _answer("\r\n".join(lines) + "\r\n\r\n", body)


N = len(BODY)
PACKED = gzip.compress(BODY)
CHUNKED = f"{N:x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n"

#: Answers the hand reader must read itself.
COMMON = {
    "local server": _ok("Content-Type: application/json", f"Content-Length: {N}",
                        "Connection: keep-alive"),
    "llama.cpp": _ok("Access-Control-Allow-Origin: ", f"Content-Length: {N}",
                     "Content-Type: application/json; charset=utf-8",
                     "Keep-Alive: timeout=5, max=100", "Server: llama.cpp"),
    "uvicorn": _ok("date: Sun, 06 Dec 2026 20:00:00 GMT", "server: uvicorn",
                   f"content-length: {N}", "content-type: application/json"),
    "two set-cookie lines": _ok(f"Content-Length: {N}", "Set-Cookie: a=1; path=/",
                                "set-cookie: b=2; HttpOnly", "CF-RAY: 8f-AMS"),
    "connection close": _ok(f"Content-Length: {N}", "Connection: close"),
    "close among tokens": _ok(f"Content-Length: {N}", "Connection: Keep-Alive,  CLOSE "),
    "closed is not close": _ok(f"Content-Length: {N}", "Connection: closed"),
    "upper-case names": _ok(f"CONTENT-LENGTH: {N}", "CONTENT-TYPE: application/json"),
    "no reason": _answer(f"HTTP/1.1 200\r\nContent-Length: {N}\r\n\r\n", BODY),
    "empty reason": _answer(f"HTTP/1.1 200 \r\nContent-Length: {N}\r\n\r\n", BODY),
    "reason with tab and obs-text": _ok(f"Content-Length: {N}", status="200 Fine\tby m\xe9"),
    "values with spaces and tabs": _ok(f"Content-Length:\t {N} \t", "X-A: \t a  b\tc \t",
                                       "X-Empty:", "X-Blank: \t "),
    "obs-text value": _ok(f"Content-Length: {N}", "X-Name: caf\xe9"),
    "leading zeros": _ok("Content-Length: 0000", body=b""),
    "empty body": _ok("Content-Length: 0", body=b""),
    "not found": _ok("Content-Length: 41", body=b'{"error": {"message": "no such model x"}}',
                     status="404 Not Found"),
    "server error": _ok("Content-Length: 5", body=b"oops!", status="500 Internal Server Error"),
    "redirect": _ok("Location: /v2/chat/completions", "Content-Length: 0", body=b"",
                    status="307 Temporary Redirect"),
    "gzip": _ok(f"Content-Length: {len(PACKED)}", "Content-Encoding: gzip", body=PACKED),
    "deflate": _ok(f"Content-Length: {len(zlib.compress(BODY))}", "Content-Encoding: Deflate",
                   body=zlib.compress(BODY)),
    "identity": _ok(f"Content-Length: {N}", "Content-Encoding: identity"),
    "unsupported encoding": _ok(f"Content-Length: {N}", "Content-Encoding: br"),
    "bad gzip": _ok(f"Content-Length: {N}", "Content-Encoding: gzip"),
    "truncated gzip": _ok(f"Content-Length: {len(PACKED) - 4}", "Content-Encoding: gzip",
                          body=PACKED[:-4]),
    "a word in a value": _ok(f"Content-Length: {N}", "X-Note: chunked, close"),
    "status 599": _ok(f"Content-Length: {N}", status="599 Whatever"),
    "proxy-connection": _ok(f"Content-Length: {N}", "Proxy-Connection: close"),
}  # fmt: skip

#: Answers off the common shape: read by h11 (or refused by it), whichever reader.
OFF = {
    "equal lengths twice": _ok(f"Content-Length: {N}", f"Content-Length: {N}"),
    "conflicting lengths": _ok(f"Content-Length: {N}", f"Content-Length: {N + 5}"),
    "shorter length last": _ok(f"Content-Length: {N + 5}", f"Content-Length: {N}"),
    "equal lengths in a list": _ok(f"Content-Length: {N}, {N}"),
    "conflicting lengths in a list": _ok(f"Content-Length: {N}, 3"),
    "plus sign": _ok(f"Content-Length: +{N}"),
    "negative": _ok("Content-Length: -1"),
    "hex length": _ok("Content-Length: 0x10"),
    "space in length": _ok(f"Content-Length: {N} 0"),
    "empty length": _ok("Content-Length: "),
    "superscript digit": _ok("Content-Length: \xb2", body=b"ok"),
    "21 digits": _ok("Content-Length: " + "0" * 19 + "12", body=b"abcdefghijkl"),
    "8 digits": _ok("Content-Length: 00000012", body=b"abcdefghijkl"),
    "over the body limit": _ok(f"Content-Length: {BODY_LIMIT + 1}", body=b" " * (BODY_LIMIT + 1)),
    "no length": _ok("Content-Type: application/json"),
    "chunked": _ok("Transfer-Encoding: chunked", body=CHUNKED),
    "chunked and a length": _ok("Transfer-Encoding: chunked", f"Content-Length: {N}", body=CHUNKED),
    "gzip transfer coding": _ok("Transfer-Encoding: gzip", f"Content-Length: {N}"),
    "negative chunk size": _ok("Transfer-Encoding: chunked",
                               body=b"-1\r\n" + BODY + b"\r\n0\r\n\r\n"),
    "HTTP/1.0": _answer(f"HTTP/1.0 200 OK\r\nContent-Length: {N}\r\n\r\n", BODY),
    "HTTP/1.0 keep-alive": _answer(
        f"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: {N}\r\n\r\n", BODY),
    "HTTP/2.0": _answer(f"HTTP/2.0 200 OK\r\nContent-Length: {N}\r\n\r\n", BODY),
    "lower-case version": _answer(f"http/1.1 200 OK\r\nContent-Length: {N}\r\n\r\n", BODY),
    "two spaces": _answer(f"HTTP/1.1  200 OK\r\nContent-Length: {N}\r\n\r\n", BODY),
    "two-digit status": _answer(f"HTTP/1.1 20 OK\r\nContent-Length: {N}\r\n\r\n", BODY),
    "status 099": _ok(f"Content-Length: {N}", status="099 Low"),
    "status 600": _ok(f"Content-Length: {N}", status="600 High"),
    "status 999": _ok(f"Content-Length: {N}", status="999 Top"),
    "continue first": _answer("HTTP/1.1 100 Continue\r\n\r\n") + _ok(f"Content-Length: {N}"),
    "switching protocols": _ok("Upgrade: h2c", "Connection: Upgrade", body=b"",
                               status="101 Switching Protocols"),
    "no content with a body": _ok(f"Content-Length: {N}", status="204 No Content"),
    "not modified": _ok(f"Content-Length: {N}", body=b"", status="304 Not Modified"),
    "obs-fold": _ok("X-A: one", " two", f"Content-Length: {N}"),
    "fold first": _ok(" X-A: one", f"Content-Length: {N}"),
    "space before colon": _ok(f"Content-Length : {N}"),
    "tab before colon": _ok(f"Content-Length\t: {N}"),
    "no colon": _ok("X-A one", f"Content-Length: {N}"),
    "empty name": _ok(": x", f"Content-Length: {N}"),
    "not a token": _ok("X(A): 1", f"Content-Length: {N}"),
    "bare LF everywhere": _answer(f"HTTP/1.1 200 OK\nContent-Length: {N}\n\n", BODY),
    "one bare LF": _answer(f"HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: {N}\r\n\r\n", BODY),
    "LF CRLF end": _answer(f"HTTP/1.1 200 OK\r\nContent-Length: {N}\n\r\n", BODY),
    "bare CR": _ok("X-A: 1\r2", f"Content-Length: {N}"),
    "NUL in a value": _ok("X-A: a\x00b", f"Content-Length: {N}"),
    "control character in a value": _ok("X-A: a\x01b", f"Content-Length: {N}"),
    "DEL in a value": _ok("X-A: a\x7fb", f"Content-Length: {N}"),
    "vertical tab in a value": _ok("X-A: a\x0bb", f"Content-Length: {N}"),
    "form feed around a value": _ok("X-A: \x0cab", f"Content-Length: {N}"),
    "NUL in the reason": _ok(f"Content-Length: {N}", status="200 O\x00K"),
    "leading CRLF": b"\r\n" + _ok(f"Content-Length: {N}"),
    "leading space": b" " + _ok(f"Content-Length: {N}"),
    "not HTTP": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "two connection lines": _ok(f"Content-Length: {N}", "Connection: keep-alive",
                                "Connection: close"),
    "length named in a value": _ok(f"Content-Length: {N}", "X-Note: content-length: 3"),
    "coding named in a value": _ok(f"Content-Length: {N}", "X-Note: transfer-encoding: x"),
    "bytes after the body": _ok(f"Content-Length: {N}") + b"junk",
    "two answers at once": _ok(f"Content-Length: {N}") + _ok("Content-Length: 2", body=b"{}"),
    "closed mid-body": _ok(f"Content-Length: {N + 10}"),
    "closed mid-head": b"HTTP/1.1 200 OK\r\nContent-Le",
    "closed after the status": b"HTTP/1.1 200 OK\r\n",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMON))
def test_the_common_shape_is_read_by_hand_as_h11_reads_it(name: str) -> None:
    """An answer of the common shape (HTTP/1.1, one valid Content-Length, no
    Transfer-Encoding, CR LF lines, token names, visible values) is read by hand, with
    the very status, headers, body, error and keep-alive that h11 gives."""
    for eof in (False, True):
        lean, h11_alone, by_hand = read_both_ways([COMMON[name]], eof=eof)
        assert lean == h11_alone
        if isinstance(lean[0], tuple) and lean[0][0] == "BadResponse":
            continue  # a body that does not decode: the hand reader framed it, h11 too
        assert by_hand[:1] == [True]


@pytest.mark.parametrize("name", sorted(OFF))
def test_an_answer_off_the_common_shape_is_read_or_refused_as_h11_does(name: str) -> None:
    """Anything else (duplicate or odd lengths, chunked, other versions, 1xx, 204 and
    304, folded lines, bare LF or CR, control characters, bytes after the body, a
    connection closed early) is handed to h11 with the bytes read so far: the same
    answers, the same error and message, the same wait for more, the same next answer."""
    for eof in (False, True):
        lean, h11_alone, by_hand = read_both_ways([OFF[name]], eof=eof)
        assert lean == h11_alone
        assert not any(by_hand[:1])


@pytest.mark.parametrize("name", ["llama.cpp", "gzip", "two answers at once", "chunked"])
def test_an_answer_cut_anywhere_reads_the_same(name: str) -> None:
    """The same answer arriving in two reads, cut at every byte, then in one-byte reads:
    the same outcome both ways (and the connection read as many times)."""
    raw = {**COMMON, **OFF}[name]
    for cut in range(1, len(raw)):
        for eof in (False, True):
            lean, h11_alone, _ = read_both_ways([raw[:cut], raw[cut:]], eof=eof)
            assert lean == h11_alone, cut
    lean, h11_alone, _ = read_both_ways([raw[i : i + 1] for i in range(len(raw))], eof=False)
    assert lean == h11_alone


def test_the_second_answer_on_a_connection_reads_the_same() -> None:
    """Keep-alive: after an answer read by hand, and after one handed to h11 (which then
    reads the rest of that connection's answers), the next answer is the same."""
    plain = COMMON["local server"]
    for first in (plain, OFF["chunked"], OFF["equal lengths twice"], OFF["bytes after the body"]):
        for second in (plain, OFF["chunked"], OFF["not HTTP"], b""):
            lean, h11_alone, _ = read_both_ways([first, second], eof=True, answers=3)
            assert lean == h11_alone


def test_an_incomplete_head_over_the_limit_is_refused_as_h11_refuses_it() -> None:
    """A head still incomplete past 64 KiB: h11's error, at the same read; a longer head
    complete within the reads that h11 would take is read (as h11 reads it)."""
    big = _ok("X-Big: " + "a" * (100 << 10), f"Content-Length: {N}")
    lean, h11_alone, _ = read_both_ways([big[:40000], big[40000:80000], big[80000:]], eof=False)
    assert lean == h11_alone and "too long" in str(lean[0])
    fits = _ok("X-Big: " + "a" * (70 << 10), f"Content-Length: {N}")
    lean, h11_alone, by_hand = read_both_ways([fits[:65536], fits[65536:]], eof=False)
    assert lean == h11_alone and lean[0][0] == 200  # type: ignore[index]
    assert by_hand == [True]


def test_a_body_at_the_limit_is_read_by_hand() -> None:
    """1 MiB of body (the cap) in 64 KiB reads: read by hand, as h11 reads it."""
    raw = _ok(f"Content-Length: {BODY_LIMIT}", body=b" " * BODY_LIMIT)
    reads = [raw[i : i + (1 << 16)] for i in range(0, len(raw), 1 << 16)]
    lean, h11_alone, by_hand = read_both_ways(reads, eof=False)
    assert lean == h11_alone and by_hand == [True]


def test_a_connection_closed_before_any_byte_is_closed_early() -> None:
    lean, h11_alone, _ = read_both_ways([], eof=True)
    assert lean == h11_alone == [("ClosedEarly", "closed before answering")]


# -- generated answers --------------------------------------------------------------------

_TOKEN = st.text(alphabet="-!#$%&'*+.^_`|~0123456789azAZ", min_size=1, max_size=8)
_VISIBLE = st.text(
    alphabet=st.characters(codec="latin-1", exclude_categories=["Cc"], exclude_characters="\x7f"),
    max_size=10,
)
_ODD_CHARACTERS = st.characters(max_codepoint=0xFF)
_FIELDS = st.sampled_from(
    [("Content-Type", "application/json"), ("Connection", "keep-alive"), ("Connection", "close"),
     ("Connection", "Keep-Alive, close"), ("Keep-Alive", "timeout=5, max=100"),
     ("Set-Cookie", "a=1"), ("Content-Encoding", "identity"), ("Proxy-Connection", "close"),
     ("Server", "llama.cpp"), ("X-Empty", "")]
)  # fmt: skip
_TROUBLE = st.one_of(
    st.sampled_from(
        [("Content-Length", "0"), ("Content-Length", "5, 5"), ("content-length", "+5"),
         ("Content-Length", "\xb2"), ("Content-Length", "1048577"), ("Content-Length", "00000005"),
         ("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "gzip"), ("Connection", "close"),
         ("Content-Encoding", "gzip"), ("Content-Encoding", "br"), ("Content-Length ", "5"),
         (" X-A", "1"), ("", "x"), ("X(A)", "1"), ("X-A", "a\x01b"), ("X-A", "a\x7f"),
         ("X-A", "a\rb"), ("X-A", "a\nb"), ("X-A", "a\x00b"), ("X-A", "\x0b")]
    ),
    st.tuples(_TOKEN, st.text(alphabet=_ODD_CHARACTERS, max_size=6)),
)  # fmt: skip
_STATUS_LINES = st.one_of(
    st.sampled_from(
        ["HTTP/1.1 200 OK", "HTTP/1.1 200", "HTTP/1.1 201 Created", "HTTP/1.1 404 Not Found",
         "HTTP/1.1 500 Error", "HTTP/1.1 307 Moved", "HTTP/1.1 200 "]
    ),
    st.builds("HTTP/1.1 {:03d} {}".format, st.integers(200, 599), _VISIBLE),
)  # fmt: skip
_ODD_STATUS_LINES = st.one_of(
    st.sampled_from(
        ["HTTP/1.1 204 No Content", "HTTP/1.1 304 Not Modified", "HTTP/1.1 100 Continue",
         "HTTP/1.0 200 OK", "HTTP/2.0 200 OK", "HTTP/1.1 600 X", "HTTP/1.1 099 X",
         "HTTP/1.1  200 OK", "http/1.1 200 OK", "HTTP/1.1 101 Switching"]
    ),
    st.builds("HTTP/1.1 {:03d} {}".format, st.integers(0, 999),
              st.text(alphabet=_ODD_CHARACTERS, max_size=6)),
)  # fmt: skip
_OWS = st.sampled_from(["", " ", " ", "\t", "  ", " \t"])
_NEWLINES = st.sampled_from(["\n", "\r", "\r\r\n", "\n\r", " \r\n"])


@st.composite
def answers(draw: st.DrawFn) -> tuple[list[bytes], bool]:
    """An answer of the common shape (token names, visible values, one right length),
    in half the cases then made odd in one way or more (a troublesome header, an odd
    status line, line end, byte changed, added or removed); maybe more bytes after it;
    all cut into reads anywhere; and whether the connection then closes."""
    body = draw(st.sampled_from([BODY, b"", b"{}", PACKED, b"x" * 70]))
    headers = draw(st.lists(st.one_of(_FIELDS, st.tuples(_TOKEN, _VISIBLE)), max_size=5))
    length = ("Content-Length", str(len(body)))
    headers.insert(draw(st.integers(0, len(headers))), length)
    if body is PACKED and draw(st.booleans()):
        headers.append(("Content-Encoding", "gzip"))
    status = _STATUS_LINES
    ends = ["\r\n"] * (len(headers) + 2)  # the status line's, each header's, the blank line
    odd = draw(st.booleans())
    if odd and draw(st.booleans()):
        for trouble in draw(st.lists(_TROUBLE, min_size=1, max_size=2)):
            headers.insert(draw(st.integers(0, len(headers))), trouble)
            ends.append("\r\n")
    if odd and draw(st.booleans()):
        status = _ODD_STATUS_LINES
    if odd and draw(st.booleans()):
        ends[draw(st.integers(0, len(ends) - 1))] = draw(_NEWLINES)
    lines = [draw(status)] + [f"{name}:{draw(_OWS)}{value}{draw(_OWS)}" for name, value in headers]
    if odd and draw(st.booleans()):  # a folded line
        lines.insert(draw(st.integers(1, len(lines))), draw(st.sampled_from([" a", "\tb", "  "])))
        ends.append("\r\n")
    raw = "".join(map(str.__add__, [*lines, ""], ends)).encode("latin-1") + body
    if odd and draw(st.booleans()):  # a byte changed, added or removed
        at = draw(st.integers(0, len(raw) - 1))
        byte = bytes([draw(st.integers(0, 255))])
        raw = draw(st.sampled_from([raw[:at] + byte + raw[at + 1 :], raw[:at] + byte + raw[at:],
                                    raw[:at] + raw[at + 1 :]]))  # fmt: skip
    raw += draw(st.sampled_from([b"", b"", b"", b"junk", COMMON["uvicorn"], OFF["chunked"]]))
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(raw) - 1)), max_size=4, unique=True)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    return chunks, draw(st.booleans())


@settings(max_examples=600, derandomize=True, deadline=None)
@given(answers())
def test_generated_answers_read_the_same_both_ways(case: tuple[list[bytes], bool]) -> None:
    """Generated answers, valid and malformed, cut into reads anywhere: read by
    :func:`read_answer` and by h11 alone, the same outcomes, answer after answer."""
    chunks, eof = case
    lean, h11_alone, _ = read_both_ways(chunks, eof=eof)
    assert lean == h11_alone

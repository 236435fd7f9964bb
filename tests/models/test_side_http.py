"""Side queries on asyncio streams (``models/_side_http.py``): what the wire shows.

The model tests (errors, learned refusals, cancellation hang-ups) already run side
queries through it against the suite's :class:`LocalServer`, and the interop tests
against llama.cpp's own server. Here: the HTTP it must read that LocalServer never
sends (chunked, gzip, a kept-alive connection the server closed, a broken status line),
connection reuse, and where the SDK stays in charge (a caller's client, a proxy, the
``ASYNCRECALL_SIDE_HTTP=sdk`` switch), each told apart by what the server receives.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import logging
import os
import shutil
import subprocess
import sys
import tracemalloc
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pytest

from asyncrecall import (
    CancelSignal,
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelProtocolError,
    RecallPrefetcher,
)
from asyncrecall.memory import FolderStore, ModelSelector, Recaller
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

GUARD = 10.0  # seconds; a hang guard only
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def _completion(content: str) -> bytes:
    return json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    ).encode()


@dataclass
class RawServer:
    """A real HTTP/1.1 server on a socket whose answers the test writes byte by byte."""

    answer: Callable[[int], bytes]
    close_after_answer: bool = False
    #: This request (1-based) gets no answer: the server closes its connection instead.
    drop: int = 0
    #: When set, answers wait for it.
    hold: asyncio.Event | None = None
    connections: int = 0
    #: Connections the server has not seen closed yet.
    open: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait (with a hang guard) until ``predicate`` holds for the connections and
        requests seen."""
        async with asyncio.timeout(GUARD), self.changed:
            await self.changed.wait_for(predicate)

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        await self._notify()
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                self.requests.append(head + await reader.readexactly(length))
                await self._notify()
                if len(self.requests) == self.drop:
                    break
                if self.hold is not None:
                    await self.hold.wait()
                writer.write(self.answer(len(self.requests)))
                await writer.drain()
                if self.close_after_answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self.open -= 1
            await self._notify()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
async def raw() -> AsyncIterator[RawServer]:
    state = RawServer(answer=lambda n: b"")
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    async with server:
        yield state


def _ok(body: bytes, *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", *extra]
    if not any(h.lower().startswith("transfer-encoding") for h in extra):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _ask(base_url: str) -> object:
    async with OpenAIModel(model="side", base_url=base_url, max_retries=0) as model:
        async with asyncio.timeout(GUARD):
            return await model.generate_json(system="s", prompt="p", schema=SCHEMA, schema_name="x")


async def _ask_twice(base_url: str, *, pause: float = 0.0) -> list[object]:
    """Two side queries from one model (so over its kept-alive connection, if any)."""
    values = []
    async with OpenAIModel(model="side", base_url=base_url, max_retries=0) as model:
        for _ in range(2):
            async with asyncio.timeout(GUARD):
                values.append(
                    await model.generate_json(
                        system="s", prompt="p", schema=SCHEMA, schema_name="x"
                    )
                )
            await asyncio.sleep(pause)
    return values


async def test_one_connection_serves_successive_side_queries(raw: RawServer) -> None:
    raw.answer = lambda n: _ok(_completion('{"ok": true}'))
    async with OpenAIModel(model="side", base_url=raw.base_url, max_retries=0) as model:
        for _ in range(3):
            value = await model.generate_json(
                system="s", prompt="p", schema=SCHEMA, schema_name="x"
            )
            assert value == {"ok": True}
    assert len(raw.requests) == 3 and raw.connections == 1
    assert raw.requests[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"Authorization: Bearer " in raw.requests[0]


def _selection(n: int) -> bytes:
    """Request 1 gets no answer (it is cancelled); later ones select nothing."""
    return b"" if n == 1 else _ok(_completion('{"selected_memories": []}'))


async def _recall_dropped_by_signal(
    raw: RawServer, model: OpenAIModel, root: Path, *, how: str = "signal"
) -> None:
    """A recall whose side query is out, dropped through its cancel signal: directly,
    or by the prefetcher at a new user message (which also cancels the recall's task)."""
    store = FolderStore(root)
    store.save_memory("note", "a note", "project", "body", origin="user")
    manager = Recaller(store, ModelSelector(model, fallback=None))
    if how == "prefetcher":
        async with RecallPrefetcher(manager) as prefetcher:
            prefetcher.start("conversation", "q")
            await raw.until(lambda: bool(raw.requests))
            prefetcher.cancel("conversation", "superseded")
        return
    signal = CancelSignal()
    recall = asyncio.create_task(manager.recall("q", cancel=signal))
    await raw.until(lambda: bool(raw.requests))
    signal.cancel("new user message")
    assert (await recall).prompt == ""


@pytest.mark.parametrize("how", ["signal", "prefetcher"])
async def test_a_dropped_side_querys_connection_is_replaced_in_the_background(
    raw: RawServer, tmp_path: Path, how: str
) -> None:
    """Dropping a recall aborts its side query's connection (the server must see it
    go); a replacement is opened right then, off the next recall's way, and the next
    side query is sent on it instead of connecting first."""
    raw.answer = _selection
    async with OpenAIModel(model="side", base_url=raw.base_url, max_retries=0) as model:
        await _recall_dropped_by_signal(raw, model, tmp_path / "memory", how=how)
        await raw.until(lambda: raw.connections == 2)  # before any second query
        value = await model.generate_json(system="s", prompt="p", schema=SCHEMA, schema_name="x")
    assert value == {"selected_memories": []}
    assert len(raw.requests) == 2 and raw.connections == 2


async def test_a_closed_model_leaves_no_connection_open(raw: RawServer, tmp_path: Path) -> None:
    """A model closed right after a dropped side query leaves nothing open, a
    replacement being opened included."""
    raw.answer = _selection
    model = OpenAIModel(model="side", base_url=raw.base_url, max_retries=0)
    await _recall_dropped_by_signal(raw, model, tmp_path / "memory")
    await model.aclose()
    await raw.until(lambda: raw.open == 0)
    await asyncio.sleep(0.1)  # a replacement that escaped the close would connect now
    assert raw.open == 0


_EXIT_MID_QUERY = """
import asyncio
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

with LocalServer() as server:
    server.set_default("side", Reply(json={"ok": True}, first_token_delay=5))
    model = OpenAIModel(model="side", base_url=server.base_url, max_retries=0)

    async def main() -> None:
        asyncio.create_task(
            model.generate_json(system="s", prompt="p", schema={}, schema_name="x")
        )
        await asyncio.to_thread(server.wait_for, timeout=10)  # the side query is out

    asyncio.run(main())  # ends with the query in flight: asyncio.run cancels it
    import gc
    gc.collect()
"""


def test_a_program_that_ends_mid_side_query_leaves_no_connection_open() -> None:
    """A bare cancel (here ``asyncio.run`` cancelling what is left at its end, the
    model never closed) opens no replacement connection behind the closing loop:
    Python's development mode reports no unclosed transport."""
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", _EXIT_MID_QUERY],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "unclosed" not in done.stderr and "destroyed but it is pending" not in done.stderr


async def test_a_chunked_gzip_answer_is_read(raw: RawServer) -> None:
    packed = gzip.compress(_completion('{"ok": false}'))
    chunks = b"".join(
        f"{len(part):x}\r\n".encode() + part + b"\r\n"
        for part in (packed[:7], packed[7:20], packed[20:])
    )
    raw.answer = lambda n: _ok(
        chunks + b"0\r\n\r\n", "Transfer-Encoding: chunked", "Content-Encoding: gzip"
    )
    assert await _ask(raw.base_url) == {"ok": False}


async def test_answers_read_by_hand_and_by_h11_share_one_kept_alive_connection(
    raw: RawServer,
) -> None:
    """A plain answer (read by hand), a chunked one (handed to h11, which keeps the
    connection from then on), then plain ones again: every side query answered, all on
    one kept-alive connection."""

    def answer(n: int) -> bytes:
        body = _completion(f'{{"ok": {"true" if n % 2 else "false"}}}')
        if n == 2:
            return _ok(f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n",
                       "Transfer-Encoding: chunked")  # fmt: skip
        return _ok(body)

    raw.answer = answer
    async with OpenAIModel(model="side", base_url=raw.base_url, max_retries=0) as model:
        values = [
            await model.generate_json(system="s", prompt="p", schema=SCHEMA, schema_name="x")
            for _ in range(4)
        ]
    assert values == [{"ok": True}, {"ok": False}, {"ok": True}, {"ok": False}]
    assert len(raw.requests) == 4 and raw.connections == 1


async def test_the_body_goes_out_as_the_sdk_encodes_it(
    raw: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The side query's JSON is written as the SDK writes it (compact, non-ASCII text as
    UTF-8): a server sees the very same bytes whichever path sends the side query."""
    raw.answer = lambda n: _ok(_completion('{"ok": true}'))
    prompt = 'café; 数据库 ✓ "quoted"\n\ttabbed \\ \x7f'
    for switch in ("", "sdk"):
        monkeypatch.setenv("ASYNCRECALL_SIDE_HTTP", switch)
        async with OpenAIModel(model="side", base_url=raw.base_url, max_retries=0) as model:
            async with asyncio.timeout(GUARD):
                await model.generate_json(system="s", prompt=prompt, schema=SCHEMA, schema_name="x")
    fast, sdk = (request.split(b"\r\n\r\n", 1)[1] for request in raw.requests)
    assert not _raw_by_sdk(raw.requests[0]) and _raw_by_sdk(raw.requests[1])
    assert fast == sdk
    assert "数据库".encode() in fast and b", " not in fast and b'": ' not in fast
    assert json.loads(fast)["messages"][-1]["content"] == prompt


async def test_a_lone_surrogate_in_the_prompt_goes_out_as_valid_utf8(raw: RawServer) -> None:
    """Text UTF-8 cannot hold (a lone surrogate, as a file read with surrogate escapes
    gives) goes out escaped, the body still valid UTF-8 JSON of the same text."""
    raw.answer = lambda n: _ok(_completion('{"ok": true}'))
    prompt = "bad byte \udcff here, 数据库"
    async with OpenAIModel(model="side", base_url=raw.base_url, max_retries=0) as model:
        async with asyncio.timeout(GUARD):
            await model.generate_json(system="s", prompt=prompt, schema=SCHEMA, schema_name="x")
    (request,) = raw.requests
    body = request.split(b"\r\n\r\n", 1)[1].decode("utf-8")  # strict: valid UTF-8
    assert json.loads(body)["messages"][-1]["content"] == prompt


async def test_a_kept_alive_connection_the_server_closed_is_replaced(raw: RawServer) -> None:
    """The server answers keep-alive, then closes: the next side query goes out afresh
    (once), not as an error."""
    raw.answer = lambda n: _ok(_completion('{"ok": true}'))
    raw.close_after_answer = True
    # A pause between the two: the server's close reaches us (either way works).
    assert await _ask_twice(raw.base_url, pause=0.05) == [{"ok": True}] * 2
    assert len(raw.requests) == 2 and raw.connections == 2


async def test_a_request_the_server_drops_on_a_kept_alive_connection_goes_again(
    raw: RawServer,
) -> None:
    """The race of a keep-alive timeout: the server closes the reused connection on
    receiving the request, before any answer. The side query goes out once more, on a
    new connection; a new connection that fails is an error at once."""
    raw.answer = lambda n: _ok(_completion('{"ok": true}'))
    raw.drop = 2
    assert await _ask_twice(raw.base_url) == [{"ok": True}] * 2
    assert len(raw.requests) == 3 and raw.connections == 2
    raw.drop, raw.connections = 4, 0
    with pytest.raises(ModelConnectionError):
        await _ask(raw.base_url)  # a fresh model: a fresh connection, dropped
    assert raw.connections == 1


async def test_an_answer_that_is_not_http_is_a_connection_error(raw: RawServer) -> None:
    raw.answer = lambda n: b"SSH-2.0-OpenSSH_9.6\r\n\r\n"
    with pytest.raises(ModelConnectionError) as caught:
        await _ask(raw.base_url)
    assert "status line" in str(caught.value.__cause__.__cause__)  # type: ignore[union-attr]


async def test_an_error_status_is_the_sdks_exception(
    local_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 404 with an OpenAI error body: the SDK's NotFoundError (its body the error
    object), mapped to the very ModelNotFoundError line the SDK's own exchange gives."""
    errors = []
    for switch in ("", "sdk"):
        monkeypatch.setenv("ASYNCRECALL_SIDE_HTTP", switch)
        local_server.script("side", Reply(status=404))
        with pytest.raises(ModelNotFoundError) as caught:
            await _ask(local_server.base_url)
        errors.append(caught.value)
    lean, sdk = errors
    assert isinstance(lean.__cause__, openai.NotFoundError)
    assert isinstance(sdk.__cause__, openai.NotFoundError)
    assert lean.__cause__.body == sdk.__cause__.body
    assert isinstance(lean.__cause__.body, dict) and "message" in lean.__cause__.body
    assert str(lean) == str(sdk) and "\n" not in str(lean)


def _sent_by_the_sdk(local_server: LocalServer) -> bool:
    """The SDK's HTTP library asks for compressed answers; the stream writer never does."""
    (request,) = local_server.requests
    return "accept-encoding" in {name.lower() for name in request.headers}


async def test_the_sdk_sends_side_queries_for_a_callers_client(
    local_server: LocalServer,
) -> None:
    local_server.script("side", Reply(json={"ok": True}))
    client = openai.AsyncOpenAI(base_url=local_server.base_url, api_key="k", max_retries=0)
    try:
        model = OpenAIModel(model="side", base_url=local_server.base_url, client=client)
        await model.generate_json(system="s", prompt="p", schema=SCHEMA, schema_name="x")
    finally:
        await client.close()
    assert _sent_by_the_sdk(local_server)


async def test_our_own_client_sends_them_on_streams(local_server: LocalServer) -> None:
    local_server.script("side", Reply(json={"ok": True}))
    assert await _ask(local_server.base_url) == {"ok": True}
    assert not _sent_by_the_sdk(local_server)


async def test_the_switch_keeps_the_sdk(
    local_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCRECALL_SIDE_HTTP", "sdk")
    local_server.script("side", Reply(json={"ok": True}))
    assert await _ask(local_server.base_url) == {"ok": True}
    assert _sent_by_the_sdk(local_server)


@pytest.mark.parametrize(
    "variable", ["HTTP_PROXY", "https_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY", "Http_Proxy"]
)
def test_any_proxy_variable_keeps_the_sdk(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    """The SDK's HTTP library honours proxy variables by rules of its own (``NO_PROXY``
    matching included), so the stream writer stands aside whenever any of them is set,
    in any case, whatever the endpoint; a blank one is no proxy (for the SDK too)."""
    from asyncrecall.models._side_http import SideHTTP

    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name)
    client = openai.AsyncOpenAI(base_url="http://10.1.2.3:8000/v1", api_key="k")
    assert SideHTTP.for_client(client, "http://localhost:8000/v1", timeout=None) is not None
    monkeypatch.setenv(variable, " ")
    assert SideHTTP.for_client(client, "http://localhost:8000/v1", timeout=None) is not None
    monkeypatch.setenv(variable, "localhost" if "no" in variable.lower() else "http://p.example:1")
    assert SideHTTP.for_client(client, "http://localhost:8000/v1", timeout=None) is None
    assert SideHTTP.for_client(client, "http://10.1.2.3:8000/v1", timeout=None) is None


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (made by the ``openssl`` command)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


async def test_https_side_queries_trust_ssl_cert_file_and_load_it_once_off_the_loop(
    tls_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over real TLS: the certificate named by SSL_CERT_FILE is trusted (an unknown one
    is a connection error); the trust store is loaded once per process, in a worker
    thread (costly CPU that must not stall the loop), and shared by later models."""
    import ssl
    import threading

    from asyncrecall.models import _side_http

    cert, key = tls_files
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    state = RawServer(answer=lambda n: _ok(_completion('{"ok": true}')))
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    base_url = f"https://127.0.0.1:{port}/v1"
    loads: list[str] = []
    real = _side_http._load_trust

    def recorded(trust: Any) -> ssl.SSLContext:
        loads.append(threading.current_thread().name)
        return real(trust)

    monkeypatch.setattr(_side_http, "_load_trust", recorded)
    monkeypatch.setattr(_side_http, "_SSL_CONTEXTS", {})
    async with server:
        with pytest.raises(ModelConnectionError):
            await _ask(base_url)  # certifi's bundle does not know this certificate
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert await _ask(base_url) == {"ok": True}
        assert await _ask(base_url) == {"ok": True}  # a new model: the same trust store
    assert len(loads) == 2  # certifi's, then SSL_CERT_FILE's: each once
    assert threading.current_thread().name not in loads
    assert len(state.requests) == 2


# -- where the stream writer must agree with the SDK, or stand aside -------------------


@pytest.fixture(params=["fast", "sdk"])
def side_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test using it runs twice: side queries on the stream writer, then through the
    SDK (``ASYNCRECALL_SIDE_HTTP=sdk``); where they must agree, both runs pass alike."""
    monkeypatch.setenv("ASYNCRECALL_SIDE_HTTP", "" if request.param == "fast" else "sdk")
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            monkeypatch.delenv(name)
    return str(request.param)


def _raw_by_sdk(request: bytes) -> bool:
    """The SDK's HTTP library asks for compressed answers; the stream writer never does."""
    return b"\r\naccept-encoding:" in request.lower()


async def test_a_redirect_is_followed_as_the_sdk_follows_it(raw: RawServer, side_path: str) -> None:
    """A 307 (the endpoint moved) is followed, the body sent again to the new place, as
    the SDK does; the stream writer hands that query, and every later one, to the SDK."""
    port = raw.port

    def answer(n: int) -> bytes:
        if raw.requests[n - 1].startswith(b"POST /v1/"):
            location = f"http://127.0.0.1:{port}/v2/chat/completions"
            return (
                f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\n"
                "Content-Length: 0\r\n\r\n"
            ).encode()
        return _ok(_completion('{"ok": true}'))

    raw.answer = answer
    assert await _ask_twice(raw.base_url) == [{"ok": True}] * 2
    lines = [request.split(b"\r\n", 1)[0] for request in raw.requests]
    v1, v2 = b"POST /v1/chat/completions HTTP/1.1", b"POST /v2/chat/completions HTTP/1.1"
    # The stream writer's first query meets the 307 and hands itself to the SDK whole.
    handed = [v1] if side_path == "fast" else []
    assert lines == [*handed, v1, v2, v1, v2]
    bodies = [json.loads(request.split(b"\r\n\r\n", 1)[1]) for request in raw.requests]
    assert all(body == bodies[0] for body in bodies)  # the body went again each time
    by_sdk = [_raw_by_sdk(request) for request in raw.requests]
    assert by_sdk == [side_path == "sdk"] + [True] * (len(lines) - 1)


async def test_credentials_in_the_base_url_are_sent_as_basic_auth(
    local_server: LocalServer, side_path: str
) -> None:
    """``http://alice:s3cret@host/v1``: the side query carries them as Basic
    authorisation, as the SDK sends them (not the placeholder key as Bearer: a server
    checking them answers 401)."""
    base_url = local_server.base_url.replace("http://", "http://alice:s3cret@")
    local_server.script("side", Reply(json={"ok": True}))
    assert await _ask(base_url) == {"ok": True}
    expected = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    assert [r.headers.get("authorization") for r in local_server.requests] == [expected]
    assert _sent_by_the_sdk(local_server)  # the SDK's own Basic authorisation


async def test_no_error_log_line_or_repr_shows_the_base_urls_credentials(
    local_server: LocalServer, side_path: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No text a user may see or log names ``alice:s3cret``: the model's repr, a 401's
    error line, a recall's fallback warning, a refused connection's error line."""
    base_url = local_server.base_url.replace("http://", "http://alice:s3cret@")
    local_server.script("side", Reply(status=401), Reply(status=500))
    texts: list[str] = []
    async with OpenAIModel(model="side", base_url=base_url, max_retries=0) as model:
        texts.append(repr(model))
        with pytest.raises(ModelAuthError) as caught:
            await model.generate_json(system="s", prompt="p", schema=SCHEMA, schema_name="x")
        texts.append(str(caught.value))
        store = FolderStore(tmp_path / "memory")
        store.save_memory("note", "a note", "project", "body", origin="user")
        manager = Recaller(store, ModelSelector(model))
        with caplog.at_level(logging.WARNING):
            await manager.recall("q")
    warnings = [r.getMessage() for r in caplog.records if "fell back" in r.getMessage()]
    assert len(warnings) == 1 and "HTTP 500" in warnings[0]
    texts += warnings
    with pytest.raises(ModelConnectionError) as refused:
        await _ask(f"http://alice:s3cret@127.0.0.1:{_closed_port()}/v1")
    texts.append(str(refused.value))
    assert texts[1].startswith(local_server.base_url + " refused the API key")
    for text in texts:
        assert "s3cret" not in text and "alice" not in text, text


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_no_proxy_is_read_as_the_sdk_reads_it(
    raw: RawServer, side_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``NO_PROXY=.localhost`` with an HTTP proxy set: the SDK's HTTP library exempts
    only sub-domains of ``localhost``, so a side query to ``localhost`` itself goes
    through the proxy (the server here), on either path (the standard library would
    have exempted it, and the stream writer gone straight to a closed port)."""
    raw.answer = lambda n: _ok(_completion('{"ok": true}'))
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{raw.port}")
    monkeypatch.setenv("NO_PROXY", ".localhost")
    endpoint = f"localhost:{_closed_port()}"
    assert await _ask(f"http://{endpoint}/v1") == {"ok": True}
    (request,) = raw.requests
    assert request.startswith(f"POST http://{endpoint}/v1/chat/completions HTTP/1.1".encode())


async def test_a_control_character_in_a_header_is_refused_before_sending(
    raw: RawServer, side_path: str
) -> None:
    """An API key holding CR/LF would inject a header of its own: the side query is
    refused with a connection error naming the header, not its value (the key), and
    nothing reaches the server, as with the SDK."""
    raw.answer = lambda n: _ok(_completion('{"ok": true}'))
    key = "sk-secret\r\nX-Injected: 1"
    async with OpenAIModel(model="side", base_url=raw.base_url, api_key=key, max_retries=0) as m:
        with pytest.raises(ModelConnectionError) as caught:
            async with asyncio.timeout(GUARD):
                await m.generate_json(system="s", prompt="p", schema=SCHEMA, schema_name="x")
    assert raw.requests == []
    if side_path == "fast":
        assert raw.connections == 0  # refused before connecting
    assert "holds a control character (CR, LF or another)" in str(caught.value)
    assert "sk-secret" not in str(caught.value)


def _head(*lines: str) -> bytes:
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


_BODY = _completion('{"ok": true}')
_MALFORMED = {
    # Two lengths that disagree (a request-smuggling shape): which is the body?
    "longer-length-last": _head(
        "HTTP/1.1 200 OK", f"Content-Length: {len(_BODY)}", f"Content-Length: {len(_BODY) + 50}"
    )
    + _BODY,
    "shorter-length-last": _head(
        "HTTP/1.1 200 OK", f"Content-Length: {len(_BODY) + 50}", f"Content-Length: {len(_BODY)}"
    )
    + _BODY,
    "negative-chunk-size": _head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked")
    + b"-1\r\n"
    + _BODY
    + b"\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("shape", sorted(_MALFORMED))
async def test_malformed_framing_is_a_connection_error_at_once(
    raw: RawServer, side_path: str, shape: str
) -> None:
    """An answer whose framing is not valid HTTP/1.1 (conflicting Content-Length
    headers, a negative chunk size) is a connection error
    at once, on either path: not read one way or the other, not waited on until the
    deadline, not a bare ValueError."""
    raw.answer = lambda n: _MALFORMED[shape]
    with pytest.raises(ModelConnectionError):
        await _ask(raw.base_url)


def _padded(size: int) -> bytes:
    """A valid completion of about ``size`` bytes (JSON whitespace makes up the rest)."""
    body = _completion('{"ok": true}')
    return body[:-1] + b" " * (size - len(body)) + b"}"


@pytest.mark.parametrize("encoding", ["identity", "gzip", "deflate"])
async def test_an_answer_over_1_mib_is_a_protocol_error(raw: RawServer, encoding: str) -> None:
    """A side query's answer is capped at 256 tokens, so one over 1 MiB (sent so, or
    inflating to it: a 64 MiB body gzips to 64 KiB) is refused as malformed, without
    being inflated whole on the event loop; 1 MiB itself is read."""
    import zlib

    big = _padded(64 << 20)

    def encode(body: bytes) -> bytes:
        if encoding == "gzip":
            return gzip.compress(body, compresslevel=1)
        if encoding == "deflate":
            return zlib.compress(body, 1)
        return body

    sent = encode(_padded(2 << 20) if encoding == "identity" else big)
    raw.answer = lambda n: _ok(sent, f"Content-Encoding: {encoding}")
    del big
    tracemalloc.start()
    try:
        with pytest.raises(ModelProtocolError) as caught:
            await _ask(raw.base_url)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "over 1 MiB" in str(caught.value)
    assert peak < 8 << 20  # never the 64 MiB inflated
    at_cap = encode(_padded(1 << 20))
    raw.answer = lambda n: _ok(at_cap, f"Content-Encoding: {encoding}")
    assert await _ask(raw.base_url) == {"ok": True}


async def test_an_endless_answer_is_cut_at_1_mib() -> None:
    """A server that never ends its chunked answer: the side query fails once 1 MiB
    came, and hangs up (the server sees its writes fail well before 100 MiB)."""
    sent = 0
    gone = asyncio.Event()

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal sent
        await reader.readuntil(b"\r\n\r\n")
        writer.write(_head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked"))
        chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
        try:
            while sent < 100 << 20:
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
        except ConnectionError:
            pass
        finally:
            writer.close()
            gone.set()

    server = await asyncio.start_server(endless, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        with pytest.raises(ModelProtocolError, match="over 1 MiB"):
            await _ask(f"http://127.0.0.1:{port}/v1")
        async with asyncio.timeout(GUARD):
            await gone.wait()
    assert sent < 100 << 20


async def test_a_closed_transport_opens_nothing(raw: RawServer, tmp_path: Path) -> None:
    """After ``aclose()`` nothing opens a connection: not the replacement for a side
    query dropped afterwards (its task is never made), not a later side query (a
    connection error)."""
    raw.answer = _selection
    model = OpenAIModel(model="side", base_url=raw.base_url, max_retries=0)
    store = FolderStore(tmp_path / "memory")
    store.save_memory("note", "a note", "project", "body", origin="user")
    manager = Recaller(store, ModelSelector(model, fallback=None))
    signal = CancelSignal()
    recall = asyncio.create_task(manager.recall("q", cancel=signal))
    await raw.until(lambda: bool(raw.requests))
    await model.aclose()
    signal.cancel("new user message")  # the query is out: dropping it aborts its connection
    assert (await recall).prompt == ""
    spares = [t for t in asyncio.all_tasks() if t.get_name() == "asyncrecall-side-connection"]
    assert spares == []
    with pytest.raises(ModelConnectionError):
        await model.generate_json(system="s", prompt="p", schema=SCHEMA, schema_name="x")
    await raw.until(lambda: raw.open == 0)
    assert raw.connections == 1


async def test_an_answer_that_comes_after_close_does_not_keep_its_connection(
    raw: RawServer,
) -> None:
    """A side query still out when the model is closed gets its answer, and its
    connection is then closed, not kept for a later query that cannot come."""
    raw.answer = lambda n: _ok(_completion('{"ok": true}'))
    raw.hold = asyncio.Event()
    model = OpenAIModel(model="side", base_url=raw.base_url, max_retries=0)
    query = asyncio.create_task(
        model.generate_json(system="s", prompt="p", schema=SCHEMA, schema_name="x")
    )
    await raw.until(lambda: bool(raw.requests))
    await model.aclose()
    raw.hold.set()
    async with asyncio.timeout(GUARD):
        assert await query == {"ok": True}
    await raw.until(lambda: raw.open == 0)


def test_the_cli_error_line_does_not_show_the_base_urls_credentials(tmp_path: Path) -> None:
    """The real CLI, its endpoint refusing connections: the error line names the base
    URL without ``alice:s3cret@``."""
    base_url = f"http://alice:s3cret@127.0.0.1:{_closed_port()}/v1"
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "run", "hi", "--base-url", base_url,
         "--model", "m", "--memory-dir", str(tmp_path / "memory")],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    assert "cannot reach http://127.0.0.1:" in done.stderr
    assert "s3cret" not in done.stderr + done.stdout and "alice" not in done.stderr


async def test_a_url_with_credentials_in_the_servers_message_is_not_repeated(
    local_server: LocalServer, side_path: str
) -> None:
    """A server's error message that names a URL with credentials (a proxy naming its
    upstream) is reported without them."""
    message = "upstream http://bob:hunter2@10.0.0.1/v1 failed"
    local_server.script("side", Reply(status=502, error_message=message))
    with pytest.raises(ModelError) as caught:
        await _ask(local_server.base_url)
    assert "upstream http://10.0.0.1/v1 failed" in str(caught.value)
    assert "hunter2" not in str(caught.value)

"""LocalServer: real HTTP/1.1, SSE, scripting, records and hang-up detection.

Most tests speak raw HTTP (``http.client``, raw sockets) so the server is checked on
its own, not through the client under test elsewhere.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from asyncrecall.models import FunctionCall
from asyncrecall.testing import LocalServer, RecordedRequest, Reply

GUARD = 5.0


@pytest.fixture
def conn(local_server: LocalServer) -> Iterator[http.client.HTTPConnection]:
    connection = http.client.HTTPConnection("127.0.0.1", local_server.port, timeout=GUARD)
    yield connection
    connection.close()


def post(
    conn: http.client.HTTPConnection, body: dict[str, Any]
) -> tuple[int, bytes, http.client.HTTPResponse]:
    conn.request(
        "POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"}
    )
    response = conn.getresponse()
    return response.status, response.read(), response


def sse_chunks(raw: bytes) -> list[dict[str, Any]]:
    lines = [line for line in raw.decode().split("\n\n") if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line[len("data: ") :]) for line in lines[:-1]]


def chat(model: str = "m", *, stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
        **extra,
    }


def test_base_url_and_lifecycle() -> None:
    server = LocalServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    server.start()
    try:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        with pytest.raises(RuntimeError, match="already started"):
            server.start()
    finally:
        server.stop()
    server.stop()  # idempotent


def test_scripts_are_fifo_per_model_and_keep_alive(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    """Replies are used in order per model name; one connection carries several requests."""
    local_server.script("a", "a1", Reply(text="a2"))
    local_server.script("b", "b1")
    assert local_server.pending("a") == 2
    answers = []
    for model in ("a", "b", "a"):
        status, body, _ = post(conn, chat(model))
        assert status == 200
        answers.append(json.loads(body)["choices"][0]["message"]["content"])
    assert answers == ["a1", "b1", "a2"]
    assert [r.model for r in local_server.requests] == ["a", "b", "a"]
    assert all(r.status == 200 and r.settled and not r.disconnected for r in local_server.requests)


def test_unknown_model_is_an_openai_style_404(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    status, body, _ = post(conn, chat("ghost"))
    assert status == 404
    error = json.loads(body)["error"]
    assert error["message"] == "model 'ghost' not found"
    assert error["type"] == "not_found_error"
    local_server.script("m", "once")
    post(conn, chat("m"))
    status, body, _ = post(conn, chat("m"))
    assert status == 404
    assert "no scripted reply left" in json.loads(body)["error"]["message"]


def test_default_reply_and_callable(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    """A default answers when the script is empty; a callable gets the recorded request."""
    seen: list[RecordedRequest] = []

    def answer(request: RecordedRequest) -> Reply:
        seen.append(request)
        return Reply(text=f"#{request.index} for {request.model}")

    local_server.set_default("m", answer)
    local_server.set_default("plain", "always this")
    _, body, _ = post(conn, chat("m"))
    assert json.loads(body)["choices"][0]["message"]["content"] == "#0 for m"
    _, body, _ = post(conn, chat("plain"))
    assert json.loads(body)["choices"][0]["message"]["content"] == "always this"
    assert seen == [local_server.requests[0]]


def test_failing_default_answers_500_and_is_kept(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    def broken(request: RecordedRequest) -> Reply:
        raise RuntimeError("oops")

    local_server.set_default("m", broken)
    status, body, _ = post(conn, chat("m"))
    assert status == 500
    assert "oops" in json.loads(body)["error"]["message"]
    assert [str(e) for e in local_server.errors] == ["oops"]


def test_models_endpoint(local_server: LocalServer, conn: http.client.HTTPConnection) -> None:
    local_server.script("b", "x")
    local_server.set_default("a", "y")
    conn.request("GET", "/v1/models")
    data = json.loads(conn.getresponse().read())
    assert [m["id"] for m in data["data"]] == ["a", "b"]


def test_non_stream_completion_with_tool_calls_and_usage(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    local_server.script(
        "m",
        Reply(
            tool_calls=[FunctionCall("id1", "glob", {"p": 1}), ("grep", {"q": 2})],
            prompt_tokens=7,
            completion_tokens=3,
        ),
    )
    _, body, _ = post(conn, chat("m"))
    completion = json.loads(body)
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in choice["message"]["tool_calls"]
    ] == [("id1", "glob", {"p": 1}), ("call_0_1", "grep", {"q": 2})]
    assert completion["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def test_stream_splits_text_and_interleaves_call_arguments(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    """SSE chunks: text in pieces; two calls' arguments split and interleaved by index."""
    local_server.script(
        "m",
        Reply(text="abcde", tool_calls=[("f", {"x": "1234"}), ("g", {"y": "5678"})], chunk_size=4),
    )
    status, raw, response = post(
        conn, chat("m", stream=True, stream_options={"include_usage": True})
    )
    assert status == 200
    assert response.getheader("Content-Type") == "text/event-stream"
    chunks = sse_chunks(raw)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert [d["content"] for d in deltas if d.get("content")] == ["abcd", "e"]
    arg_pieces = [
        (tc["index"], tc["function"]["arguments"])
        for d in deltas
        for tc in d.get("tool_calls", ())
        if tc["function"].get("arguments")
    ]
    indices = [index for index, _ in arg_pieces]
    assert indices[:4] == [0, 1, 0, 1]  # interleaved
    for index, expected in ((0, {"x": "1234"}), (1, {"y": "5678"})):
        pieces = [piece for i, piece in arg_pieces if i == index]
        assert len(pieces) > 1  # really split
        assert json.loads("".join(pieces)) == expected
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["total_tokens"] > 0
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_usage_chunk_only_when_asked(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    local_server.script("m", "x", Reply(text="y", usage=False))
    _, raw, _ = post(conn, chat("m", stream=True))
    assert all("usage" not in c for c in sse_chunks(raw))
    _, raw, _ = post(conn, chat("m", stream=True, stream_options={"include_usage": True}))
    assert all("usage" not in c for c in sse_chunks(raw))


def test_rejections_do_not_use_up_the_reply(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    local_server.script("m", Reply(json={"a": 1}, reject_json_schema=True))
    schema_format = {"type": "json_schema", "json_schema": {"name": "n", "schema": {}}}
    status, _, _ = post(conn, chat("m", response_format=schema_format))
    assert status == 400
    status, body, _ = post(conn, chat("m", response_format={"type": "json_object"}))
    assert status == 200
    assert json.loads(json.loads(body)["choices"][0]["message"]["content"]) == {"a": 1}
    assert [r.is_side_query for r in local_server.requests] == [True, True]


def test_first_token_delay_is_before_the_first_byte(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    local_server.script("m", Reply(text="x", first_token_delay=0.05))
    post(conn, chat("m", stream=True))
    request = local_server.requests[0]
    assert request.first_byte_at is not None and request.finished_at is not None
    assert request.first_byte_at - request.arrived_at >= 0.05
    assert request.finished_at >= request.first_byte_at


def _raw_request(port: int, body: dict[str, Any]) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=GUARD)
    payload = json.dumps(body).encode()
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    return sock


@pytest.mark.parametrize(
    "reply",
    [
        Reply(hang=True),
        Reply(gate=threading.Event()),
        Reply(first_token_delay=60),
        Reply(text="abc", chunk_size=1, stall_after=2),
        Reply(text="abc", chunk_size=1, chunk_delay=60),
    ],
    ids=["hang", "gate", "delay", "stall", "chunk-delay"],
)
def test_client_hang_up_is_detected_while_waiting_or_streaming(
    local_server: LocalServer, reply: Reply
) -> None:
    """Whatever the server is waiting on, a client hang-up is noticed and recorded."""
    local_server.script("m", reply)
    sock = _raw_request(local_server.port, chat("m", stream=True))
    if reply.stall_after or reply.chunk_delay:
        local_server.wait_for(lambda r: r.first_byte_at is not None)
    request = local_server.wait_for(lambda r: r.model == "m")
    sock.close()
    local_server.wait_disconnected(request)
    assert request.finished_at is None


def test_gate_releases_the_reply(local_server: LocalServer) -> None:
    gate = threading.Event()
    local_server.script("m", Reply(text="released", gate=gate))
    with _raw_request(local_server.port, chat("m")) as sock:
        request = local_server.wait_for(lambda r: r.model == "m")
        assert request.first_byte_at is None
        gate.set()
        data = b""
        while b"released" not in data:
            chunk = sock.recv(65536)
            assert chunk
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")


def test_malformed_request_gets_400(local_server: LocalServer) -> None:
    with socket.create_connection(("127.0.0.1", local_server.port), timeout=GUARD) as sock:
        sock.sendall(b"NONSENSE\r\n\r\n")
        assert sock.recv(1024).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", local_server.port), timeout=GUARD) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n[1,2]")
        assert sock.recv(1024).startswith(b"HTTP/1.1 400")


def test_unknown_route_is_404(conn: http.client.HTTPConnection) -> None:
    conn.request("GET", "/v1/nothing")
    assert conn.getresponse().status == 404


def test_wait_for_times_out_with_a_summary(local_server: LocalServer) -> None:
    with pytest.raises(TimeoutError, match="no request matched"):
        local_server.wait_for(lambda r: False, timeout=0.01)


async def test_await_for_does_not_block_the_loop(local_server: LocalServer) -> None:
    """The async waiter lets the loop run the client that makes the awaited request."""
    local_server.script("m", "x")

    async def client() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", local_server.port)
        payload = json.dumps(chat("m")).encode()
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        data = await reader.read()
        writer.close()
        await writer.wait_closed()
        return data

    task = asyncio.create_task(client())
    request = await local_server.await_for(lambda r: r.finished_at is not None)
    assert request.model == "m"
    assert (await task).startswith(b"HTTP/1.1 200")
    with pytest.raises(TimeoutError):
        await local_server.await_for(lambda r: False, timeout=0.01)


def test_reset_forgets_everything(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    local_server.script("m", "x", "y")
    local_server.set_default("d", "z")
    post(conn, chat("m"))
    local_server.reset()
    assert local_server.requests == []
    assert local_server.pending("m") == 0
    status, _, _ = post(conn, chat("d"))
    assert status == 404


def test_reply_validation() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        Reply(chunk_size=0)
    assert Reply(json={"a": 1}, text="ignored").content() == '{"a": 1}'
    assert Reply(raw_content="{", json={"a": 1}).content() == "{"


def test_quirk_scenarios_on_the_wire(
    local_server: LocalServer, conn: http.client.HTTPConnection
) -> None:
    """The server-quirk options, seen raw: a rejection's status, an empty event stream
    (no [DONE]), an error object with HTTP 200, a refusal, calls whole in one chunk."""
    local_server.script(
        "m",
        Reply(text="x", reject_max_tokens=True, rejection_status=500),
        Reply(text="never", end_after=0),
        Reply(error_in_200="busy"),
        Reply(refusal="no"),
        Reply(tool_calls=[("f", {"a": 1}), ("g", {})], calls_in_one_chunk=True),
    )
    status, body, _ = post(conn, chat(max_tokens=5))
    assert status == 500 and "max_completion_tokens" in json.loads(body)["error"]["message"]
    assert local_server.pending("m") == 5  # a rejection does not use up the reply
    assert post(conn, chat())[0] == 200  # the rejected reply, now without max_tokens
    status, body, response = post(conn, chat(stream=True))
    assert (status, body, response.getheader("content-type")) == (200, b"", "text/event-stream")
    status, body, _ = post(conn, chat(stream=True))
    assert status == 200 and json.loads(body) == {
        "error": {"message": "busy", "type": "server_error", "param": None, "code": None}
    }
    message = json.loads(post(conn, chat())[1])["choices"][0]["message"]
    assert message["content"] is None and message["refusal"] == "no"
    chunks = sse_chunks(post(conn, chat(stream=True))[1])
    deltas = [c["choices"][0] for c in chunks if c["choices"][0]["delta"].get("tool_calls")]
    assert [d["delta"]["tool_calls"][0]["function"] for d in deltas] == [
        {"name": "f", "arguments": '{"a": 1}'},
        {"name": "g", "arguments": "{}"},
    ]
    assert [d["finish_reason"] for d in deltas] == [None, "tool_calls"]

"""AnthropicServer: the Messages API over real HTTP/1.1, streamed and not, with records.

Raw HTTP (``http.client``) and the SSE text as sent, so the server is checked on its own;
the Claude Code CLI speaks to it in ``tests/integrations/test_claude_agent_sdk.py``.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from asyncrecall.models import FunctionCall
from asyncrecall.testing import AnthropicServer, Reply

GUARD = 5.0


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as server:
        yield server


@pytest.fixture
def conn(server: AnthropicServer) -> Iterator[http.client.HTTPConnection]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=GUARD)
    yield connection
    connection.close()


def post(
    conn: http.client.HTTPConnection, body: dict[str, Any], path: str = "/v1/messages?beta=true"
) -> tuple[int, bytes, http.client.HTTPResponse]:
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read(), response


def messages(model: str = "m", *, stream: bool = False) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": stream,
    }


def sse_events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) per SSE event; the name line must match the data's type."""
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame:
            continue
        name_line, data_line = frame.split("\n")
        name = name_line.removeprefix("event: ")
        data = json.loads(data_line.removeprefix("data: "))
        assert data["type"] == name
        events.append((name, data))
    return events


def test_base_url_is_what_anthropic_base_url_takes(server: AnthropicServer) -> None:
    assert server.base_url == f"http://127.0.0.1:{server.port}"


def test_a_whole_message_with_text_and_tool_use(
    server: AnthropicServer, conn: http.client.HTTPConnection
) -> None:
    """Not streamed: one ``message`` with a text block, then a ``tool_use`` block per call
    (ids generated, or the FunctionCall's), and the stop reason ``tool_use``."""
    server.script(
        "m",
        Reply(
            text="let me look",
            tool_calls=[("read", {"path": "a"}), FunctionCall("toolu_x", "read", {"path": "b"})],
        ),
    )
    status, raw, response = post(conn, messages())
    assert status == 200 and response.getheader("content-type") == "application/json"
    body = json.loads(raw)
    assert body["type"] == "message" and body["role"] == "assistant" and body["model"] == "m"
    assert body["content"] == [
        {"type": "text", "text": "let me look"},
        {"type": "tool_use", "id": "toolu_0_0", "name": "read", "input": {"path": "a"}},
        {"type": "tool_use", "id": "toolu_x", "name": "read", "input": {"path": "b"}},
    ]
    assert body["stop_reason"] == "tool_use"
    assert body["usage"]["input_tokens"] > 0 and body["usage"]["output_tokens"] > 0
    (record,) = server.requests
    assert record.path == "/v1/messages" and record.messages == messages()["messages"]
    assert record.status == 200 and record.settled


def test_a_stream_is_the_messages_event_sequence(
    server: AnthropicServer, conn: http.client.HTTPConnection
) -> None:
    """Streamed: ``message_start``, per block its start, its deltas (``text_delta`` or
    ``input_json_delta`` pieces of ``chunk_size``) and its stop, ``message_delta`` with
    the stop reason, ``message_stop``; the pieces add up to the whole."""
    server.script("m", Reply(text="hello", tool_calls=[("read", {"path": "a.md"})], chunk_size=4))
    status, raw, response = post(conn, messages(stream=True))
    assert status == 200 and response.getheader("content-type") == "text/event-stream"
    events = sse_events(raw)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert events[0][1]["message"]["content"] == []
    starts = [data for name, data in events if name == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == ["text", "tool_use"]
    assert starts[1]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_0_0",
        "name": "read",
        "input": {},
    }
    deltas = [data for name, data in events if name == "content_block_delta"]
    text = "".join(d["delta"]["text"] for d in deltas if d["index"] == 0)
    args = "".join(d["delta"]["partial_json"] for d in deltas if d["index"] == 1)
    assert text == "hello" and json.loads(args) == {"path": "a.md"}
    assert {d["delta"]["type"] for d in deltas if d["index"] == 1} == {"input_json_delta"}
    assert all(len(d["delta"].get("text", d["delta"].get("partial_json"))) <= 4 for d in deltas)
    stops = [data["index"] for name, data in events if name == "content_block_stop"]
    assert stops == [0, 1]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    (record,) = server.requests
    assert record.stream and record.finished_at is not None


def test_errors_are_anthropic_error_objects(
    server: AnthropicServer, conn: http.client.HTTPConnection
) -> None:
    """A scripted status answers ``{"type": "error", "error": {type, message}}``; an
    unknown model is a 404 of the same shape, and so is an unknown Messages route."""
    server.script("m", Reply(status=429, error_message="slow down"))
    status, raw, _ = post(conn, messages(stream=True))
    assert status == 429
    assert json.loads(raw) == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
    }
    status, raw, _ = post(conn, messages("nobody"))
    assert status == 404 and json.loads(raw)["error"]["type"] == "not_found_error"
    status, raw, _ = post(conn, messages(), path="/v1/messages/batches")
    assert status == 404 and json.loads(raw)["type"] == "error"
    assert [r.status for r in server.requests] == [429, 404]


def test_count_tokens_and_models_answer_without_a_record(
    server: AnthropicServer, conn: http.client.HTTPConnection
) -> None:
    server.set_default("m", "hi")
    status, raw, _ = post(conn, messages(), path="/v1/messages/count_tokens")
    assert status == 200 and json.loads(raw)["input_tokens"] > 0
    conn.request("GET", "/v1/models")
    listing = json.loads(conn.getresponse().read())
    assert [m["id"] for m in listing["data"]] == ["m"] and listing["has_more"] is False
    assert server.requests == []


def test_a_gated_reply_waits_and_a_hang_up_is_recorded(server: AnthropicServer) -> None:
    """The gate holds the answer until the test opens it; a client that leaves while it
    waits is recorded as disconnected."""
    gate = threading.Event()
    server.script("m", Reply(text="late", gate=gate))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=GUARD)
    conn.request("POST", "/v1/messages", json.dumps(messages(stream=True)))
    record = server.wait_for(lambda r: r.reply is not None)
    assert record.first_byte_at is None
    conn.close()
    server.wait_disconnected(record)
    gate.set()


def test_chat_completions_are_answered_as_the_local_server_does(
    server: AnthropicServer, conn: http.client.HTTPConnection
) -> None:
    """One server for a Claude main model and an OpenAI-compatible side model: chat
    completions get LocalServer's answers and errors, recorded beside the messages."""
    server.script("side", Reply(json={"selected_memories": []}))
    body = {"model": "side", "messages": [{"role": "user", "content": "q"}]}
    status, raw, _ = post(conn, body, path="/v1/chat/completions")
    answer = json.loads(raw)
    assert status == 200 and answer["object"] == "chat.completion"
    assert json.loads(answer["choices"][0]["message"]["content"]) == {"selected_memories": []}
    status, raw, _ = post(conn, body, path="/v1/chat/completions")
    assert status == 404 and "type" not in json.loads(raw)  # OpenAI's error shape
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2

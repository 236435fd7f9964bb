"""A local Anthropic-Messages-compatible server on 127.0.0.1, for clients that speak it.

The Claude Agent SDK drives the Claude Code CLI, which speaks the Anthropic Messages
API only: :class:`AnthropicServer` answers it (``ANTHROPIC_BASE_URL`` set to its
:attr:`~AnthropicServer.base_url`) with the same scripting, recording and waiting as
:class:`~asyncrecall.testing.LocalServer`, and the same :class:`~asyncrecall.testing.Reply`
values rendered as Messages answers. It is a LocalServer too: OpenAI chat completions
are answered as there, so one server stands in for a Claude main model and an
OpenAI-compatible side model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from asyncrecall.models import FunctionCall
from asyncrecall.testing._http import Connection, HttpRequest
from asyncrecall.testing._replies import RecordedRequest, Reply
from asyncrecall.testing._server import LocalServer

__all__ = ["AnthropicServer"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


class AnthropicServer(LocalServer):
    """An Anthropic Messages server on 127.0.0.1 with real sockets.

    Endpoints: ``POST /v1/messages`` (streamed as SSE events or not; recorded),
    ``POST /v1/messages/count_tokens`` (an estimate; not recorded), ``GET /v1/models``
    (a listing both APIs' clients read), and :class:`LocalServer`'s ``POST
    /v1/chat/completions``, answered as there. Replies are scripted per model as for
    :class:`LocalServer` (:meth:`script`, :meth:`set_default`); to ``/v1/messages`` each
    :class:`Reply` is rendered as a Messages answer: ``text`` is a text block, each of
    ``tool_calls`` a ``tool_use`` block (ids ``toolu_<request>_<n>`` unless given as a
    :class:`~asyncrecall.models.FunctionCall`), ``status`` an Anthropic error.
    A stream is ``message_start``, then per block ``content_block_start``, its
    ``text_delta`` or ``input_json_delta`` pieces (``chunk_size`` characters each) and
    ``content_block_stop``, then ``message_delta`` (the stop reason) and
    ``message_stop``. Of the reply's other fields these apply: ``gate``, ``hang``,
    ``first_token_delay``, ``chunk_delay``, ``stall_after``, ``drop_after``,
    ``end_after``, ``error_message``, ``prompt_tokens`` and ``completion_tokens``.

    Every request to ``/v1/messages`` is a :class:`RecordedRequest` whose ``body`` is
    the request as sent: ``messages`` holds Anthropic messages (content blocks).

    Example::

        with AnthropicServer() as server:
            server.script("main", Reply(tool_calls=[("Read", {"file_path": "a.md"})]), "done")
            env = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "test"}
    """

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` — what ``ANTHROPIC_BASE_URL`` takes (no ``/v1``)."""
        return f"http://{self._host}:{self.port}"

    async def _handle(self, connection: Connection, http: HttpRequest) -> bool:
        path = http.path.split("?", 1)[0].rstrip("/")
        if http.method == "GET" and path == "/v1/models":
            with self._lock:
                names = sorted(set(self._scripts) | set(self._defaults))
            data = [
                {"type": "model", "object": "model", "id": n, "display_name": n, "created": 0}
                for n in names
            ]
            listing = {"object": "list", "data": data, "has_more": False}
            return await self._send_json(connection, http, 200, listing)
        if http.method == "POST" and path == "/v1/messages/count_tokens":
            estimate = {"input_tokens": max(1, len(http.body) // 4)}
            return await self._send_json(connection, http, 200, estimate)
        if path.startswith("/v1/messages"):
            if http.method != "POST" or path != "/v1/messages":
                missing = f"no route for {http.method} {path}"
                return await self._send_error(connection, http, 404, missing)
            return await self._record_and_answer(connection, http, path)
        return await super()._handle(connection, http)

    async def _send_error(
        self,
        connection: Connection,
        http: HttpRequest,
        status: int,
        message: str,
        record: RecordedRequest | None = None,
        headers: dict[str, str] | None = None,
    ) -> bool:
        if not http.path.startswith("/v1/messages"):  # an OpenAI route: its error shape
            return await super()._send_error(connection, http, status, message, record, headers)
        kind = _ERROR_TYPES.get(status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return await self._send_json(connection, http, status, body, record, headers)

    async def _answer(
        self, connection: Connection, http: HttpRequest, record: RecordedRequest
    ) -> bool:
        if record.path != "/v1/messages":
            return await super()._answer(connection, http, record)
        chosen = self._choose(record)
        if not isinstance(chosen, Reply):
            status, message = chosen
            return await self._send_error(connection, http, status, message, record)
        reply = chosen
        self._update(record, reply=reply)
        if reply.gate is not None:
            while not reply.gate.is_set():
                await connection.sleep(0.002)
        if reply.hang:
            await connection.gone.wait()
            connection.check()
        await connection.sleep(reply.first_token_delay)
        if reply.status != 200:
            message = reply.error_message or f"scripted error {reply.status}"
            return await self._send_error(connection, http, reply.status, message, record)
        if not record.stream:
            return await self._send_json(connection, http, 200, message_body(reply, record), record)
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
        events = [
            f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
            for event in message_events(reply, record)
        ]
        if reply.end_after is not None:
            events = events[: reply.end_after]
        for n, event in enumerate(events):
            if n == reply.stall_after:
                await connection.gone.wait()
                connection.check()
            if n == reply.drop_after:
                connection.abort()
                return False
            if n:
                await connection.sleep(reply.chunk_delay)
            await connection.send_chunk(event.encode())
        self._update(record, finished_at=time.monotonic())
        await connection.send_chunk(b"", last=True)
        return http.keep_alive


def _blocks(reply: Reply, record: RecordedRequest) -> list[dict[str, Any]]:
    """The answer's content blocks: the text (if any), then one ``tool_use`` per call."""
    blocks: list[dict[str, Any]] = []
    if reply.content():
        blocks.append({"type": "text", "text": reply.content()})
    for n, call in enumerate(reply.tool_calls):
        if isinstance(call, FunctionCall):
            call_id, name, args = call.id, call.name, dict(call.args)
        else:
            name, raw = call
            call_id = f"toolu_{record.index}_{n}"
            args = json.loads(raw) if isinstance(raw, str) else dict(raw)
        blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
    return blocks


def _stop_reason(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return _STOP_REASONS.get(reply.finish_reason, reply.finish_reason)
    return "tool_use" if reply.tool_calls else "end_turn"


def _usage(reply: Reply, record: RecordedRequest, blocks: list[dict[str, Any]]) -> dict[str, int]:
    input_tokens = reply.prompt_tokens
    if input_tokens is None:
        input_tokens = max(1, len(json.dumps(record.messages)) // 4)
    output_tokens = reply.completion_tokens
    if output_tokens is None:
        output_tokens = max(1, len(json.dumps(blocks)) // 4)
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


def message_body(reply: Reply, record: RecordedRequest) -> dict[str, Any]:
    """A whole Messages answer (``"type": "message"``)."""
    blocks = _blocks(reply, record)
    return {
        "id": f"msg_{record.index}",
        "type": "message",
        "role": "assistant",
        "model": record.model,
        "content": blocks,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(reply, record, blocks),
    }


def _pieces(text: str, size: int | None) -> Iterator[str]:
    if size is None:
        yield text
        return
    for i in range(0, len(text), size):
        yield text[i : i + size]


def message_events(reply: Reply, record: RecordedRequest) -> list[dict[str, Any]]:
    """The server-sent events of a streamed Messages answer, in order."""
    whole = message_body(reply, record)
    usage = whole["usage"]
    head = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": head}]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": piece}
                for piece in _pieces(block["text"], reply.chunk_size)
            ]
        else:
            start = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _pieces(json.dumps(block["input"]), reply.chunk_size)
            ]
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events

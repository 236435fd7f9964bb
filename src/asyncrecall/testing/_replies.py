"""What the local server answers (:class:`Reply`) and what it saw (:class:`RecordedRequest`).

Also the rendering of a reply into OpenAI wire shapes: a ``chat.completion``
object, or the ``chat.completion.chunk`` events of a stream.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asyncrecall.models import FunctionCall

__all__ = ["RecordedRequest", "Reply", "WireCall", "error_body", "rejection"]


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer of :class:`~asyncrecall.testing.LocalServer`.

    The answer's content is ``raw_content`` if set, else ``json.dumps(json)`` if
    ``json`` is not ``None``, else ``text``. Delays, gates and hangs happen before
    the first byte (status line) is sent; the server notices a client hang-up while
    it waits and records it.
    """

    text: str = ""
    """Assistant text (streamed in ``chunk_size`` pieces)."""
    tool_calls: Sequence[FunctionCall | tuple[str, Mapping[str, Any] | str]] = ()
    """Calls as :class:`FunctionCall` (its id is used) or ``(name, args)`` (id generated);
    ``args`` given as a string is sent verbatim, e.g. to send invalid JSON."""
    json: Any = None
    """For side queries: the content is ``json.dumps(json)``."""
    raw_content: str | None = None
    """Content sent verbatim (e.g. invalid JSON)."""
    finish_reason: str | None = None
    """Default: ``tool_calls`` when there are calls, else ``stop``."""
    first_token_delay: float = 0.0
    """Seconds to wait before the first byte of the response."""
    chunk_delay: float = 0.0
    """Seconds to wait before each stream chunk after the first."""
    chunk_size: int | None = None
    """Split text and each call's argument string into pieces of this many characters
    (calls' pieces interleaved by index); ``None``: one piece each."""
    status: int = 200
    """HTTP status; anything but 200 answers an OpenAI-style error body."""
    error_message: str | None = None
    """The error body's message when ``status`` is not 200."""
    retry_after: float | None = None
    """With an error status: send ``retry-after-ms`` so an SDK retries after this long."""
    usage: bool = True
    """Send a usage chunk when the request asked ``stream_options.include_usage``
    (non-stream answers always carry usage when true)."""
    prompt_tokens: int | None = None
    """Reported prompt tokens; default: an estimate from the request size."""
    completion_tokens: int | None = None
    """Reported completion tokens; default: an estimate from the content size."""
    hang: bool = False
    """Never answer; wait until the client hangs up."""
    stall_after: int | None = None
    """Stream this many chunks, then send nothing more until the client hangs up
    (to cancel mid-stream at a point the test controls)."""
    drop_after: int | None = None
    """Stream this many chunks, then close the connection without ending the body."""
    stream_error: str | None = None
    """Stream one good chunk, then an ``{"error": {"message": ...}}`` event, then end."""
    malformed_stream: bool = False
    """Stream one good chunk, then an SSE ``data:`` line that is not JSON."""
    omit_tool_call_ids: bool = False
    """Stream tool calls without ``id`` (some servers do), so the client must make them."""
    gate: threading.Event | None = None
    """Wait until the test sets this event before answering."""
    reject_json_schema: bool = False
    """Answer 400 to a ``response_format`` of type ``json_schema`` without using up this
    reply, so the client's ``json_object`` retry gets it."""
    reject_stream_options: bool = False
    """Answer 400 to a request with ``stream_options`` without using up this reply."""
    rejection_status: int = 400
    """The status of every ``reject_*`` answer (llama-cpp-python's server answers 500)."""
    rejection_message: str | None = None
    """The message of every ``reject_*`` answer (default: what the server it mimics says)."""
    reject_max_tokens: bool = False
    """Reject ``max_tokens`` as OpenAI's reasoning models do (they want
    ``max_completion_tokens``), without using up this reply."""
    reject_system_role: bool = False
    """Reject a ``system`` message as OpenAI's first reasoning models do (they want
    ``developer``), without using up this reply."""
    reject_json_object: bool = False
    """Reject ``response_format`` ``json_object`` as LM Studio does, without using up this
    reply."""
    reject_json_object_schema: bool = False
    """Reject a ``json_object`` response format carrying a ``schema`` key (a strict
    validator; llama-cpp-python uses the key), without using up this reply."""
    reject_null_content: bool = False
    """Reject an assistant message whose ``content`` is null or missing, as
    llama-cpp-python's server does (HTTP 500 there), without using up this reply."""
    strict_tool_call_ids: bool = False
    """Reject tool-call ids that are not 9 letters and digits, as vLLM does with Mistral's
    tokenizer, without using up this reply."""
    end_after: int | None = None
    """Stream this many chunks, then end the body cleanly before the finish reason: a cut
    answer; 0 is an empty stream (llama-cpp-python's answer to a prompt over its context)."""
    error_in_200: str | None = None
    """Answer HTTP 200 with ``{"error": {"message": ...}}`` as a JSON body, also to a
    streamed request (llama.cpp's ``llama-server`` does for some errors)."""
    refusal: str | None = None
    """Answer a refusal (OpenAI's ``refusal`` field, content null) instead of content."""
    calls_in_one_chunk: bool = False
    """Stream each tool call whole (id, name, all arguments) in one chunk, as Ollama does."""
    interrupt: bool = False
    """Behave as llama-cpp-python's one-slot server with ``interrupt_requests``: after
    each streamed chunk, when another request is unanswered at the server, end the
    stream with ``[DONE]`` and no finish reason (tests order requests with gates)."""

    def __post_init__(self) -> None:
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")

    def content(self) -> str:
        """The assistant content this reply sends."""
        if self.raw_content is not None:
            return self.raw_content
        if self.json is not None:
            return json.dumps(self.json)
        return self.text


@dataclass(slots=True, eq=False, repr=False)
class RecordedRequest:
    """One request the server received — a live record the server thread updates.

    Times are ``time.monotonic()`` values (comparable across threads), ``None`` until
    reached. Read it after a ``wait_for`` helper returned it, or wait for the field
    you need with a predicate.
    """

    index: int
    method: str
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    arrived_at: float
    first_byte_at: float | None = None
    finished_at: float | None = None
    disconnected: bool = False
    """The client hung up before the response was complete."""
    status: int | None = None
    """The status answered (``None`` if the client left before any answer)."""
    reply: Reply | None = None
    interrupted: bool = False
    """The server ended this stream for a later request (``Reply.interrupt``)."""

    def __repr__(self) -> str:
        return (
            f"<RecordedRequest #{self.index} {self.method} {self.path} model={self.model!r} "
            f"stream={self.stream} side={self.is_side_query} status={self.status} "
            f"disconnected={self.disconnected} settled={self.settled}>"
        )

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream", False))

    @property
    def is_side_query(self) -> bool:
        """The request carried a ``response_format`` (the memory side query does)."""
        return "response_format" in self.body

    @property
    def response_format_type(self) -> str | None:
        response_format = self.body.get("response_format")
        return str(response_format.get("type")) if isinstance(response_format, Mapping) else None

    @property
    def include_usage(self) -> bool:
        options = self.body.get("stream_options")
        return isinstance(options, Mapping) and bool(options.get("include_usage"))

    @property
    def settled(self) -> bool:
        """The response was completed or the client hung up."""
        return self.finished_at is not None or self.disconnected


@dataclass(frozen=True, slots=True)
class WireCall:
    """A tool call as it goes on the wire (arguments already a string)."""

    id: str
    name: str
    arguments: str


def wire_calls(reply: Reply, *, request_index: int) -> list[WireCall]:
    """The reply's calls with ids (generated ``call_<request>_<n>`` when absent)."""
    calls: list[WireCall] = []
    for n, call in enumerate(reply.tool_calls):
        if isinstance(call, FunctionCall):
            calls.append(WireCall(call.id, call.name, json.dumps(dict(call.args))))
        else:
            name, args = call
            arguments = args if isinstance(args, str) else json.dumps(dict(args))
            calls.append(WireCall(f"call_{request_index}_{n}", name, arguments))
    return calls


def finish_reason(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def usage_of(reply: Reply, request: RecordedRequest) -> dict[str, int]:
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = max(1, len(json.dumps(request.messages)) // 4)
    completion = reply.completion_tokens
    if completion is None:
        calls = wire_calls(reply, request_index=request.index)
        size = len(reply.content()) + sum(len(c.name) + len(c.arguments) for c in calls)
        completion = max(1, size // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion_body(reply: Reply, request: RecordedRequest) -> dict[str, Any]:
    """A whole ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content()}
    calls = wire_calls(reply, request_index=request.index)
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
        message["content"] = reply.content() or None
    if reply.refusal is not None:
        message["content"] = None
        message["refusal"] = reply.refusal
    body: dict[str, Any] = {
        "id": f"chatcmpl-{request.index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply)}],
    }
    if reply.usage:
        body["usage"] = usage_of(reply, request)
    return body


def _pieces(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if size is None:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_events(reply: Reply, request: RecordedRequest) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed answer, in order."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{request.index}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": request.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
        }

    events = [chunk({"role": "assistant", "content": ""})]
    if reply.refusal is not None:
        events += [chunk({"refusal": piece}) for piece in _pieces(reply.refusal, reply.chunk_size)]
    else:
        events += [chunk({"content": p}) for p in _pieces(reply.content(), reply.chunk_size)]
    calls = wire_calls(reply, request_index=request.index)
    if reply.calls_in_one_chunk:  # Ollama: each call whole, the finish reason with the last
        for index, call in enumerate(calls):
            whole = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            last = index == len(calls) - 1
            events.append(chunk({"tool_calls": [whole]}, finish_reason(reply) if last else None))
        calls = []
    for index, call in enumerate(calls):
        head: dict[str, Any] = {
            "index": index,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        if not reply.omit_tool_call_ids:
            head["id"] = call.id
        events.append(chunk({"tool_calls": [head]}))
    # Argument pieces round-robin over the calls, so calls interleave by index.
    pieces = [_pieces(call.arguments, reply.chunk_size) for call in calls]
    for round_ in range(max((len(p) for p in pieces), default=0)):
        for index, call_pieces in enumerate(pieces):
            if round_ < len(call_pieces):
                delta = {"index": index, "function": {"arguments": call_pieces[round_]}}
                events.append(chunk({"tool_calls": [delta]}))
    if not (reply.calls_in_one_chunk and reply.tool_calls):
        events.append(chunk({}, finish_reason(reply)))
    if reply.usage and request.include_usage:
        events.append(
            {
                "id": f"chatcmpl-{request.index}",
                "object": "chat.completion.chunk",
                "created": created,
                "model": request.model,
                "choices": [],
                "usage": usage_of(reply, request),
            }
        )
    return events


_STRICT_ID = re.compile(r"[a-zA-Z0-9]{9}")


def rejection(reply: Reply, request: RecordedRequest) -> str | None:
    """Why ``reply`` rejects ``request`` (the error message), or ``None``."""
    body = request.body
    response_format = request.response_format_type
    message = _rejection(reply, request, body, response_format)
    if message is None:
        return None
    return reply.rejection_message or message


def _rejection(
    reply: Reply, request: RecordedRequest, body: Mapping[str, Any], response_format: str | None
) -> str | None:
    if reply.reject_json_schema and response_format == "json_schema":
        return "response_format of type 'json_schema' is not supported"
    if reply.reject_json_object and response_format == "json_object":
        return "'response_format.type' must be 'json_schema' or 'text'"
    schema_key = isinstance(body.get("response_format"), Mapping) and (
        "schema" in body["response_format"]
    )
    if reply.reject_json_object_schema and response_format == "json_object" and schema_key:
        return "response_format: extra inputs are not permitted: 'schema'"
    if reply.reject_stream_options and "stream_options" in body:
        return "unknown field: stream_options"
    if reply.reject_max_tokens and "max_tokens" in body:
        return (
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead."
        )
    for n, message in enumerate(request.messages):
        role = message.get("role")
        if reply.reject_system_role and role == "system":
            return (
                f"Unsupported value: 'messages[{n}].role' does not support 'system' "
                "with this model."
            )
        if reply.reject_null_content and role == "assistant" and message.get("content") is None:
            return (
                f"validation error: ('body', 'messages', {n}, 'ChatCompletionRequest"
                "AssistantMessage', 'content'): Input should be a valid string"
            )
        ids = [str(c.get("id")) for c in message.get("tool_calls") or ()]
        ids += [str(message["tool_call_id"])] if "tool_call_id" in message else []
        for call_id in ids if reply.strict_tool_call_ids else ():
            if not _STRICT_ID.fullmatch(call_id):
                return f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9."
    return None


def error_body(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-style error object."""
    kind = {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}

"""Anthropic's Messages API in front of an OpenAI-compatible server, translated by
LiteLLM (``litellm.anthropic.messages``: the request made a chat completion, the answer
made Anthropic's events again), so a client that speaks only Anthropic's API (the
Claude Agent SDK's CLI) can run on llama-cpp-python's server, which has no
``/v1/messages``. The translation is LiteLLM's, not ours; this module only serves it.

Every model name is sent as the upstream's one model; answers are capped at
``max_tokens`` (the CLI asks for tens of thousands, more than the small context holds),
and an answer cut by that cap, not by the client's own limit, ends as a finished turn
(``end_turn``): the CLI takes ``max_tokens`` for its own limit reached and fails the turn.
``POST /v1/messages/count_tokens`` answers an estimate and ``GET /v1/models`` an empty
list; anything else is 404. It runs uvicorn in its own thread.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Final

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import

import litellm
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

#: What of an Anthropic request is passed on (the rest, such as ``metadata`` or
#: ``thinking``, means nothing to the upstream).
PASSED: Final = ("system", "tools", "tool_choice", "temperature", "top_p", "stop_sequences")
STARTUP_GUARD: Final = 30.0


class AnthropicBridge:
    """``with AnthropicBridge(upstream, model_id) as bridge:`` serves on ``bridge.base_url``
    (what ``ANTHROPIC_BASE_URL`` takes)."""

    def __init__(self, upstream: str, model_id: str, *, max_tokens: int = 48) -> None:
        #: The OpenAI base URL (``…/v1``).
        self.upstream = upstream.rstrip("/")
        self.model_id = model_id
        self.max_tokens = max_tokens
        #: Each ``/v1/messages`` body as the client sent it.
        self.requests: list[dict[str, Any]] = []
        app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="anthropic-bridge")

    @property
    def base_url(self) -> str:
        (server,) = self._server.servers
        port = server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __enter__(self) -> AnthropicBridge:
        # Chat completions upstream (LiteLLM's default for ``openai/`` is the Responses
        # API), while the bridge runs.
        self._routing = litellm.use_chat_completions_url_for_anthropic_messages
        litellm.use_chat_completions_url_for_anthropic_messages = True
        self._thread.start()
        deadline = time.monotonic() + STARTUP_GUARD
        while not self._server.started and self._thread.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if not self._server.started:
            self._server.should_exit = True
            raise RuntimeError("the Anthropic bridge did not start")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(STARTUP_GUARD)
        litellm.use_chat_completions_url_for_anthropic_messages = self._routing

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        body = _as_strings(body)
        passed = {k: body[k] for k in PASSED if body.get(k) is not None}
        stream = bool(body.get("stream"))
        asked = int(body.get("max_tokens") or self.max_tokens)
        answer = await litellm.anthropic.messages.acreate(
            model=f"openai/{self.model_id}",
            api_base=self.upstream,
            api_key="none",
            messages=body["messages"],
            max_tokens=min(asked, self.max_tokens),
            stream=stream,
            **passed,
        )
        ours = asked > self.max_tokens  # a cut at the cap is the bridge's, not the client's
        if not stream:
            message = answer if isinstance(answer, dict) else dict(answer)
            return JSONResponse(_ended(message, "stop_reason") if ours else message)
        return StreamingResponse(_events(answer, ours), media_type="text/event-stream")

    async def _count(self, request: Request) -> Response:
        return JSONResponse({"input_tokens": len(await request.body()) // 4})

    async def _models(self, _request: Request) -> Response:
        return JSONResponse({"data": [], "has_more": False, "first_id": None, "last_id": None})


def _as_strings(body: dict[str, Any]) -> dict[str, Any]:
    """Text given as a list of text blocks, as one string: llama-cpp-python's server
    takes a message's content (and the templates render it) only as a string, and
    LiteLLM passes blocks on as a list of parts. The system blocks, a message's content
    and a tool result's content that are text blocks only are joined by a blank line,
    in order (``cache_control`` dropped); any other block is left as it is."""

    def joined(content: Any) -> Any:
        if isinstance(content, list) and all(
            isinstance(b, dict) and b.get("type") == "text" for b in content
        ):
            return "\n\n".join(str(b["text"]) for b in content)
        return content

    out = dict(body)
    if "system" in out:
        out["system"] = joined(out["system"])
    messages = []
    for message in body["messages"]:
        content = joined(message.get("content"))
        if isinstance(content, list):
            content = [
                {**b, "content": joined(b.get("content"))} if b.get("type") == "tool_result" else b
                for b in content
            ]
        messages.append({**message, "content": content})
    out["messages"] = messages
    return out


def _ended(message: dict[str, Any], key: str) -> dict[str, Any]:
    """``message`` with a ``max_tokens`` stop under ``key`` told as ``end_turn``."""
    return {**message, key: "end_turn"} if message.get(key) == "max_tokens" else message


async def _events(chunks: Any, capped: bool) -> AsyncIterator[bytes]:
    """LiteLLM's stream as server-sent events (it yields each event ready, as bytes, or
    as a dict); ``capped``: a ``max_tokens`` stop is the bridge's cap (see the module)."""
    async for chunk in chunks:
        if isinstance(chunk, bytes | str):
            raw = chunk if isinstance(chunk, bytes) else chunk.encode()
            if not (capped and raw.startswith(b"event: message_delta\n")):
                yield raw
                continue
            data = raw.split(b"\ndata: ", 1)[1]
            event = json.loads(data)
        else:
            event = dict(chunk)
        if capped and event.get("type") == "message_delta":
            event["delta"] = _ended(dict(event.get("delta") or {}), "stop_reason")
        yield f"event: {event.get('type')}\ndata: {json.dumps(event)}\n\n".encode()

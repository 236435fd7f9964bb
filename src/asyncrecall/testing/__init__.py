"""Public test helpers: a scripted model and local OpenAI- and Anthropic-compatible servers.

They are part of the product: the project's own tests, the benchmarks and the demo
use them, and so can yours. Nothing here reaches the network beyond 127.0.0.1.

* :class:`ScriptedModel` — an in-process :class:`~asyncrecall.models.Model` that
  plays queued answers (:meth:`~ScriptedModel.add_turn`, :meth:`~ScriptedModel.add_json`),
  records every call and counts cancellations; gates make timing deterministic.
* :class:`LocalServer` — an OpenAI-compatible HTTP server on 127.0.0.1 in its own
  thread: real sockets, SSE streaming, scripted :class:`Reply` values per model,
  and a :class:`RecordedRequest` per request that says whether the client hung up.
* :class:`AnthropicServer` — the same server speaking the Anthropic Messages API
  (``POST /v1/messages``, streamed as Messages SSE events or not), for clients that
  speak only that, such as the Claude Code CLI the Claude Agent SDK drives.
* :class:`LocalPostgres` — a throw-away PostgreSQL cluster from the machine's binaries
  (private Unix socket, no TCP port), for tests of the PostgreSQL memory store.

The conformance kit (the recall contract as one pytest suite that a framework adapter
runs with a small driver) is a distribution of its own, ``asyncrecall-conformance``
(package ``asyncrecall_conformance``), built on these helpers.
"""

from __future__ import annotations

from asyncrecall.testing._anthropic import AnthropicServer
from asyncrecall.testing._postgres import LocalPostgres
from asyncrecall.testing._replies import RecordedRequest, Reply
from asyncrecall.testing._scripted import (
    JsonRequest,
    ScriptedJson,
    ScriptedModel,
    ScriptedRequest,
    ScriptedTurn,
    ScriptExhaustedError,
)
from asyncrecall.testing._server import LocalServer, ReplySource

__all__ = [
    "AnthropicServer",
    "JsonRequest",
    "LocalPostgres",
    "LocalServer",
    "RecordedRequest",
    "Reply",
    "ReplySource",
    "ScriptExhaustedError",
    "ScriptedJson",
    "ScriptedModel",
    "ScriptedRequest",
    "ScriptedTurn",
]

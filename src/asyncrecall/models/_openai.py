"""The OpenAI-compatible model, on the official SDK's ``AsyncOpenAI``.

Works with any chat completions endpoint (OpenAI, vLLM, Ollama, LM Studio,
llama.cpp's servers...). What endpoints disagree on is learned from their error
answers, once per endpoint (base URL + model) for the whole process, so every
model instance of that endpoint sends the accepted form from then on:

* ``stream_options`` (for usage in streams): an error naming it → sent without.
* ``response_format`` ``json_schema`` (side queries): an error of any status
  (llama-cpp-python answers 500) whose body names ``response_format`` or
  ``json_schema`` → ``json_object`` at once, the schema then in the system prompt and
  in a ``schema`` key (llama-cpp-python constrains its output with it; an error naming
  ``schema`` → sent without the key).
* ``max_tokens`` (the side query's cap): an error naming ``max_completion_tokens``
  (OpenAI's reasoning models) → ``max_completion_tokens``.
* the ``system`` role: an error saying the role does not support ``'system'``
  (OpenAI's first reasoning models) → the ``developer`` role.

Other errors are reported as they are, so a real mistake is not hidden behind a
second request. Answers that look like success but are not (an empty or cut
stream, an error object inside an HTTP 200) are errors too. See ``docs/servers.md``.

Errors come out as the :class:`~asyncrecall.ModelError` family, with a one-line
reason naming the base URL (without credentials) and the model, raised ``from`` the
SDK's exception.
Cancelling the task running :meth:`OpenAIModel.stream` or
:meth:`OpenAIModel.generate_json` closes the HTTP connection (the response is
closed in a ``finally``), and the cancellation propagates.
"""

from __future__ import annotations

import json
import math
import os
import re
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar, cast

import openai
from openai import AsyncOpenAI

from asyncrecall import _telemetry
from asyncrecall._exceptions import ModelError, ModelProtocolError, ModelServerError
from asyncrecall._redact import redact_error
from asyncrecall._urls import http_base_url
from asyncrecall.models._convert import contents_to_messages, tools_to_openai, validate_messages
from asyncrecall.models._openai_errors import (
    error_text,
    map_error,
    one_line,
    public_url,
    short_model_name,
)
from asyncrecall.models._protocol import Finished, StreamEvent, TextDelta, ToolCallReady, Usage
from asyncrecall.models._sent import request_hook
from asyncrecall.models._side_http import SideHTTP
from asyncrecall.models._traffic import (
    ModelStreamCut,
    SideRequestYielded,
    in_background,
    traffic,
)
from asyncrecall.models._types import Content, FunctionCall, PromptPrefix, ToolSpec

__all__ = [
    "CHARS_PER_TOKEN",
    "DEBUG_ENV",
    "PREFILL_SLICE_CHARS",
    "SIDE_QUERY_MAX_TOKENS",
    "ModelPair",
    "OpenAIModel",
    "open_openai_models",
]

DEBUG_ENV = "ASYNCRECALL_DEBUG"
"""Set to ``1`` to validate the tool-call pairing of every request before sending it."""

SIDE_QUERY_MAX_TOKENS = 256
"""The cap on a side query's answer: five paths in JSON need well under 100 tokens, and
an uncapped runaway answer can hold a one-request-at-a-time server for minutes."""

PREFILL_SLICE_CHARS = 512
"""A background side query's prompt goes to a one-request-at-a-time server in slices of
this many characters (about 128 tokens): the user's request waits at most one slice."""

CHARS_PER_TOKEN = 4
"""When an endpoint reports no usage, tokens are estimated as characters / 4 (OpenAI's
rule of thumb for English), rounded up; the :class:`Usage` is marked ``estimated``."""

_PLACEHOLDER_KEY = "not-needed"  # local servers accept any key; the SDK insists on one
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)
_FORMAT_WORDS = ("response_format", "json_schema")  # named by a refusal of any status
_T = TypeVar("_T")


class _Endpoint:
    """What one endpoint (base URL + model) refused, learned once for the whole process."""

    __slots__ = ("json_object_schema", "json_schema", "max_tokens", "stream_options", "system_role")

    def __init__(self) -> None:
        self.json_schema = True
        self.json_object_schema = True  # False: json_object without the `schema` key
        self.stream_options = True
        self.max_tokens = True  # False: it wants max_completion_tokens
        self.system_role = True  # False: it wants the developer role


_ENDPOINTS: dict[tuple[str, str], _Endpoint] = {}


def _endpoint(base_url: str, model: str) -> _Endpoint:
    return _ENDPOINTS.setdefault((base_url, model), _Endpoint())


def forget_endpoints() -> None:
    """Forget what every endpoint was seen to refuse (for tests sharing one server)."""
    _ENDPOINTS.clear()


def _debug_on() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _make_client(
    *, base_url: str, api_key: str | None, max_retries: int, timeout: float | None
) -> AsyncOpenAI:
    key = api_key or os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY
    # The SDK's own HTTP client (its defaults), which says when a request is written.
    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [request_hook]})
    return AsyncOpenAI(
        api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout, http_client=http
    )


class OpenAIModel:
    """A :class:`~asyncrecall.models.Model` speaking OpenAI chat completions.

    ``api_key`` defaults to ``OPENAI_API_KEY``, else a placeholder (local servers
    accept any). Pass ``client`` to share a client (its connection pool) between models;
    a shared client is not closed by :meth:`aclose` (:func:`open_openai_models` gives the
    main and the side model one client each).
    ``max_retries`` is the SDK's retry budget for connection errors, 408/409/429 and
    5xx of the streamed turns (side queries never retry). ``validate_history``
    (default: on when ``ASYNCRECALL_DEBUG=1``) checks the tool-call pairing of each
    request before sending it. ``max_tokens`` caps each streamed answer (default: the
    server's limit). ``base_url`` is made ASCII (an IDNA host, a percent-encoded path);
    one that cannot be sent raises :class:`~asyncrecall.ConfigError`. The key, and
    anything shaped like one, is taken out of every error's message.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None = None,
        client: AsyncOpenAI | None = None,
        max_retries: int = 2,
        timeout: float | None = 600,
        validate_history: bool | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self._model = model
        self._max_tokens = max_tokens
        base_url = http_base_url(base_url)  # ASCII, or a ConfigError naming it
        self._base_url = base_url.rstrip("/")
        self._owns_client = client is None
        if client is None:
            self._client = _make_client(
                base_url=base_url, api_key=api_key, max_retries=max_retries, timeout=timeout
            )
        else:  # a view sharing the client's connection pool, with our own options
            self._client = client.with_options(
                base_url=base_url, max_retries=max_retries, timeout=timeout, api_key=api_key
            )
        # A side query is worth nothing late: a retry after a 5xx or a timeout answers
        # after the main turn needed it, doubles the load on a server already failing,
        # and (on a one-request-at-a-time server) delays the main turn. So side queries
        # never retry; the recall falls back to its lexical pass at once instead.
        self._side_client = self._client.with_options(max_retries=0)
        # Side queries on asyncio streams (``_side_http``): a tenth of the SDK's CPU. Only
        # with a client built here: a caller's client may carry a transport of its own.
        self._side_http = (
            SideHTTP.for_client(self._client, self._base_url, timeout=timeout)
            if client is None
            else None
        )
        self._validate = validate_history
        self._endpoint = _endpoint(self._base_url, model)
        # What this process has in flight on the server, whichever model it names.
        self._traffic = traffic(self._base_url)

    @property
    def name(self) -> str:
        """The model's name as the endpoint knows it."""
        return self._model

    @property
    def base_url(self) -> str:
        """The endpoint, without a trailing slash."""
        return self._base_url

    @property
    def json_schema_supported(self) -> bool:
        """False once the endpoint (in this process) refused ``response_format`` ``json_schema``."""
        return self._endpoint.json_schema

    @property
    def stream_options_supported(self) -> bool:
        """False once the endpoint (in this process) refused ``stream_options``."""
        return self._endpoint.stream_options

    async def aclose(self) -> None:
        """Close the HTTP client if this model created it."""
        try:
            if self._side_http is not None:
                await self._side_http.aclose()
        finally:
            if self._owns_client:
                await self._client.close()

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"OpenAIModel(model={self._model!r}, base_url={public_url(self._base_url)!r})"

    # -- streaming turn --------------------------------------------------------------

    async def stream(
        self,
        contents: Sequence[Content],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
        tool_choice: str | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one turn: text deltas, complete tool calls (index order), usage, one Finished.

        ``tool_choice``: ``"auto"``, ``"none"``, ``"required"``, or a tool's name to force
        a call of that tool (default: not sent). Usage the endpoint does not report is
        estimated (``Usage.estimated``). A stream that ends with no finish reason (empty
        or cut) or carries an error raises a :class:`~asyncrecall.ModelError`. Close the
        iterator (``contextlib.aclosing``) if you stop early; cancelling the consuming
        task closes the connection too.
        """
        messages = contents_to_messages(contents, system=system)
        if self._validate if self._validate is not None else _debug_on():
            validate_messages(messages)
        wire_tools = tools_to_openai(tools)
        params: dict[str, Any] = {
            "model": self._model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self._max_tokens is not None:
            params["max_tokens"] = self._max_tokens
        if wire_tools:
            params["tools"] = wire_tools
        if tool_choice is not None:
            params["tool_choice"] = _tool_choice(tool_choice)
        with self._traffic.main_stream():
            try:
                async for event in self._stream(params, messages, wire_tools):
                    yield event
            except ModelError as exc:
                self._scrub(exc)
                raise

    async def _stream(
        self, params: dict[str, Any], messages: list[Any], wire_tools: list[Any]
    ) -> AsyncGenerator[StreamEvent, None]:
        try:
            response: openai.AsyncStream[Any] = await self._send(
                cast(Callable[..., Awaitable[Any]], self._client.chat.completions.create), params
            )
        except openai.OpenAIError as exc:
            raise self._map_error(exc) from exc
        calls = _CallAssembler()
        reason: str | None = None
        usage: Usage | None = None
        chunks = 0
        answered = 0  # characters of text and tool calls, for an estimated usage
        try:
            await self._check_stream_body(response)
            while True:
                try:
                    chunk = await response.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise self._map_error(exc, streaming=True) from exc
                chunks += 1
                self._raise_if_error(chunk, streaming=True)
                if (reported := _usage_of(chunk)) is not None:
                    usage = reported
                for choice in getattr(chunk, "choices", None) or ():
                    if getattr(choice, "index", 0) not in (0, None):
                        continue
                    delta = getattr(choice, "delta", None)
                    # A refusal (OpenAI's `refusal` field) is the answer's text.
                    for text in (getattr(delta, "content", None), getattr(delta, "refusal", None)):
                        if text:
                            answered += len(str(text))
                            yield TextDelta(str(text))
                    for call_delta in getattr(delta, "tool_calls", None) or ():
                        calls.add(call_delta)
                    finish = getattr(choice, "finish_reason", None)
                    if finish is not None and reason is None:
                        reason = str(finish)
                        for call in self._complete_calls(calls):
                            answered += len(call.name) + len(json.dumps(dict(call.args)))
                            yield ToolCallReady(call)
            if reason is None:
                raise self._unfinished(chunks)
            for call in self._complete_calls(calls):
                answered += len(call.name) + len(json.dumps(dict(call.args)))
                yield ToolCallReady(call)
            if usage is None:
                sent = len(json.dumps(messages)) + len(json.dumps(wire_tools) if wire_tools else "")
                usage = Usage(_tokens(sent), _tokens(answered), estimated=True)
            yield usage
            yield Finished(reason)
        finally:
            await response.close()

    async def _check_stream_body(self, response: openai.AsyncStream[Any]) -> None:
        """A JSON body where an event stream was asked (llama.cpp's servers answer some
        errors so, with HTTP 200) is read and reported, not parsed as an empty stream."""
        http = getattr(response, "response", None)
        content_type = str(getattr(http, "headers", {}).get("content-type", "")).lower()
        if http is None or not content_type.startswith("application/json"):
            return
        body = await http.aread()
        try:
            data = json.loads(body or b"null")
        except ValueError:
            data = None
        self._raise_if_error(data, streaming=False)
        raise ModelProtocolError(
            f"{self._where()} answered a streamed request with a JSON body, not an event "
            f"stream: {one_line(body.decode('utf-8', 'replace'), 120)!r}",
            model=self._model,
        )

    def _raise_if_error(self, value: Any, *, streaming: bool) -> None:
        """Raise if an answer that came with HTTP 200 carries an error object."""
        error = value.get("error") if isinstance(value, Mapping) else getattr(value, "error", None)
        if getattr(value, "event", None) == "error":  # an SSE `event: error` the SDK passed on
            error = error or getattr(value, "data", None) or "error event"
        if not error:
            return
        message = error.get("message") if isinstance(error, Mapping) else None
        detail = one_line(str(message or error))
        where = "in the stream" if streaming else "with HTTP 200"
        raise ModelServerError(
            f"{self._where()} sent an error {where}: {detail}", model=self._model
        )

    def _unfinished(self, chunks: int) -> ModelError:
        if chunks == 0:
            return ModelProtocolError(
                f"{self._where()} sent an empty answer (no choices, no finish reason): "
                "is the prompt over the server's context size?",
                model=self._model,
            )
        # A one-request-at-a-time server (llama-cpp-python's interrupt_requests) ends the
        # stream so when our side query arrives: those give way, the caller may resend.
        ours = self._traffic.cut()
        return ModelStreamCut(
            f"{self._where()} ended the stream before the answer finished "
            f"(no finish reason after {chunks} chunk(s))",
            model=self._model,
            ours_in_flight=ours,
        )

    async def _send(self, create: Callable[..., Awaitable[_T]], params: dict[str, Any]) -> _T:
        """Send ``params`` in the form the endpoint accepts; a refusal of a known optional
        form is learned (for every model of the endpoint) and the request sent again."""
        while True:
            sent = self._adapt(params)
            try:
                return await create(**sent)
            except openai.APIStatusError as exc:
                if not self._learn(exc, sent):
                    raise

    def _adapt(self, params: dict[str, Any]) -> dict[str, Any]:
        endpoint = self._endpoint
        sent = dict(params)
        if not endpoint.stream_options:
            sent.pop("stream_options", None)
        if not endpoint.max_tokens and "max_tokens" in sent:
            sent["max_completion_tokens"] = sent.pop("max_tokens")
        response_format = sent.get("response_format")
        if not endpoint.json_object_schema and isinstance(response_format, dict):
            sent["response_format"] = {k: v for k, v in response_format.items() if k != "schema"}
        if not endpoint.system_role:
            sent["messages"] = [
                {**m, "role": "developer"} if m.get("role") == "system" else m
                for m in sent["messages"]
            ]
        return sent

    def _learn(self, exc: openai.APIStatusError, sent: Mapping[str, Any]) -> bool:
        """Whether ``exc`` refused a known optional form of ``sent`` (now learned)."""
        text = error_text(exc)
        endpoint = self._endpoint
        if endpoint.stream_options and "stream_options" in sent and "stream_options" in text:
            endpoint.stream_options = False
            return True
        if endpoint.max_tokens and "max_tokens" in sent and "max_completion_tokens" in text:
            endpoint.max_tokens = False
            return True
        response_format = sent.get("response_format")
        if (
            endpoint.json_object_schema
            and isinstance(response_format, dict)
            and "schema" in response_format
            and "schema" in text
        ):
            endpoint.json_object_schema = False
            return True
        has_system = any(m.get("role") == "system" for m in sent["messages"])
        if endpoint.system_role and has_system and "'system'" in text and "role" in text:
            endpoint.system_role = False
            return True
        return False

    def _complete_calls(self, calls: _CallAssembler) -> list[FunctionCall]:
        complete: list[FunctionCall] = []
        for builder in calls.take():
            if not builder.name:
                raise ModelProtocolError(
                    f"{self._where()} streamed a tool call without a name", model=self._model
                )
            arguments = "".join(builder.arguments).strip() or "{}"
            try:
                args = json.loads(arguments)
            except ValueError as exc:
                raise ModelProtocolError(
                    f"{self._where()} sent invalid JSON arguments for tool `{builder.name}`: "
                    f"{one_line(arguments, 80)!r}",
                    model=self._model,
                ) from exc
            if not isinstance(args, dict):
                raise ModelProtocolError(
                    f"{self._where()} sent arguments for tool `{builder.name}` that are not a "
                    f"JSON object: {one_line(arguments, 80)!r}",
                    model=self._model,
                )
            # Made-up ids are 9 letters and digits: the strictest servers (Mistral's
            # templates in vLLM) reject any other shape when the history comes back.
            call_id = builder.id or uuid.uuid4().hex[:9]
            complete.append(FunctionCall(id=call_id, name=builder.name, args=args))
        return complete

    # -- side query --------------------------------------------------------------------

    async def generate_json(
        self,
        *,
        system: str,
        prompt: str,
        schema: Mapping[str, Any],
        schema_name: str,
        max_tokens: int | None = None,
        prefix: PromptPrefix | None = None,
    ) -> Any:
        """One non-streamed, temperature-0 request answering a JSON value.

        Uses ``response_format`` ``json_schema`` (strict), or ``json_object`` (the schema
        then in the system prompt) once the endpoint refused ``json_schema`` (see the
        module docstring): one request per call, two when the refusal is learned. Never
        retried (a late side query is worth nothing) and capped at ``max_tokens``
        (default :data:`SIDE_QUERY_MAX_TOKENS`). Raises :class:`~asyncrecall.ModelProtocolError`
        when the answer is not JSON.

        A background one (made inside ``background_requests``: extraction) is sent
        streamed: a server that runs one request at a time stops a streamed answer when
        we hang up, or ends it early for the request that waits (llama-cpp-python's
        ``interrupt_requests``), where it computes a non-streamed one to its end (it
        does not look for a hang-up there). Ended early so, it raises
        :class:`~asyncrecall.models._traffic.SideRequestYielded`, as when it gives way.

        With a ``prefix``, on an endpoint seen to interrupt (a server that runs one
        request at a time, whose one prompt cache this query and the main turns share),
        the messages are the prefix's system prompt, then one user message: ``system``,
        ``prompt`` (and, with ``json_object``, the schema) in this order; the prefix's
        tools are declared with ``tool_choice`` ``none``. Only the end of the prompt
        differs from the main turns' then, and between the two formats only the schema
        at its very end. Elsewhere the prefix is not sent: it would add its tokens to
        every such query (and could overflow a small context) for no cache to keep.
        """
        telemetry = _telemetry.current()
        if telemetry is None:
            return await self._side_query(system, prompt, schema, schema_name, max_tokens, prefix)
        with telemetry.side_query(
            model=self._model,
            base_url=self._base_url,
            max_tokens=SIDE_QUERY_MAX_TOKENS if max_tokens is None else max_tokens,
            schema_name=schema_name,
        ):
            return await self._side_query(system, prompt, schema, schema_name, max_tokens, prefix)

    async def _side_query(
        self,
        system: str,
        prompt: str,
        schema: Mapping[str, Any],
        schema_name: str,
        max_tokens: int | None,
        prefix: PromptPrefix | None,
    ) -> Any:
        async with self._traffic.side_request(self._model):
            try:
                return await self._generate_json(
                    system=system,
                    prompt=prompt,
                    schema=schema,
                    schema_name=schema_name,
                    max_tokens=max_tokens,
                    prefix=prefix,
                )
            except ModelError as exc:
                self._scrub(exc)
                raise

    async def _generate_json(
        self,
        *,
        system: str,
        prompt: str,
        schema: Mapping[str, Any],
        schema_name: str,
        max_tokens: int | None,
        prefix: PromptPrefix | None,
    ) -> Any:
        if not self._traffic.interrupts:
            prefix = None  # only a one-slot server's single cache is shared with the main turns
        cap = SIDE_QUERY_MAX_TOKENS if max_tokens is None else max_tokens
        if self._endpoint.json_schema:
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": dict(schema), "strict": True},
            }
            try:
                return await self._request_json(
                    _json_messages(system, prompt, prefix, None), response_format, cap, prefix
                )
            except _FormatRefused:
                pass  # learned: json_object from now on, for every model of this endpoint
        # The `schema` key is llama-cpp-python's: it turns the schema into a grammar (its
        # SmolLM2 answered 15 tokens of the right shape with it, 84 of the wrong shape
        # without); servers that reject the key are learned like any other refusal.
        return await self._request_json(
            _json_messages(system, prompt, prefix, schema),
            {"type": "json_object", "schema": dict(schema)},
            cap,
            prefix,
        )

    async def _request_json(
        self,
        messages: list[dict[str, Any]],
        response_format: dict[str, Any],
        max_tokens: int,
        prefix: PromptPrefix | None,
    ) -> Any:
        wants_schema = response_format["type"] == "json_schema"
        streamed = in_background()
        # The prefix's tools, declared as the main turns declare them and never called:
        # a template that renders tools renders the same start.
        offered = _offered_tools(prefix)

        async def post(**params: Any) -> Any:
            if streamed:
                return await self._stream_completion(params)
            return await self._post_completion(params)

        params: dict[str, Any] = {
            "model": self._model,
            "messages": messages,
            "stream": streamed,
            "temperature": 0,
            "max_tokens": max_tokens,
            "response_format": response_format,
            **offered,
        }
        try:
            if streamed and self._traffic.interrupts:
                await self._feed_in_slices(messages, offered, whole=1 if prefix else 0)
            completion = await self._send(post, params)
        except openai.APIStatusError as exc:
            if wants_schema and any(word in error_text(exc) for word in _FORMAT_WORDS):
                self._endpoint.json_schema = False
                raise _FormatRefused from exc
            raise self._map_error(exc) from exc
        except openai.OpenAIError as exc:
            raise self._map_error(exc) from exc
        except ValueError as exc:  # a body that is not JSON
            raise self._map_error(exc) from exc
        self._raise_if_error(completion, streaming=False)
        telemetry = _telemetry.current()
        if telemetry is not None:  # the answer's model, id, finish reasons and token usage
            telemetry.completion(completion, self._model)
        return self._parse_json(completion)

    async def _post_completion(self, body: dict[str, Any]) -> Any:
        """POST one non-streamed chat completion; its JSON body, decoded (plain dicts).

        On :class:`SideHTTP` when this model built its client (see ``_side_http``), else
        through the SDK. The SDK's ``create`` runs the parameters through its typed
        transform and builds pydantic models of the answer: more CPU per side query than
        the HTTP exchange, on the event loop, which adds up with many sessions a process;
        its ``post`` keeps the SDK's headers, retries, timeout and errors. Either way,
        cancelling the task closes the connection.
        """
        if self._side_http is not None:
            return await self._side_http.post_json(body)
        text: str = await self._side_client.post("/chat/completions", body=body, cast_to=str)
        return json.loads(text)  # a body that is not JSON: ValueError, mapped by the caller

    async def _feed_in_slices(
        self, messages: list[dict[str, Any]], offered: Mapping[str, Any], *, whole: int
    ) -> None:
        """Have the server read a background query's prompt a slice at a time.

        A server that runs one request at a time reads a prompt without a pause, and
        a hang-up does not stop it there: a long prompt would hold it for that long
        after the user's request arrived. Such servers keep what they last read and
        reuse its longest common start (llama.cpp's prefix cache), so the prompt is
        sent first cut at every :data:`PREFILL_SLICE_CHARS` characters, each with a
        one-token answer: each request holds the server for one slice, and the query
        itself then reads only its last one. Only on an endpoint seen to interrupt (a
        one-request-at-a-time llama.cpp server); anywhere else it would be paid for.

        The first ``whole`` messages (a prompt prefix: the main turns' system prompt)
        are never cut: the server keeps only what a slice shares with the one before,
        so a slice cut inside them would drop the rest of the main turns' start from
        its cache, which the next main turn would then read again. When the server
        does not hold them already, the first slice reads them whole, which is work
        the next main turn would have had to do.
        """
        for part in _prompt_slices(messages, PREFILL_SLICE_CHARS, whole=whole):
            await self._stream_completion(
                {
                    "model": self._model,
                    "messages": part,
                    "stream": True,
                    "temperature": 0,
                    "max_tokens": 1,
                    **offered,
                }
            )

    async def _stream_completion(self, body: dict[str, Any]) -> Any:
        """POST one streamed chat completion and put its text together: the decoded
        body of the same answer not streamed (plain dicts). A stream that ends after
        some chunks with no finish reason (the server made room for another request)
        raises :class:`SideRequestYielded`. Cancelling the task closes the connection."""
        stream = await self._side_client.post(
            "/chat/completions",
            body=body,
            cast_to=dict[str, Any],
            stream=True,
            stream_cls=openai.AsyncStream[dict[str, Any]],
        )
        parts: list[str] = []
        reason: str | None = None
        chunks = 0
        try:
            async for chunk in stream:
                chunks += 1
                self._raise_if_error(chunk, streaming=True)
                for choice in chunk.get("choices") or () if isinstance(chunk, dict) else ():
                    if choice.get("index", 0) not in (0, None):
                        continue
                    if text := (choice.get("delta") or {}).get("content"):
                        parts.append(str(text))
                    if choice.get("finish_reason") is not None and reason is None:
                        reason = str(choice["finish_reason"])
        finally:
            await stream.close()
        if reason is None and chunks:
            raise SideRequestYielded(
                f"{self._where()} ended the side query's stream early (no finish reason "
                f"after {chunks} chunk(s)): it made room for another request",
                model=self._model,
            )
        message = {"role": "assistant", "content": "".join(parts)}
        return {"choices": [{"index": 0, "message": message, "finish_reason": reason}]}

    def _parse_json(self, completion: Any) -> Any:
        message = _first_message(completion)
        content = message.get("content") if message is not None else None
        if refusal := (message.get("refusal") if message is not None else None):
            raise ModelProtocolError(
                f"{self._where()} refused the side query: {one_line(str(refusal), 120)!r}",
                model=self._model,
            )
        if not isinstance(content, str) or not content.strip():
            raise ModelProtocolError(
                f"{self._where()} answered the side query with no content", model=self._model
            )
        text = content.strip()
        if fenced := _FENCE.match(text):
            text = fenced.group(1).strip()
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ModelProtocolError(
                f"{self._where()} answered the side query with invalid JSON: "
                f"{one_line(content, 80)!r}",
                model=self._model,
            ) from exc

    # -- errors --------------------------------------------------------------------------

    def _where(self) -> str:
        return f"{public_url(self._base_url)} (model `{short_model_name(self._model)}`)"

    def _map_error(self, exc: Exception, *, streaming: bool = False) -> ModelError:
        return map_error(
            exc,
            base_url=self._base_url,
            model=self._model,
            streaming=streaming,
            secrets=(self._client.api_key,),
        )

    def _scrub(self, error: ModelError) -> None:
        """Take this model's key, and anything shaped like a key, out of ``error``'s
        message: every error of :meth:`stream` and :meth:`generate_json` passes here,
        whichever server text it quotes."""
        redact_error(error, (self._client.api_key,))


@dataclass(frozen=True, slots=True)
class ModelPair:
    """A main and a side :class:`OpenAIModel`, each on a client (connection pool) of its
    own; closing the pair closes both clients."""

    main: OpenAIModel
    side: OpenAIModel
    main_client: AsyncOpenAI = field(repr=False)
    side_client: AsyncOpenAI = field(repr=False)

    async def aclose(self) -> None:
        """Close both models (and so their HTTP clients)."""
        try:
            await self.main.aclose()
        finally:
            await self.side.aclose()

    async def __aenter__(self) -> ModelPair:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def open_openai_models(
    *,
    model: str,
    base_url: str,
    side_model: str | None = None,
    api_key: str | None = None,
    max_retries: int = 2,
    timeout: float | None = 600,
) -> ModelPair:
    """The one way to build a main and a side model (default: the same name).
    ``max_retries`` applies to the main model's turns; side queries never retry.

    Each model builds its own client, so the side model's side queries go on asyncio
    streams (``_side_http``) and never join the streamed turns' connection pool, whose
    bookkeeping the SDK does per connection on every request.
    """
    options: dict[str, Any] = {
        "base_url": base_url,
        "api_key": api_key,
        "max_retries": max_retries,
        "timeout": timeout,
    }
    main = OpenAIModel(model=model, **options)
    side = OpenAIModel(model=side_model or model, **options)
    return ModelPair(main=main, side=side, main_client=main._client, side_client=side._client)


def _prompt_slices(
    messages: list[dict[str, Any]], step: int, *, whole: int = 0
) -> Iterator[list[dict[str, Any]]]:
    """The messages cut after every ``step`` characters of their text, shortest first
    (the whole is not among them); the first ``whole`` messages are never cut."""
    for i, message in enumerate(messages):
        if i < whole:
            continue
        content = message.get("content")
        if not isinstance(content, str):
            continue
        for cut in range(step, len(content), step):
            yield [*messages[:i], {**message, "content": content[:cut]}]


def _json_messages(
    system: str, prompt: str, prefix: PromptPrefix | None, schema: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """A side query's messages: its instruction as the system prompt, or, with a
    ``prefix``, the prefix's system prompt and the instruction leading the user message;
    with ``schema`` (the ``json_object`` form) the schema said after the instruction,
    or at the end of the user message."""
    note = (
        f"Answer with one JSON object that matches this JSON schema:\n{json.dumps(dict(schema))}"
        if schema is not None
        else ""
    )
    if prefix is None:
        instruction = f"{system}\n\n{note}" if note else system
        return [{"role": "system", "content": instruction}, {"role": "user", "content": prompt}]
    user = "\n\n".join(part for part in (system, prompt, note) if part)
    return [{"role": "system", "content": prefix.system}, {"role": "user", "content": user}]


def _offered_tools(prefix: PromptPrefix | None) -> dict[str, Any]:
    """The request fields declaring a prefix's tools, none to be called (none without)."""
    if prefix is None or not prefix.tools:
        return {}
    return {"tools": tools_to_openai(prefix.tools), "tool_choice": "none"}


def _tool_choice(choice: str) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


class _FormatRefused(Exception):
    """Internal: the endpoint refused ``response_format`` ``json_schema``."""


@dataclass(slots=True)
class _CallBuilder:
    id: str | None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _CallAssembler:
    """Tool calls streamed in pieces, keyed by ``index`` (several may interleave)."""

    def __init__(self) -> None:
        self._calls: dict[int, _CallBuilder] = {}

    def add(self, delta: Any) -> None:
        call_id = getattr(delta, "id", None) or None
        index = getattr(delta, "index", None)
        if not isinstance(index, int):  # some servers omit it: match by id, else continue the last
            known = [i for i, b in self._calls.items() if call_id and b.id == call_id]
            if known:
                index = known[0]
            elif call_id or not self._calls:
                index = max(self._calls, default=-1) + 1
            else:
                index = max(self._calls)
        builder = self._calls.setdefault(index, _CallBuilder(id=None))
        if call_id and not builder.id:
            builder.id = str(call_id)
        function = getattr(delta, "function", None)
        if name := getattr(function, "name", None):
            builder.name = builder.name or str(name)
        if arguments := getattr(function, "arguments", None):
            builder.arguments.append(str(arguments))

    def take(self) -> list[_CallBuilder]:
        """The calls so far, in index order; the assembler is empty afterwards."""
        calls = [self._calls[i] for i in sorted(self._calls)]
        self._calls.clear()
        return calls


def _first_message(completion: Any) -> Mapping[str, Any] | None:
    """``choices[0].message`` of a decoded chat completion (``None`` if absent)."""
    choices = completion.get("choices") if isinstance(completion, Mapping) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, Mapping) else None
    return message if isinstance(message, Mapping) else None


def _usage_of(chunk: Any) -> Usage | None:
    usage = getattr(chunk, "usage", None)
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    return Usage(prompt_tokens=int(prompt or 0), completion_tokens=int(completion or 0))

"""The OpenAI-compatible model, on the official SDK's ``AsyncOpenAI``.

Works with any chat completions endpoint (OpenAI, Qwen's compatible mode, vLLM,
Ollama, llama.cpp server...). Two things endpoints disagree on are handled here:

* ``stream_options`` (for usage in streams): a 400/422 mentioning it makes the model
  retry once without it, and it is not sent again by that model instance.
* ``response_format`` of type ``json_schema``: a 400/422 whose message mentions
  ``response_format``, ``json_schema`` or ``schema`` makes the model retry once with
  ``json_object`` (the schema then goes into the system prompt), and that model
  instance uses ``json_object`` from then on. Other 400s are reported as they are,
  so a real mistake is not hidden behind a second request.

Errors come out as the :class:`~asyncrecall.ModelError` family, with a one-line
reason naming the base URL and the model, raised ``from`` the SDK's exception.
Cancelling the task running :meth:`OpenAIModel.stream` or
:meth:`OpenAIModel.generate_json` closes the HTTP connection (the response is
closed in a ``finally``), and the cancellation propagates.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, cast

import openai
from openai import AsyncOpenAI

from asyncrecall._exceptions import ModelError, ModelProtocolError
from asyncrecall.models._convert import contents_to_messages, tools_to_openai, validate_messages
from asyncrecall.models._openai_errors import error_text, map_error, one_line
from asyncrecall.models._protocol import Finished, StreamEvent, TextDelta, ToolCallReady, Usage
from asyncrecall.models._types import Content, FunctionCall, ToolSpec

__all__ = ["DEBUG_ENV", "ModelPair", "OpenAIModel", "open_openai_models"]

DEBUG_ENV = "ASYNCRECALL_DEBUG"
"""Set to ``1`` to validate the tool-call pairing of every request before sending it."""

_PLACEHOLDER_KEY = "not-needed"  # local servers accept any key; the SDK insists on one
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?\s*```$", re.DOTALL)
_SCHEMA_WORDS = ("response_format", "json_schema", "schema")


def _debug_on() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _make_client(
    *, base_url: str, api_key: str | None, max_retries: int, timeout: float | None
) -> AsyncOpenAI:
    key = api_key or os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY
    return AsyncOpenAI(api_key=key, base_url=base_url, max_retries=max_retries, timeout=timeout)


class OpenAIModel:
    """A :class:`~asyncrecall.models.Model` speaking OpenAI chat completions.

    ``api_key`` defaults to ``OPENAI_API_KEY``, else a placeholder (local servers
    accept any). Pass ``client`` to share one connection pool between models (see
    :meth:`pair`); a shared client is not closed by :meth:`aclose`. ``max_retries``
    is the SDK's retry budget for connection errors, 408/409/429 and 5xx.
    ``validate_history`` (default: on when ``ASYNCRECALL_DEBUG=1``) checks the
    tool-call pairing of each request before sending it.
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
    ) -> None:
        self._model = model
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
        self._validate = validate_history
        self._stream_options_supported = True
        self._json_schema_supported = True
        self._generated_ids = 0

    @classmethod
    def pair(
        cls,
        *,
        model: str,
        base_url: str,
        side_model: str | None = None,
        api_key: str | None = None,
        max_retries: int = 2,
        timeout: float | None = 600,
    ) -> ModelPair:
        """A main model and a side model (default: the same name) sharing one client."""
        client = _make_client(
            base_url=base_url, api_key=api_key, max_retries=max_retries, timeout=timeout
        )
        options: dict[str, Any] = {
            "base_url": base_url,
            "client": client,
            "max_retries": max_retries,
            "timeout": timeout,
        }
        main = cls(model=model, **options)
        side = cls(model=side_model or model, **options)
        return ModelPair(main=main, side=side, client=client)

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
        """False once the endpoint refused ``response_format`` ``json_schema``."""
        return self._json_schema_supported

    @property
    def stream_options_supported(self) -> bool:
        """False once the endpoint refused ``stream_options``."""
        return self._stream_options_supported

    async def aclose(self) -> None:
        """Close the HTTP client if this model created it."""
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
        return f"OpenAIModel(model={self._model!r}, base_url={self._base_url!r})"

    # -- streaming turn --------------------------------------------------------------

    async def stream(
        self,
        contents: Sequence[Content],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream one turn: text deltas, complete tool calls (index order), usage, one Finished.

        Close the iterator (``contextlib.aclosing``) if you stop early; cancelling
        the consuming task closes the connection too.
        """
        messages = contents_to_messages(contents, system=system)
        if self._validate if self._validate is not None else _debug_on():
            validate_messages(messages)
        response = await self._open_stream(messages, tools_to_openai(tools))
        calls = _CallAssembler()
        reason: str | None = None
        usage: Usage | None = None
        try:
            while True:
                try:
                    chunk = await response.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise self._map_error(exc, streaming=True) from exc
                if (reported := _usage_of(chunk)) is not None:
                    usage = reported
                for choice in getattr(chunk, "choices", None) or ():
                    if getattr(choice, "index", 0) not in (0, None):
                        continue
                    delta = getattr(choice, "delta", None)
                    if text := getattr(delta, "content", None):
                        yield TextDelta(str(text))
                    for call_delta in getattr(delta, "tool_calls", None) or ():
                        calls.add(call_delta)
                    finish = getattr(choice, "finish_reason", None)
                    if finish is not None and reason is None:
                        reason = str(finish)
                        for call in self._complete_calls(calls):
                            yield ToolCallReady(call)
            for call in self._complete_calls(calls):
                yield ToolCallReady(call)
            if usage is not None:
                yield usage
            yield Finished(reason)
        finally:
            await response.close()

    async def _open_stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> openai.AsyncStream[Any]:
        create = self._client.chat.completions.create
        tools_param: Any = tools or openai.omit
        if self._stream_options_supported:
            try:
                return await create(
                    model=self._model,
                    messages=cast(Any, messages),
                    tools=tools_param,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                if "stream_options" not in error_text(exc):
                    raise self._map_error(exc) from exc
                self._stream_options_supported = False
            except openai.OpenAIError as exc:
                raise self._map_error(exc) from exc
        try:
            return await create(
                model=self._model, messages=cast(Any, messages), tools=tools_param, stream=True
            )
        except openai.OpenAIError as exc:
            raise self._map_error(exc) from exc

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
            call_id = builder.id
            if not call_id:
                self._generated_ids += 1
                call_id = f"call_{self._generated_ids}"
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
    ) -> Any:
        """One non-streamed, temperature-0 request answering a JSON value.

        Uses ``response_format`` ``json_schema`` (strict), falling back once to
        ``json_object`` when the endpoint refuses it (see the module docstring).
        Raises :class:`~asyncrecall.ModelProtocolError` when the answer is not JSON.
        """
        user = {"role": "user", "content": prompt}
        if self._json_schema_supported:
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "schema": dict(schema), "strict": True},
            }
            try:
                return await self._request_json(
                    [{"role": "system", "content": system}, user], response_format
                )
            except _SchemaRefused:
                self._json_schema_supported = False
        fallback_system = (
            f"{system}\n\nAnswer with one JSON object that matches this JSON schema:\n"
            f"{json.dumps(dict(schema))}"
        )
        return await self._request_json(
            [{"role": "system", "content": fallback_system}, user], {"type": "json_object"}
        )

    async def _request_json(
        self, messages: list[dict[str, Any]], response_format: dict[str, Any]
    ) -> Any:
        wants_schema = response_format["type"] == "json_schema"
        try:
            completion = await self._post_completion(
                {
                    "model": self._model,
                    "messages": messages,
                    "stream": False,
                    "temperature": 0,
                    "response_format": response_format,
                }
            )
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            if wants_schema and any(word in error_text(exc) for word in _SCHEMA_WORDS):
                raise _SchemaRefused from exc
            raise self._map_error(exc) from exc
        except openai.OpenAIError as exc:
            raise self._map_error(exc) from exc
        except ValueError as exc:  # a body that is not JSON
            raise self._map_error(exc) from exc
        return self._parse_json(completion)

    async def _post_completion(self, body: dict[str, Any]) -> Any:
        """POST one non-streamed chat completion; its JSON body, decoded (plain dicts).

        The SDK's ``create`` runs the parameters through its typed transform and builds
        pydantic models of the answer: about 2 ms of CPU per side query, more than the
        HTTP exchange, on the event loop (issue 10, many sessions). ``post`` keeps the
        SDK's headers, retries, timeout and errors. Cancelling the task closes the
        connection (the HTTP client closes an unread response on any exception).
        """
        text: str = await self._client.post("/chat/completions", body=body, cast_to=str)
        return json.loads(text)  # a body that is not JSON: ValueError, mapped by the caller

    def _parse_json(self, completion: Any) -> Any:
        content = _message_content(completion)
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
        return f"{self._base_url} (model `{self._model}`)"

    def _map_error(self, exc: Exception, *, streaming: bool = False) -> ModelError:
        return map_error(exc, base_url=self._base_url, model=self._model, streaming=streaming)


@dataclass(frozen=True, slots=True)
class ModelPair:
    """A main and a side :class:`OpenAIModel` sharing one client; closing it closes the client."""

    main: OpenAIModel
    side: OpenAIModel
    client: AsyncOpenAI = field(repr=False)

    async def aclose(self) -> None:
        """Close the shared HTTP client."""
        await self.client.close()

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
    """A main and a side model sharing one client: :meth:`OpenAIModel.pair` as a function."""
    return OpenAIModel.pair(
        model=model,
        base_url=base_url,
        side_model=side_model,
        api_key=api_key,
        max_retries=max_retries,
        timeout=timeout,
    )


class _SchemaRefused(Exception):
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


def _message_content(completion: Any) -> Any:
    """``choices[0].message.content`` of a decoded chat completion (``None`` if absent)."""
    choices = completion.get("choices") if isinstance(completion, Mapping) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, Mapping) else None
    return message.get("content") if isinstance(message, Mapping) else None


def _usage_of(chunk: Any) -> Usage | None:
    usage = getattr(chunk, "usage", None)
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    return Usage(prompt_tokens=int(prompt or 0), completion_tokens=int(completion or 0))

"""Every endpoint failure maps to one ModelError subclass with an actionable one-line reason."""

from __future__ import annotations

import socket

import httpx2
import openai
import pytest

from asyncrecall import (
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelProtocolError,
    ModelRateLimitError,
    ModelServerError,
)
from asyncrecall.models import OpenAIModel
from asyncrecall.models._openai_errors import map_error, one_line
from asyncrecall.testing import LocalServer, Reply

from .helpers import run_turn


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _assert_one_line(error: ModelError) -> None:
    assert "\n" not in str(error)
    assert error.model is not None


async def test_connection_refused() -> None:
    """Nothing listening: ModelConnectionError naming the URL and 'connection refused'."""
    base_url = f"http://127.0.0.1:{_closed_port()}/v1"
    async with OpenAIModel(model="m", base_url=base_url, max_retries=0) as model:
        with pytest.raises(ModelConnectionError) as caught:
            await run_turn(model)
        with pytest.raises(ModelConnectionError):
            await model.generate_json(system="s", prompt="p", schema={}, schema_name="x")
    assert str(caught.value).startswith(f"cannot reach {base_url}: connection refused")
    assert isinstance(caught.value.__cause__, openai.APIConnectionError)
    _assert_one_line(caught.value)


@pytest.mark.parametrize(
    ("status", "error_type", "words"),
    [
        (401, ModelAuthError, "refused the API key"),
        (403, ModelAuthError, "refused the API key"),
        (429, ModelRateLimitError, "rate limiting"),
        (500, ModelServerError, "HTTP 500"),
        (503, ModelServerError, "HTTP 503"),
        (400, ModelError, "rejected the request"),
    ],
)
async def test_http_status_mapping(
    model: OpenAIModel,
    local_server: LocalServer,
    status: int,
    error_type: type[ModelError],
    words: str,
) -> None:
    """Each HTTP error status maps to its ModelError, with status, URL, model and server message."""
    local_server.script("main", Reply(status=status, error_message="the server says why"))
    with pytest.raises(error_type) as caught:
        await run_turn(model)
    error = caught.value
    assert type(error) is error_type
    assert error.status == status
    assert words in str(error)
    assert local_server.base_url in str(error)
    assert "`main`" in str(error)
    assert "the server says why" in str(error)
    assert isinstance(error.__cause__, openai.APIStatusError)
    _assert_one_line(error)


async def test_unknown_model_is_not_found(local_server: LocalServer) -> None:
    """404 for an unknown model names the model and suggests the base URL."""
    async with OpenAIModel(model="nope", base_url=local_server.base_url, max_retries=0) as model:
        with pytest.raises(ModelNotFoundError) as caught:
            await run_turn(model)
    message = str(caught.value)
    assert "unknown model `nope` or wrong base URL" in message
    assert "model 'nope' not found" in message
    assert caught.value.status == 404


async def test_side_query_errors_map_too(model: OpenAIModel, local_server: LocalServer) -> None:
    local_server.script("main", Reply(status=401, error_message="bad key"))
    with pytest.raises(ModelAuthError):
        await model.generate_json(system="s", prompt="p", schema={}, schema_name="x")


async def test_malformed_stream_is_a_protocol_error(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Non-JSON SSE data: ModelProtocolError, and the connection is released."""
    local_server.script("main", Reply(text="hello", malformed_stream=True))
    with pytest.raises(ModelProtocolError, match="malformed stream"):
        await run_turn(model)
    request = local_server.wait_for(lambda r: r.settled)
    assert request.status == 200


async def test_retries_are_the_sdks(local_server: LocalServer) -> None:
    """With max_retries=1 a 500 is retried once (the SDK's budget), then mapped."""
    local_server.script("main", Reply(status=500, retry_after=0.001), Reply(text="recovered"))
    async with OpenAIModel(model="main", base_url=local_server.base_url, max_retries=1) as model:
        events = await run_turn(model)
    assert [r.status for r in local_server.requests] == [500, 200]
    assert events


async def test_timeout_is_a_connection_error(local_server: LocalServer) -> None:
    local_server.script("main", Reply(hang=True))
    async with OpenAIModel(
        model="main", base_url=local_server.base_url, max_retries=0, timeout=0.05
    ) as model:
        with pytest.raises(ModelConnectionError, match="timed out waiting for"):
            await run_turn(model)


async def test_connection_dropped_mid_stream(model: OpenAIModel, local_server: LocalServer) -> None:
    local_server.script("main", Reply(text="abcdef", chunk_size=1, drop_after=3))
    with pytest.raises(ModelConnectionError, match="dropped mid-stream"):
        await run_turn(model)


async def test_error_event_in_the_stream(model: OpenAIModel, local_server: LocalServer) -> None:
    local_server.script("main", Reply(text="abc", stream_error="overloaded, try later"))
    with pytest.raises(ModelServerError, match="overloaded, try later"):
        await run_turn(model)


def _request() -> httpx2.Request:
    return httpx2.Request("POST", "http://h/v1/chat/completions")


def test_dns_failure_and_unknown_exceptions_read_well() -> None:
    """The mapping of rarer failures, checked on the mapping function itself."""
    dns = openai.APIConnectionError(request=_request())
    dns.__cause__ = socket.gaierror(-2, "Name or service not known")
    error = map_error(dns, base_url="http://h/v1", model="m")
    assert str(error) == (
        "cannot reach http://h/v1: host not found ([Errno -2] Name or service not known)"
        " (model `m`)"
    )
    odd = map_error(RuntimeError("weird\nthing"), base_url="http://h/v1", model="m")
    assert type(odd) is ModelError
    assert str(odd) == "http://h/v1 (model `m`) failed: RuntimeError: weird thing"
    assert one_line("x" * 300, 10) == "x" * 9 + "…"


ECHOED_KEY = "plain-key-0f3a9c71b2"


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=401, error_message=f"Incorrect API key provided: {ECHOED_KEY}"),
        Reply(status=500, error_message=f"upstream said: Authorization: Bearer {ECHOED_KEY}"),
        Reply(error_in_200=f"bad key {ECHOED_KEY}"),
        Reply(stream_error=f"your key {ECHOED_KEY} expired"),
    ],
    ids=["401", "500", "error-in-200", "stream-error"],
)
async def test_a_key_the_server_echoes_is_not_in_the_errors_message(
    local_server: LocalServer, reply: Reply
) -> None:
    """Whatever way the server's words come back (a status error, an error object with
    HTTP 200, an error event mid-stream), the model's key is not in the exception's
    message, for a turn and for a side query; the rest of the reason is."""
    local_server.set_default("main", reply)
    async with OpenAIModel(
        model="main", base_url=local_server.base_url, api_key=ECHOED_KEY, max_retries=0
    ) as model:
        with pytest.raises(ModelError) as turn:
            await run_turn(model)
        with pytest.raises(ModelError) as side:
            await model.generate_json(system="s", prompt="p", schema={}, schema_name="x")
    for error in (turn.value, side.value):
        assert ECHOED_KEY not in str(error) and local_server.base_url in str(error)
    assert "[redacted]" in str(turn.value)


def test_a_non_ascii_base_url_is_sent_in_ascii_or_refused() -> None:
    """An IDNA host becomes its ``xn--`` form, other characters are percent-encoded; a
    host IDNA refuses is a ConfigError naming the URL, not a traceback from HTTP."""
    from asyncrecall import ConfigError

    assert OpenAIModel(model="m", base_url="http://bücher.example/v1").base_url == (
        "http://xn--bcher-kva.example/v1"
    )
    with pytest.raises(ConfigError, match="not a valid domain name"):
        OpenAIModel(model="m", base_url="http://☃.example/v1")

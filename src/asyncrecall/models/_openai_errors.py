"""SDK exceptions → the :class:`~asyncrecall.ModelError` family, with one-line reasons.

Every reason names the base URL (never the ``user:password@`` it may carry: see
:func:`public_url`) and the model, and says what to check. The server's words in it
(an error body may echo the key it was sent) go through :func:`asyncrecall._redact.redact`
with the model's key. The caller raises the result ``from`` the SDK's exception, so the
cause stays attached.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath

import openai

from asyncrecall._exceptions import (
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelProtocolError,
    ModelRateLimitError,
    ModelServerError,
)
from asyncrecall._redact import redact, without_credentials

__all__ = [
    "error_text",
    "map_error",
    "one_line",
    "public_url",
    "short_model_name",
    "without_credentials",
]


def map_error(
    exc: Exception,
    *,
    base_url: str,
    model: str,
    streaming: bool = False,
    secrets: Iterable[str | None] = (),
) -> ModelError:
    """The ModelError for an SDK (or decoding) exception raised by a request to ``base_url``.

    ``streaming`` says the exception came while reading a stream that had started. No
    credentials of a URL (``user:password@``), none of ``secrets`` (the key the request
    carried) and nothing shaped like a key are in the reason.
    """
    error = _map_error(exc, base_url=public_url(base_url), model=model, streaming=streaming)
    if len(error.args) == 1 and isinstance(error.args[0], str):
        error.args = (redact(error.args[0], secrets),)
    return error


def _map_error(exc: Exception, *, base_url: str, model: str, streaming: bool) -> ModelError:
    name = short_model_name(model)
    where = f"{base_url} (model `{name}`)"
    if isinstance(exc, openai.APITimeoutError):
        return ModelConnectionError(f"timed out waiting for {where}", model=model)
    if isinstance(exc, openai.APIConnectionError):
        reason = _connection_reason(exc)
        if streaming:
            return ModelConnectionError(
                f"connection to {where} dropped mid-stream: {reason}", model=model
            )
        return ModelConnectionError(
            f"cannot reach {base_url}: {reason} (model `{name}`)", model=model
        )
    if isinstance(exc, openai.APIStatusError):
        return _map_status(exc, base_url=base_url, model=model, name=name)
    if isinstance(exc, openai.APIResponseValidationError):
        return ModelProtocolError(f"{where} answered an invalid body", model=model)
    if isinstance(exc, openai.APIError):  # an error event inside the stream
        return ModelServerError(
            f"{where} reported an error mid-stream: {one_line(exc.message)}", model=model
        )
    if isinstance(exc, ValueError):
        what = "stream" if streaming else "response"
        detail = f"data is not JSON ({exc.msg})" if isinstance(exc, json.JSONDecodeError) else exc
        return ModelProtocolError(
            f"{where} sent a malformed {what}: {one_line(str(detail))}", model=model
        )
    return ModelError(f"{where} failed: {type(exc).__name__}: {one_line(str(exc))}", model=model)


def _map_status(exc: openai.APIStatusError, *, base_url: str, model: str, name: str) -> ModelError:
    status = exc.status_code
    detail = one_line(_server_message(exc))
    if status in (401, 403):
        return ModelAuthError(
            f"{base_url} refused the API key (HTTP {status}, model `{name}`): {detail}; "
            "check --api-key / ASYNCRECALL_API_KEY",
            model=model,
            status=status,
        )
    if status == 404:
        return ModelNotFoundError(
            f"{base_url} answered 404: unknown model `{name}` or wrong base URL ({detail})",
            model=model,
            status=status,
        )
    if status == 429:
        return ModelRateLimitError(
            f"{base_url} is rate limiting model `{name}` (HTTP 429): {detail}",
            model=model,
            status=status,
        )
    kind = ModelServerError if status >= 500 else ModelError
    verb = "failed with" if status >= 500 else "rejected the request with"
    return kind(
        f"{base_url} {verb} HTTP {status} (model `{name}`): {detail}", model=model, status=status
    )


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body, str) and body:
        return body
    return exc.message


def error_text(exc: openai.APIStatusError) -> str:
    """The error's message and body, lower-cased, for matching words like ``stream_options``."""
    return f"{exc.message} {exc.body}".lower()


def _connection_reason(exc: BaseException) -> str:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    for link in chain:
        if "illegal header value" in str(link).lower():  # h11's words: they hold the value
            return (
                "a header holds a control character (CR, LF or another): "
                "check the API key and the default headers"
            )
        if isinstance(link, ConnectionRefusedError) or "refused" in str(link).lower():
            return "connection refused"
        if isinstance(link, socket.gaierror):
            return f"host not found ({one_line(str(link))})"
    deepest = chain[-1]
    return one_line(str(deepest) or type(deepest).__name__)


def public_url(url: str) -> str:
    """``url`` without the ``user:password@`` it may carry, for error texts and logs."""
    return without_credentials(url)


def one_line(text: str, limit: int = 240) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def short_model_name(model: str) -> str:
    """``model`` fit for an error line: a GGUF file's path (what llama.cpp's servers report
    as the model id) becomes its file name without ``.gguf``; other names stay as they are."""
    if model.lower().endswith(".gguf"):
        return PurePosixPath(model.replace("\\", "/")).name[: -len(".gguf")]
    return model

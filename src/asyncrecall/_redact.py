"""Secrets out of every text we print: the one rule, :func:`redact`.

An endpoint may echo what it was sent: a 401 body that quotes the key, a proxy that
repeats the ``Authorization`` header, a URL with ``user:password@``. Every error text
that carries a server's words (the models' exceptions, and again the command line's
stderr lines, its ``json`` result and its ``stream-json`` ``error`` event) goes through
:func:`redact`, which takes out:

- the exact values it is given (the configured API key), also URL-quoted;
- common key shapes: ``sk-...`` (OpenAI, Anthropic, DeepSeek and others), ``gsk_``,
  ``hf_``, ``ghp_``/``github_pat_``, ``AIza...``, ``xai-...``, ``Bearer ...``;
- the value after a key-like name (``api_key=...``, ``"authorization": "..."``,
  ``x-api-key: ...``, ``?key=...``);
- the ``user:password@`` of every URL.

Values shorter than :data:`MIN_SECRET_CHARS` are not searched for as such (a local
server takes ``x`` or ``test`` as a key; replacing every ``x`` would ruin the line),
though the shapes above still apply to them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, TypeVar
from urllib.parse import quote

__all__ = ["MIN_SECRET_CHARS", "REDACTED", "redact", "redact_error", "without_credentials"]

_E = TypeVar("_E", bound=BaseException)

#: What a secret becomes.
REDACTED: Final = "[redacted]"
#: A configured value shorter than this is not replaced where it occurs as such.
MIN_SECRET_CHARS: Final = 8

# `scheme://user:password@`: the credentials part of a URL anywhere in a text.
_CREDENTIALS: Final = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s]*@")

_TOKEN: Final = r"[A-Za-z0-9_\-.~+/=]"
_SHAPES: Final = re.compile(
    r"\b(?:"
    r"sk-" + _TOKEN + r"{6,}"  # OpenAI, Anthropic (sk-ant-), DeepSeek, Moonshot, ...
    r"|(?:gsk|hf|ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abpr])_" + _TOKEN + r"{8,}"
    r"|xai-" + _TOKEN + r"{8,}"
    r"|AIza[0-9A-Za-z_\-]{20,}"  # Google API keys
    r")"
)
# `Bearer abc`, `Basic abc`: the scheme stays, the credentials go.
_AUTH_SCHEME: Final = re.compile(r"\b(Bearer|Basic|Token)(\s+)" + _TOKEN + r"+", re.IGNORECASE)
# A key-like name, a separator (`=`, `:`, quotes around either), then the value.
_NAMED: Final = re.compile(
    r"(?P<name>\b(?:x-)?api[_-]?key|\bapikey|\baccess[_-]?token|\bauth[_-]?token"
    r"|\bsecret(?:[_-]?key)?|\bpassword|\bauthorization|[?&]key)"
    r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)"
    r"(?P<value>(?!\[redacted\])[^\s\"',;&}\]]+)",
    re.IGNORECASE,
)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with ``secrets`` (exact values) and every secret-like shape replaced by
    :data:`REDACTED`, and URLs without their ``user:password@``."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) < MIN_SECRET_CHARS:
            continue
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            text = text.replace(form, REDACTED)
    text = _AUTH_SCHEME.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", text)
    text = _SHAPES.sub(REDACTED, text)
    text = _NAMED.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    return without_credentials(text)


def without_credentials(text: str) -> str:
    """``text`` with the ``user:password@`` of every URL in it taken out."""
    return _CREDENTIALS.sub(r"\1", text)


def redact_error(error: _E, secrets: Iterable[str | None] = ()) -> _E:
    """``error`` itself, its text arguments passed through :func:`redact` (its type,
    attributes and cause unchanged)."""
    error.args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in error.args)
    return error

"""An endpoint's base URL, checked and made ASCII before anything is sent to it.

HTTP sends a host and a path in ASCII: a non-ASCII host goes on the wire in its IDNA
form (``bücher.example`` is ``xn--bcher-kva.example``), anything else non-ASCII
percent-encoded. :func:`http_base_url` does that once, where the URL is configured, so
every client (the SDK's, the side queries' own) sees the same URL, and a URL that
cannot be sent is one :class:`~asyncrecall.ConfigError` naming it, not a traceback
from deep in an HTTP library.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Final
from urllib.parse import quote, urlsplit, urlunsplit

from asyncrecall._exceptions import ConfigError
from asyncrecall._redact import without_credentials

__all__ = ["http_base_url"]

# What stays as it is in a path, query or fragment: the URL's own delimiters, and `%`
# (a URL given already encoded stays so).
_SAFE: Final = "/%:@!$&'()*+,;=-._~?"


def http_base_url(value: Any) -> str:
    """``value`` as an ``http(s)://`` URL with a host, in ASCII; a :class:`ConfigError`
    naming it when it has no such scheme or host, holds a space or control character,
    a bad port, or a host that is not a valid (internationalised) domain name."""
    text = str(value).strip()
    shown = without_credentials(text)
    if any(ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf") for ch in text):
        raise ConfigError(f"the base URL {shown!r} holds a space or control character")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"the base URL {shown!r} is not usable: {exc}") from exc
    host = parts.hostname
    if parts.scheme.lower() not in ("http", "https") or not host:
        raise ConfigError(f"the base URL {shown!r} is not an http:// or https:// URL")
    if text.isascii():
        return text
    ascii_host = _idna(host, shown)
    netloc = f"[{ascii_host}]" if ":" in ascii_host else ascii_host
    if port is not None:
        netloc = f"{netloc}:{port}"
    if parts.username is not None:
        userinfo = quote(parts.username, safe="%")
        if parts.password is not None:
            userinfo += ":" + quote(parts.password, safe="%")
        netloc = f"{userinfo}@{netloc}"
    rest = (quote(part, safe=_SAFE) for part in (parts.path, parts.query, parts.fragment))
    return urlunsplit((parts.scheme, netloc, *rest))


def _idna(host: str, shown: str) -> str:
    """``host`` in ASCII: IDNA 2008 with the UTS 46 mapping, as the HTTP client encodes
    it (``idna`` comes with it)."""
    if host.isascii():
        return host
    import idna

    try:
        return str(idna.encode(host, uts46=True).decode("ascii"))
    except (idna.IDNAError, UnicodeError) as exc:
        raise ConfigError(
            f"the base URL {shown!r} has a host that is not a valid domain name: {exc}"
        ) from exc

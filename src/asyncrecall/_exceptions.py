"""The one exception tree of asyncrecall.

    AsyncRecallError                 root: catch this to catch everything we raise
    ├── ConfigError                  a setting is missing, malformed or contradictory
    ├── ModelError                   the model endpoint failed (carries a one-line reason)
    │   ├── ModelConnectionError     nothing answered at the base URL
    │   ├── ModelAuthError           401/403: the key was refused
    │   ├── ModelNotFoundError       404: unknown model or wrong base URL
    │   ├── ModelRateLimitError      429: too many requests or quota exhausted
    │   ├── ModelServerError         5xx from the endpoint
    │   └── ModelProtocolError       the answer broke the protocol (bad stream, invalid JSON)
    ├── MemoryStoreError             the memory folder could not be read or written
    │   ├── MemoryConflictError      a memory changed since the writer read it: nothing written
    │   └── SelectorError            a selector's answer was invalid (unknown path, too many)
    ├── ToolError                    a tool was called wrongly (bad arguments, path outside)
    └── HistoryError                 a conversation broke the tool-call pairing rule

Every error is raised ``from`` its cause, and its message is one line a user can act on.
"""

from __future__ import annotations

__all__ = [
    "AsyncRecallError",
    "ConfigError",
    "HistoryError",
    "MemoryConflictError",
    "MemoryStoreError",
    "ModelAuthError",
    "ModelConnectionError",
    "ModelError",
    "ModelNotFoundError",
    "ModelProtocolError",
    "ModelRateLimitError",
    "ModelServerError",
    "SelectorError",
    "ToolError",
]


class AsyncRecallError(Exception):
    """Root of every error asyncrecall raises on purpose."""


class ConfigError(AsyncRecallError):
    """A setting is missing, malformed or contradictory."""


class ModelError(AsyncRecallError):
    """The model endpoint failed; the message is a one-line reason."""

    def __init__(self, message: str, *, model: str | None = None, status: int | None = None):
        super().__init__(message)
        self.model = model
        self.status = status


class ModelConnectionError(ModelError):
    """Nothing answered at the configured base URL (refused, DNS, TLS, dropped)."""


class ModelAuthError(ModelError):
    """The endpoint refused the API key (HTTP 401 or 403)."""


class ModelNotFoundError(ModelError):
    """The endpoint does not know the model, or the base URL is wrong (HTTP 404)."""


class ModelRateLimitError(ModelError):
    """The endpoint throttled the request or the quota is exhausted (HTTP 429)."""


class ModelServerError(ModelError):
    """The endpoint failed on its side (HTTP 5xx)."""


class ModelProtocolError(ModelError):
    """The endpoint's answer broke the protocol: a malformed stream or invalid JSON."""


class MemoryStoreError(AsyncRecallError):
    """The memory folder could not be read or written, or a memory is invalid."""


class MemoryConflictError(MemoryStoreError):
    """A write's precondition failed: the memory changed since it was read; nothing was written."""


class SelectorError(MemoryStoreError):
    """A selector's answer was invalid: an unknown path, too many paths, or malformed."""


class ToolError(AsyncRecallError):
    """A tool was called wrongly: bad arguments or a path outside the project."""


class HistoryError(AsyncRecallError):
    """A conversation broke the rule that each tool call is followed by its response."""

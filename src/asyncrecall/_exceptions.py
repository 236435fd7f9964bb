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
    ├── HistoryError                 a conversation broke the tool-call pairing rule
    ├── MemoryStoreError             a store could not read or write, or a memory is invalid
    │   └── MemoryConflictError      a memory changed since the writer read it: nothing written
    ├── SelectorError                a selector failed to choose (invalid answer, timed out)
    ├── ToolError                    a tool was called wrongly (bad arguments, path outside)
    └── RecallNotReady               a pending recall was read before it settled

A selector's failure is not a store's: ``except MemoryStoreError`` catches what the
store did, never what a selector (or its side model) answered. Every error is raised
``from`` its cause, and its message is one line a user can act on.
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
    "RecallNotReady",
    "SelectorError",
    "ToolError",
]


class AsyncRecallError(Exception):
    """Root of every error asyncrecall raises on purpose: catch it to catch them all."""


class ConfigError(AsyncRecallError):
    """Raised when a setting, flag or constructor option is missing, malformed or
    contradictory (an unusable base URL, a store URL with no driver, a bad namespace)."""


class ModelError(AsyncRecallError):
    """Raised when the model endpoint fails; the message is a one-line reason, and
    ``model`` and ``status`` (the HTTP status, when there was one) say where."""

    def __init__(self, message: str, *, model: str | None = None, status: int | None = None):
        super().__init__(message)
        self.model = model
        self.status = status


class ModelConnectionError(ModelError):
    """Raised when nothing answered at the configured base URL (refused, DNS, TLS, dropped)."""


class ModelAuthError(ModelError):
    """Raised when the endpoint refuses the API key (HTTP 401 or 403)."""


class ModelNotFoundError(ModelError):
    """Raised when the endpoint does not know the model, or the base URL is wrong (HTTP 404)."""


class ModelRateLimitError(ModelError):
    """Raised when the endpoint throttles the request or the quota is exhausted (HTTP 429)."""


class ModelServerError(ModelError):
    """Raised when the endpoint fails on its side (HTTP 5xx)."""


class ModelProtocolError(ModelError):
    """Raised when the endpoint's answer breaks the protocol: a malformed stream, or
    a JSON answer that is not JSON."""


class HistoryError(AsyncRecallError):
    """Raised before anything is sent when a conversation breaks the rule that each
    tool call is followed by exactly its response (a caller's history, not a store's)."""


class MemoryStoreError(AsyncRecallError):
    """Raised when a memory store cannot read or write (a folder, a database), when a
    memory or name is invalid, when no memory has the name asked for, or when a
    memory's recorded history cannot be read or reverted."""


class MemoryConflictError(MemoryStoreError):
    """Raised when a write's precondition fails: the memory changed since it was read,
    and nothing was written (read it again and retry)."""


class SelectorError(AsyncRecallError):
    """Raised when a selector fails to choose: its answer is malformed, names too many
    paths or one it was not offered, or it gave up waiting for its side model. Recall
    catches it and answers with the selector's fallback."""


class ToolError(AsyncRecallError):
    """Raised when a tool is called wrongly: bad arguments, or a path outside the project."""


class RecallNotReady(AsyncRecallError):
    """Raised by :meth:`PendingRecall.result_nowait
    <asyncrecall.prefetch.PendingRecall.result_nowait>` when the recall has not settled
    yet: polling returns at once instead of waiting."""

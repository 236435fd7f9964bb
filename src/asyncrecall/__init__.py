"""asyncrecall: long-term memory for LLM agents whose recall never adds latency."""

from __future__ import annotations

from asyncrecall._cancel import CancelSignal
from asyncrecall._exceptions import (
    AsyncRecallError,
    ConfigError,
    HistoryError,
    MemoryStoreError,
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelProtocolError,
    ModelRateLimitError,
    ModelServerError,
    SelectorError,
    ToolError,
)
from asyncrecall._settings import Settings, load_settings

__version__ = "0.1.0"

__all__ = [
    "AsyncRecallError",
    "CancelSignal",
    "ConfigError",
    "HistoryError",
    "MemoryStoreError",
    "ModelAuthError",
    "ModelConnectionError",
    "ModelError",
    "ModelNotFoundError",
    "ModelProtocolError",
    "ModelRateLimitError",
    "ModelServerError",
    "SelectorError",
    "Settings",
    "ToolError",
    "__version__",
    "load_settings",
]

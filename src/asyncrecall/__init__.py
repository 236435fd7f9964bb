"""asyncrecall: long-term memory for LLM agents whose recall never adds latency.

The agent starts recalling memories when the user's message arrives, never waits for
the recall, and slips the result into the conversation at the first safe moment.

The names below are what an application needs: the primitive (:class:`RecallPrefetcher`,
:class:`MemoryBlock`), the recall (:class:`Recaller` and its selectors), the stores, the
agent client, the models and the exception tree. The sub-packages
(``asyncrecall.prefetch``, ``asyncrecall.memory``, ``asyncrecall.models``,
``asyncrecall.agent``, ``asyncrecall.integrations``, ``asyncrecall.testing``,
``asyncrecall.mcp_server``) hold the rest of the public names (the events, the
conversation types, the extraction). The heavier names are imported on first use, so
``import asyncrecall`` stays cheap.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import TYPE_CHECKING, Any

from asyncrecall._cancel import CancelSignal
from asyncrecall._exceptions import (
    AsyncRecallError,
    ConfigError,
    HistoryError,
    MemoryConflictError,
    MemoryStoreError,
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelNotFoundError,
    ModelProtocolError,
    ModelRateLimitError,
    ModelServerError,
    RecallNotReady,
    SelectorError,
    ToolError,
)

if TYPE_CHECKING:
    from asyncrecall.agent import (
        Agent,
        AgentClient,
        AgentEvent,
        ClientOptions,
        MessageType,
    )
    from asyncrecall.memory import (
        FolderStore,
        LexicalSelector,
        ModelSelector,
        PostgresStore,
        Recaller,
        RecallResult,
        Selector,
        Store,
    )
    from asyncrecall.models import Model, OpenAIModel
    from asyncrecall.prefetch import MemoryBlock, RecallPrefetcher

__version__ = "0.1.0"

_LAZY = {
    "Agent": "asyncrecall.agent",
    "AgentClient": "asyncrecall.agent",
    "AgentEvent": "asyncrecall.agent",
    "ClientOptions": "asyncrecall.agent",
    "LexicalSelector": "asyncrecall.memory",
    "MemoryBlock": "asyncrecall.prefetch",
    "FolderStore": "asyncrecall.memory",
    "MessageType": "asyncrecall.agent",
    "Model": "asyncrecall.models",
    "ModelSelector": "asyncrecall.memory",
    "OpenAIModel": "asyncrecall.models",
    "PostgresStore": "asyncrecall.memory",
    "RecallPrefetcher": "asyncrecall.prefetch",
    "RecallResult": "asyncrecall.memory",
    "Recaller": "asyncrecall.memory",
    "Selector": "asyncrecall.memory",
    "Store": "asyncrecall.memory",
}

#: Old names kept for one release: each access warns (``DeprecationWarning``) and gives
#: the new object, in ``(module, name)``.
_DEPRECATED = {
    "MemoryManager": ("asyncrecall.memory", "Recaller"),
    "MemoryStore": ("asyncrecall.memory", "FolderStore"),
}

__all__ = [
    "Agent",
    "AgentClient",
    "AgentEvent",
    "AsyncRecallError",
    "CancelSignal",
    "ClientOptions",
    "ConfigError",
    "FolderStore",
    "HistoryError",
    "LexicalSelector",
    "MemoryBlock",
    "MemoryConflictError",
    "MemoryStoreError",
    "MessageType",
    "Model",
    "ModelAuthError",
    "ModelConnectionError",
    "ModelError",
    "ModelNotFoundError",
    "ModelProtocolError",
    "ModelRateLimitError",
    "ModelSelector",
    "ModelServerError",
    "OpenAIModel",
    "PostgresStore",
    "RecallNotReady",
    "RecallPrefetcher",
    "RecallResult",
    "Recaller",
    "Selector",
    "SelectorError",
    "Store",
    "ToolError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(import_module(module), name)
        globals()[name] = value
        return value
    if name in _DEPRECATED:
        home, new = _DEPRECATED[name]
        warnings.warn(
            f"asyncrecall.{name} is deprecated and goes in the next release: "
            f"use asyncrecall.{new} (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(import_module(home), new)
    raise AttributeError(f"module 'asyncrecall' has no attribute {name!r}")

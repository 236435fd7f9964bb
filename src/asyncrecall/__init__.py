"""asyncrecall: long-term memory for LLM agents whose recall never adds latency.

The agent starts recalling memories when the user's message arrives, never waits for
the recall, and slips the result into the conversation at the first safe moment.

The names below are the public surface; the sub-packages (``asyncrecall.agent``,
``asyncrecall.memory``, ``asyncrecall.models``, ``asyncrecall.testing``) hold the rest.
The heavier names are imported on first use, so ``import asyncrecall`` stays cheap.
"""

from __future__ import annotations

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
        MemoryManager,
        ModelSelector,
        RecallResult,
        Selector,
    )
    from asyncrecall.models import Model, OpenAIModel
    from asyncrecall.prefetch import MemoryBlock, RecallPrefetcher

__version__ = "0.1.0"

_LAZY = {
    "Agent": "asyncrecall.agent",
    "AgentClient": "asyncrecall.agent",
    "AgentEvent": "asyncrecall.agent",
    "ClientOptions": "asyncrecall.agent",
    "FolderStore": "asyncrecall.memory",
    "LexicalSelector": "asyncrecall.memory",
    "MemoryBlock": "asyncrecall.prefetch",
    "MemoryManager": "asyncrecall.memory",
    "MemoryStore": "asyncrecall.memory",  # deprecated: FolderStore (warns on each use)
    "MessageType": "asyncrecall.agent",
    "Model": "asyncrecall.models",
    "ModelSelector": "asyncrecall.memory",
    "OpenAIModel": "asyncrecall.models",
    "RecallPrefetcher": "asyncrecall.prefetch",
    "RecallResult": "asyncrecall.memory",
    "Selector": "asyncrecall.memory",
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
    "MemoryManager",
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
    "RecallPrefetcher",
    "RecallResult",
    "Selector",
    "SelectorError",
    "ToolError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'asyncrecall' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    if name in __all__:
        globals()[name] = value  # a deprecated name is not kept: it warns on each use
    return value

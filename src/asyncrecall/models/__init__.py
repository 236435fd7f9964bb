"""Models: conversation types, the model protocol, the OpenAI-compatible client.

This package knows nothing of memory or of the agent. The OpenAI client names
(:class:`OpenAIModel`, :class:`ModelPair`, :func:`open_openai_models`) are imported
on first use, so importing the package does not load the SDK (~0.5 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from asyncrecall.models._convert import (
    contents_to_messages,
    tools_to_openai,
    validate_messages,
)
from asyncrecall.models._local_engine import local_model_available
from asyncrecall.models._protocol import (
    Finished,
    Model,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    Usage,
)
from asyncrecall.models._types import (
    Content,
    FunctionCall,
    FunctionResponse,
    Part,
    Role,
    Text,
    ToolSpec,
    model_content,
    user_content,
)

__all__ = [
    "Content",
    "Finished",
    "FunctionCall",
    "FunctionResponse",
    "LocalModel",
    "Model",
    "ModelPair",
    "OpenAIModel",
    "Part",
    "Role",
    "StreamEvent",
    "Text",
    "TextDelta",
    "ToolCallReady",
    "ToolSpec",
    "Usage",
    "contents_to_messages",
    "local_model_available",
    "model_content",
    "open_openai_models",
    "tools_to_openai",
    "user_content",
    "validate_messages",
]

if TYPE_CHECKING:
    from asyncrecall.models._local import LocalModel
    from asyncrecall.models._openai import ModelPair, OpenAIModel, open_openai_models

# Loaded on first use: the OpenAI SDK costs about 0.5 s to import.
_LAZY = {
    "LocalModel": "asyncrecall.models._local",
    "ModelPair": "asyncrecall.models._openai",
    "OpenAIModel": "asyncrecall.models._openai",
    "open_openai_models": "asyncrecall.models._openai",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

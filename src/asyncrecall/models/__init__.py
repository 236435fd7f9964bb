"""Models: conversation types, the model protocol, the OpenAI-compatible client.

This package knows nothing of memory or of the agent. The OpenAI client
(:class:`OpenAIModel`) and the embedded model (:class:`LocalModel`, the ``local``
extra) are imported on first use, so importing the package does not load the SDK
(slow to import).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# A name imported ``as`` itself is not public: other layers and the tests take it from
# here, but it is out of ``__all__`` and may change without notice (so are
# ``ModelPair`` and ``open_openai_models``, imported on first use below).
from asyncrecall.models._convert import contents_to_messages as contents_to_messages
from asyncrecall.models._convert import tools_to_openai as tools_to_openai
from asyncrecall.models._convert import validate_messages as validate_messages
from asyncrecall.models._local_engine import local_model_available as local_model_available
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
    PromptPrefix,
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
    "OpenAIModel",
    "Part",
    "PromptPrefix",
    "Role",
    "StreamEvent",
    "Text",
    "TextDelta",
    "ToolCallReady",
    "ToolSpec",
    "Usage",
    "model_content",
    "user_content",
]

if TYPE_CHECKING:
    from asyncrecall.models._local import LocalModel
    from asyncrecall.models._openai import ModelPair as ModelPair
    from asyncrecall.models._openai import OpenAIModel
    from asyncrecall.models._openai import open_openai_models as open_openai_models

# Loaded on first use: the OpenAI SDK is slow to import.
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

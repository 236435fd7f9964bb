"""Models: conversation types, the model protocol, the OpenAI-compatible client.

This package knows nothing of memory or of the agent.
"""

from __future__ import annotations

from asyncrecall.models._convert import (
    contents_to_messages,
    messages_to_contents,
    tools_to_openai,
    validate_messages,
)
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
    "Model",
    "Part",
    "Role",
    "StreamEvent",
    "Text",
    "TextDelta",
    "ToolCallReady",
    "ToolSpec",
    "Usage",
    "contents_to_messages",
    "messages_to_contents",
    "model_content",
    "tools_to_openai",
    "user_content",
    "validate_messages",
]


"""The frameworks' usual memory pattern, for ``bench frameworks``: recall awaited in a hook.

As the mem0 LangGraph guide and LangMem's hot-path quickstart write it: before the first
model request, the hook awaits the memory search and puts its result in the request (for
the Claude Code CLI, as memory hooks for it are written: a ``UserPromptSubmit`` hook).
Only the benchmark uses these; they import their framework when called.
"""

from __future__ import annotations

from typing import Any

from asyncrecall.memory import Recaller

__all__ = [
    "awaited_claude_agent_sdk",
    "awaited_google_adk",
    "awaited_langchain",
    "awaited_openai_agents",
    "awaited_pydantic_ai",
]


def awaited_pydantic_ai(memory: Recaller) -> Any:
    """A capability whose ``before_model_request`` awaits the recall on the first request."""
    from dataclasses import dataclass

    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelRequest, ToolReturnPart, UserPromptPart
    from pydantic_ai.models import ModelRequestContext

    @dataclass
    class AwaitedRecall(AbstractCapability[Any]):
        async def before_model_request(
            self, ctx: RunContext[Any], request_context: ModelRequestContext
        ) -> ModelRequestContext:
            request = request_context.messages[-1]
            if not isinstance(request, ModelRequest) or any(
                isinstance(p, ToolReturnPart) for p in request.parts
            ):
                return request_context
            result = await memory.recall(str(ctx.prompt or ""))
            if result.prompt:
                request.parts = [UserPromptPart(result.prompt), *request.parts]
            return request_context

        @classmethod
        def get_serialization_name(cls) -> str | None:
            return None

    return AwaitedRecall()


def awaited_openai_agents(memory: Recaller, text: str) -> Any:
    """An input filter that awaits the recall before the run's first model call."""
    from agents.run_config import CallModelData, ModelInputData

    done = False

    async def awaited(data: CallModelData[Any]) -> ModelInputData:
        nonlocal done
        items: list[Any] = list(data.model_data.input)
        if not done:
            done = True
            result = await memory.recall(text)
            if result.prompt:
                items.insert(len(items) - 1, {"role": "user", "content": result.prompt})
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    return awaited


def awaited_langchain(memory: Recaller) -> Any:
    """Middleware whose ``abefore_model`` awaits the recall before the first model call."""
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import HumanMessage

    class AwaitedRecall(AgentMiddleware):
        async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            last = state["messages"][-1]
            if not isinstance(last, HumanMessage):
                return None
            result = await memory.recall(str(last.content))
            if not result.prompt:
                return None
            content = [
                {"type": "text", "text": result.prompt},
                {"type": "text", "text": last.content},
            ]
            return {"messages": [last.model_copy(update={"content": content})]}

    return AwaitedRecall()


def awaited_google_adk(memory: Recaller) -> Any:
    """A tool that awaits the recall in ``process_llm_request``, as ADK's own
    ``PreloadMemoryTool`` awaits its memory search; before the first model request only,
    as the others here (``PreloadMemoryTool`` awaits one on every request)."""
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types

    from asyncrecall.integrations._common import prompt_text

    class AwaitedRecall(BaseTool):
        def __init__(self) -> None:
            super().__init__(name="preload_memory", description="preload_memory")

        async def process_llm_request(self, *, tool_context: ToolContext, llm_request: Any) -> None:
            contents = llm_request.contents
            last = contents[-1] if contents else None
            if (
                last is None
                or last.role != "user"
                or any(p.function_response for p in last.parts or ())
            ):
                return
            user = tool_context.user_content
            result = await memory.recall(prompt_text(user.parts if user else None))
            if result.prompt:
                memory_part = types.Part(text=result.prompt)
                contents[-1] = types.Content(role="user", parts=[memory_part, *(last.parts or [])])

    return AwaitedRecall()


def awaited_claude_agent_sdk(memory: Recaller) -> Any:
    """Hooks whose ``UserPromptSubmit`` awaits the recall and returns its block."""
    from claude_agent_sdk import HookMatcher

    async def awaited(input: Any, tool_use_id: str | None, context: Any) -> Any:
        result = await memory.recall(str(input.get("prompt", "")))
        if not result.prompt:
            return {}
        specific = {"hookEventName": "UserPromptSubmit", "additionalContext": result.prompt}
        return {"hookSpecificOutput": specific}

    return {"UserPromptSubmit": [HookMatcher(hooks=[awaited])]}

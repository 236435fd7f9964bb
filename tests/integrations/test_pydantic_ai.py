"""The Pydantic AI capability in Pydantic AI's own agent loop, against the LocalServer.

The recall contract is the conformance kit's (:class:`TestConformance`, driven by
:class:`PydanticAiDriver`: ``agent.run``, and ``agent.iter`` to leave a run early); the
tests below it are what is Pydantic AI's own. The main model is Pydantic AI's
``OpenAIChatModel`` pointed at the server; the side query is asyncrecall's model
selector on the same server. Assertions read the wire.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from asyncrecall.integrations.pydantic_ai import AsyncRecall
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall.testing import LocalServer, Reply
from asyncrecall_conformance import ConformanceSuite, Driver, Run

from .conftest import MEMORY_MARK, main_requests, memory_indexes, side_reply, text_of

KEY = "thread-1"


class PydanticAiDriver(Driver):
    """A run is ``agent.run`` (``agent.iter`` when it is left early) of an agent with the
    capability; the next message gets ``result.all_messages()`` as its history."""

    endings = frozenset({"returns", "raises", "is cancelled", "is left early"})

    async def run(self, run: Run) -> Any:
        async with AsyncOpenAI(base_url=run.base_url, api_key="-", max_retries=0) as client:
            model = OpenAIChatModel(run.model, provider=OpenAIProvider(openai_client=client))
            agent = Agent(
                model, instructions=run.instructions, capabilities=[AsyncRecall(run.prefetcher)]
            )

            async def read_file(path: str) -> str:
                """Read a file."""
                return await run.read_file(path)

            agent.tool_plain(read_file)
            history = _history(run)
            if run.leave_early:
                async with agent.iter(
                    run.text, conversation_id=run.key, message_history=history
                ) as iteration:
                    async for node in iteration:
                        if Agent.is_call_tools_node(node):  # the model answered: leave
                            break
                return None
            return await agent.run(run.text, conversation_id=run.key, message_history=history)

    async def revalidate(self, previous: Any) -> Any:
        """The history as JSON, validated back by Pydantic AI's own type adapter."""
        return ModelMessagesTypeAdapter.validate_json(previous.all_messages_json())


def _history(run: Run) -> list[ModelMessage] | None:
    if run.chat is not None:
        return [
            ModelRequest(parts=[UserPromptPart(text)])
            if role == "user"
            else ModelResponse(parts=[TextPart(text)])
            for role, text in run.chat
        ]
    if run.previous is None or isinstance(run.previous, list):
        return run.previous
    messages: list[ModelMessage] = run.previous.all_messages()
    return messages


class TestConformance(ConformanceSuite):
    """The recall contract, in Pydantic AI's loop."""

    @pytest.fixture
    def driver(self) -> Driver:
        return PydanticAiDriver()


# -- what is Pydantic AI's own ----------------------------------------------------------


@pytest.fixture
async def client(local_server: LocalServer) -> AsyncIterator[AsyncOpenAI]:
    """The main model's OpenAI client, closed after the test."""
    async with AsyncOpenAI(base_url=local_server.base_url, api_key="test-key") as client:
        yield client


def make_agent(
    client: AsyncOpenAI, capability: AsyncRecall, tool_hook: Any = None
) -> Agent[None, str]:
    model = OpenAIChatModel("main", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, instructions="You are terse.", capabilities=[capability])

    @agent.tool_plain
    async def read_file(path: str) -> str:
        """Read a file."""
        if tool_hook is not None:
            await tool_hook()
        return f"contents of {path}"

    return agent


def tool_round(*files: str) -> Reply:
    return Reply(tool_calls=[("read_file", {"path": f}) for f in files])


async def test_the_block_stays_in_the_runs_history_after_the_tool_returns(
    local_server: LocalServer, client: AsyncOpenAI, slow: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """The block is a ``UserPromptPart`` of the request object the run's history holds:
    ``result.all_messages()`` has it once, after the tool returns of its request, so the
    app that passes that history on re-sends it (and the prompt-cache prefix is stable)."""
    gate = threading.Event()
    local_server.script("side", side_reply(paths["deploy-flow"], gate=gate))
    local_server.script("main", tool_round("a.py"), Reply(text="done"))

    async def release_recall() -> None:
        gate.set()
        assert await slow.wait_settled(KEY, 5)

    agent = make_agent(client, AsyncRecall(slow), release_recall)
    result = await agent.run("how do I deploy?", conversation_id=KEY)

    holding = [
        m for m in result.all_messages() if isinstance(m, ModelRequest) and MEMORY_MARK in str(m)
    ]
    assert len(holding) == 1
    (request,) = holding
    kinds = [type(p) for p in request.parts]
    assert kinds == [ToolReturnPart, UserPromptPart]
    assert paths["deploy-flow"] in str(request.parts[-1].content)


async def test_a_key_function_names_the_conversation(
    local_server: LocalServer, client: AsyncOpenAI, fast: RecallPrefetcher, paths: dict[str, str]
) -> None:
    """``AsyncRecall(prefetcher, key=...)`` maps the run to its conversation key: the
    memory shown is recorded under that key, not under the run's ``conversation_id``."""
    local_server.script("main", Reply(text="ok"))
    capability = AsyncRecall(fast, key=lambda ctx: f"user-{ctx.deps}")
    model = OpenAIChatModel("main", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, deps_type=int, capabilities=[capability])

    await agent.run("how do deploys reach the staging cluster?", deps=7, conversation_id=KEY)

    assert fast.surfaced("user-7") == {paths["deploy-flow"]}
    assert fast.surfaced(KEY) == frozenset()
    messages = main_requests(local_server)[0].body["messages"]
    assert len(memory_indexes(messages)) == 1
    assert paths["deploy-flow"] in text_of(messages[memory_indexes(messages)[0]])

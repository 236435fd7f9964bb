"""Every framework adapter on llama-cpp-python's real server, in the framework's own
agent loop, with the memory block in the first request.

The server's chat templates (SmolLM2's, as most GGUF templates) render a message's
content as a string and fail on a list of content parts (HTTP 500 ``can only
concatenate str (not "list") to str``), so the block must reach the wire as text: its
own string message, or first in the user's string. Each adapter is run by its
conformance driver (``tests/integrations``) with a warm lexical recall (settled before
the first request), against the session's one server; main answers are capped by the
proxy (the frameworks set no ``max_tokens``). The Claude Agent SDK speaks Anthropic's
Messages API, which llama-cpp-python's server does not serve (it has no
``/v1/messages``): it runs through ``anthropic_bridge.AnthropicBridge`` (LiteLLM's translation, its
text blocks joined into strings), and its block, a text block of the user's message
before the question, reaches the server as text before the question too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore, LexicalSelector, Recaller
from asyncrecall.prefetch import RecallPrefetcher
from asyncrecall_conformance import MEMORY_MARK, Driver, Run, text_of

from .server import LlamaServer, require

GUARD = 300  # one agent run on the tiny model, CPU-bound on busy shared cores
pytestmark = pytest.mark.timeout(GUARD)
QUESTION = "How do deploys reach the staging cluster?"
#: Each adapter's driver: (module under tests/integrations, class, keyword arguments).
DRIVERS = {
    "pydantic_ai": ("test_pydantic_ai", "PydanticAiDriver", {}),
    "openai_agents": ("test_openai_agents", "OpenAIAgentsDriver", {"streamed": False}),
    "langchain": ("test_langchain", "LangChainDriver", {}),
    "google_adk": ("test_google_adk", "AdkDriver", {}),
}
ADK_WARNINGS = pytest.mark.filterwarnings(  # as tests/integrations/conftest.py's LITELLM_WARNINGS
    "ignore:Items? .* (is|are) using the `ReadOnly` qualifier:UserWarning"
)


@pytest.fixture
def capped(server: LlamaServer) -> Iterator[LlamaServer]:
    """The server with main answers capped at 48 tokens (the proxy adds ``max_tokens``)."""
    server.proxy.max_tokens = 48
    try:
        yield server
    finally:
        server.proxy.max_tokens = None


def memory_store(tmp_path: Path) -> FolderStore:
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    store.save_memory(
        "deploy-flow", "how deploys reach the staging cluster", "project",
        "Deploys reach the staging cluster through the release pipeline.", origin="user",
    )  # fmt: skip
    store.save_memory("cat-names", "the office cats", "user", "Tom and Ginger.", origin="user")
    return store


def driver_of(adapter: str) -> Driver:
    module, name, kwargs = DRIVERS[adapter]
    found = require(f"integrations.{module}")
    driver: Driver = getattr(found, name)(**kwargs)
    return driver


async def read_file(path: str) -> str:
    return f"(no file {path})"


def assert_block_first_as_text(messages: list[dict[str, Any]]) -> None:
    """The request's user messages are strings; one of them holds the block
    (``<system-reminder>``, ``## Relevant memory``, the file), before the question."""
    users = [m for m in messages if m.get("role") == "user"]
    assert users and all(isinstance(m.get("content"), str) for m in users), [
        type(m.get("content")).__name__ for m in users
    ]
    holding = [i for i, m in enumerate(messages) if MEMORY_MARK in text_of(m)]
    assert len(holding) == 1, f"memory in {len(holding)} messages"
    (at,) = holding
    text = text_of(messages[at])
    assert messages[at]["role"] == "user"
    assert "<system-reminder>" in text and "</system-reminder>" in text
    assert "deploy-flow" in text
    asked = max(i for i, m in enumerate(messages) if QUESTION in text_of(m))
    assert (at, text.index(MEMORY_MARK)) < (asked, text_of(messages[asked]).rindex(QUESTION))


@pytest.mark.parametrize(
    "adapter",
    [pytest.param(name, marks=[ADK_WARNINGS] if name == "google_adk" else []) for name in DRIVERS],
)
async def test_the_adapter_runs_on_the_real_server_with_memory_in_the_first_request(
    capped: LlamaServer, tmp_path: Path, adapter: str
) -> None:
    """The adapter's framework runs its agent loop to an answer on llama-cpp-python's
    server (every request answered 200: the template rendered it), and its first
    request carries the memory block as text, before the user's question."""
    driver = driver_of(adapter)
    store = memory_store(tmp_path)
    async with RecallPrefetcher(Recaller(store, LexicalSelector())) as prefetcher:
        await prefetcher.warm()
        run = Run(prefetcher, key="thread-1", text=QUESTION, base_url=capped.base_url,
                  model=capped.model_id, read_file=read_file)  # fmt: skip
        await driver.run(run)
    chats = [r for r in capped.proxy.requests if r.path.endswith("/chat/completions")]
    assert chats, "no request reached the server"
    assert [r.status for r in chats] == [200] * len(chats), [(r.status, r.path) for r in chats]
    assert_block_first_as_text(chats[0].body["messages"])


@ADK_WARNINGS  # the bridge's LiteLLM
async def test_the_claude_agent_sdk_runs_on_the_real_server_with_memory_in_the_first_request(
    server: LlamaServer, tmp_path: Path
) -> None:
    """The Claude Agent SDK (its CLI's own agent loop) runs to an answer on
    llama-cpp-python's server through Anthropic's API (the bridge), every request
    answered 200, and the first request carries the memory block as text before the
    user's question."""
    found = require("integrations.test_claude_agent_sdk")
    # The bridge translates with LiteLLM (it sets LiteLLM's environment before importing it).
    bridge_module = require("interop.anthropic_bridge")
    AnthropicBridge = bridge_module.AnthropicBridge

    driver: Driver = found.ClaudeDriver(tmp_path / "claude")
    store = memory_store(tmp_path)
    with AnthropicBridge(server.base_url, server.model_id) as bridge:
        async with RecallPrefetcher(Recaller(store, LexicalSelector())) as prefetcher:
            await prefetcher.warm()
            run = Run(prefetcher, key="thread-1", text=QUESTION, base_url=bridge.base_url,
                      model=found.KNOWN, read_file=read_file)  # fmt: skip
            await driver.run(run)
    assert bridge.requests, "the CLI sent nothing"
    chats = [r for r in server.proxy.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == len(bridge.requests)
    assert [r.status for r in chats] == [200] * len(chats), [(r.status, r.path) for r in chats]
    assert_block_first_as_text(chats[0].body["messages"])

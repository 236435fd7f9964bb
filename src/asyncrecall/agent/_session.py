"""Build a ready agent from :class:`Settings`: models, memory, tools, client, loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from asyncrecall._cancel import CancelSignal
from asyncrecall._settings import Settings
from asyncrecall.agent._agent import Agent
from asyncrecall.agent._client import AgentClient, ClientOptions
from asyncrecall.agent._prompt import build_system_prompt
from asyncrecall.agent._tools import ToolRegistry
from asyncrecall.memory import (
    LexicalSelector,
    MemoryManager,
    MemoryStore,
    ModelSelector,
    build_memory_manager,
)
from asyncrecall.models import Model

__all__ = ["Session", "open_session"]

#: The old design's selector timeout, kept only for the blocking baseline.
BLOCKING_SELECTOR_TIMEOUT = 1.0


@dataclass
class Session:
    """An agent and what it owns; :meth:`aclose` cancels pending recalls and closes models."""

    agent: Agent
    client: AgentClient
    memory: MemoryManager | None
    control: CancelSignal
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def aclose(self) -> None:
        """Cancel (never await) any pending recall, then release connections."""
        await self.client.aclose()
        for close in reversed(self._closers):
            await close()


def _memory_for(settings: Settings, side_model: Model | None) -> MemoryManager | None:
    if not settings.memory_enabled:
        return None
    manager = build_memory_manager(settings, side_model=side_model)
    if (
        settings.recall_mode == "blocking"
        and isinstance(manager.selector, ModelSelector)
        and side_model is not None
    ):
        # The old design: the selector gave up after 1 s of its own.
        manager = MemoryManager(
            manager.store, ModelSelector(side_model, timeout=BLOCKING_SELECTOR_TIMEOUT)
        )
    return manager


def open_session(
    settings: Settings,
    *,
    model: Model | None = None,
    side_model: Model | None = None,
    control: CancelSignal | None = None,
) -> Session:
    """Wire a session. Without ``model``, the OpenAI-compatible endpoint of ``settings``."""
    closers: list[Callable[[], Awaitable[None]]] = []
    if model is None:
        from asyncrecall.models._openai import open_openai_models

        base_url, main_name = settings.require_endpoint()
        pair = open_openai_models(
            base_url=base_url,
            api_key=settings.api_key,
            model=main_name,
            side_model=settings.effective_side_model or main_name,
        )
        model, default_side = pair.main, pair.side
        side_model = side_model or default_side
        closers.append(pair.aclose)
    memory = _memory_for(settings, side_model)
    store: MemoryStore | None = memory.store if memory is not None else None
    tools = ToolRegistry(settings.project, memory_store=store)
    control = control or CancelSignal()
    client = AgentClient(
        model=model,
        memory=memory,
        tools=tools.specs,
        system_prompt=lambda: build_system_prompt(settings.project, tools.specs, store),
        options=ClientOptions(
            max_session_turns=settings.max_session_turns,
            session_token_limit=settings.session_token_limit,
            recall_mode=settings.recall_mode,
        ),
        control=control,
        instant_selector=LexicalSelector() if settings.recall_mode == "async+lexical" else None,
    )
    agent = Agent(client, tools, max_turns=settings.max_turns)
    return Session(agent=agent, client=client, memory=memory, control=control, _closers=closers)

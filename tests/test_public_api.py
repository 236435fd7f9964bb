"""The curated public surface: sorted ``__all__`` that resolves, and no drift between
the top-level re-exports and the sub-packages they come from."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

import asyncrecall


def _isort_order(name: str) -> tuple[int, str]:
    """Constants, then classes, then the rest, each alphabetical."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


PACKAGES = [
    "asyncrecall",
    "asyncrecall.agent",
    "asyncrecall.mcp_server",
    "asyncrecall.memory",
    "asyncrecall.models",
    "asyncrecall.testing",
    "asyncrecall.testing.conformance",
]


@pytest.mark.parametrize("module_name", PACKAGES)
def test_all_is_sorted_and_every_name_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__, key=_isort_order)  # ruff's RUF022 order
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__doc__, f"{module_name}.{name} has no docstring"


def test_top_level_names_are_the_sub_packages_objects() -> None:
    for name in asyncrecall.__all__:
        value = getattr(asyncrecall, name)
        home = getattr(value, "__module__", "") or ""
        if home.startswith("asyncrecall.") and not home.startswith("asyncrecall._"):
            package = ".".join(home.split(".")[:2])
            assert getattr(importlib.import_module(package), name) is value


def test_public_names_of_sub_packages_are_not_private_modules() -> None:
    """Every public sub-package name is listed in its ``__all__`` (no accidental export)."""
    for module_name in PACKAGES[1:]:
        module = importlib.import_module(module_name)
        public = {
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and not inspect.ismodule(v) and n != "annotations"
        }
        assert public <= set(module.__all__) | {"TYPE_CHECKING", "Any"}, module_name


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
    assert {"Model", "Selector", "AgentEvent", "RecallPrefetcher"} <= exported
    assert not {"Settings", "load_settings", "open_session", "Session"} & exported
    from asyncrecall.agent import AgentEvent
    from asyncrecall.memory import Selector
    from asyncrecall.models import Model

    assert asyncrecall.Model is Model and asyncrecall.Selector is Selector
    assert asyncrecall.AgentEvent is AgentEvent


_ABOVE_MEMORY = ("asyncrecall.agent", "asyncrecall.cli", "asyncrecall.bench", "asyncrecall._s")
_ABOVE_AGENT = ("asyncrecall.cli", "asyncrecall.bench", "asyncrecall._s", "asyncrecall._memory_c")


@pytest.mark.parametrize(
    ("package", "above"),
    [
        (
            "asyncrecall.memory",
            (*_ABOVE_MEMORY, "asyncrecall.cli._memory_config", "asyncrecall.prefetch"),
        ),
        ("asyncrecall.prefetch", _ABOVE_MEMORY),
        ("asyncrecall.agent", _ABOVE_AGENT),
        ("asyncrecall.mcp_server", (*_ABOVE_MEMORY, "asyncrecall.cli._memory_config")),
    ],
)
def test_library_layers_import_nothing_above_them(package: str, above: tuple[str, ...]) -> None:
    """``memory`` knows nothing of the agent, the CLI or its settings (``_settings``,
    ``_session``, ``_memory_config``); ``agent`` knows nothing of the CLI or its settings."""
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

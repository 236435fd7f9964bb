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
    "asyncrecall.memory",
    "asyncrecall.models",
    "asyncrecall.testing",
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

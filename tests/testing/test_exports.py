"""The public surfaces of ``asyncrecall.models`` and ``asyncrecall.testing`` stay curated."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest


@pytest.mark.parametrize("module_name", ["asyncrecall.models", "asyncrecall.testing"])
def test_all_is_sorted_and_resolvable(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__doc__, f"{module_name}.{name} has no docstring"


def test_importing_models_does_not_load_the_sdk() -> None:
    """``asyncrecall.models`` loads the OpenAI SDK only when OpenAIModel is used."""
    code = "import sys, asyncrecall.models; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

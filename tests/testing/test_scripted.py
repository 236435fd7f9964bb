"""ScriptedModel: the in-process fake model other tests build on."""

from __future__ import annotations

import asyncio

import pytest

from asyncrecall import HistoryError
from asyncrecall.models import (
    Finished,
    FunctionCall,
    Model,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
    model_content,
    user_content,
)
from asyncrecall.testing import (
    JsonRequest,
    ScriptedJson,
    ScriptedModel,
    ScriptedRequest,
    ScriptedTurn,
    ScriptExhaustedError,
)

GUARD = 5.0
CALL = FunctionCall("c1", "glob", {"pattern": "*.py"})


async def turn(model: ScriptedModel, text: str = "hi", **kwargs: object) -> list[object]:
    return [e async for e in model.stream([user_content(text)], **kwargs)]  # type: ignore[arg-type]


def test_is_a_model() -> None:
    assert isinstance(ScriptedModel(), Model)
    assert ScriptedModel().name == "scripted"
    assert ScriptedModel(name="main").name == "main"


async def test_turns_play_in_order_with_text_calls_usage_and_finish() -> None:
    """Turns are FIFO; a turn streams its text in ``chunks``, then calls, usage, one Finished."""
    model = ScriptedModel(name="main")
    model.add_turn("hello world", chunks=3)
    model.add_turn("", [CALL], usage=Usage(10, 2))
    first = await turn(model)
    assert first == [TextDelta("hell"), TextDelta("o wo"), TextDelta("rld"), Finished("stop")]
    second = await turn(model)
    assert second == [ToolCallReady(CALL), Usage(10, 2), Finished("tool_calls")]
    assert model.pending_turns == 0


async def test_requests_are_recorded() -> None:
    model = ScriptedModel()
    model.add_turn("a")
    tools = [ToolSpec("glob", "d", {})]
    await turn(model, "question", system="sys", tools=tools)
    assert model.requests == [ScriptedRequest((user_content("question"),), "sys", tuple(tools))]
    assert model.stream_started == model.stream_finished == 1


async def test_empty_script_without_default_fails_clearly() -> None:
    model = ScriptedModel(name="main")
    with pytest.raises(ScriptExhaustedError, match=r"'main'.*add_turn"):
        await turn(model)
    with pytest.raises(AssertionError, match="add_json"):
        await model.generate_json(system="s", prompt="p", schema={}, schema_name="x")


async def test_defaults_receive_the_request() -> None:
    model = ScriptedModel(
        default_turn=lambda r: f"echo {r.contents[-1].text}",
        default_json=lambda r: {"prompt": r.prompt},
    )
    assert await turn(model, "ping") == [TextDelta("echo ping"), Finished("stop")]
    assert await model.generate_json(system="s", prompt="p", schema={}, schema_name="x") == {
        "prompt": "p"
    }
    model.default_turn = lambda r: ScriptedTurn(text="t", finish_reason="length")
    model.default_json = lambda r: ScriptedJson(value=[1])
    assert await turn(model) == [TextDelta("t"), Finished("length")]
    assert await model.generate_json(system="s", prompt="p", schema={}, schema_name="x") == [1]


async def test_json_answers_and_records() -> None:
    model = ScriptedModel()
    model.add_json({"selected_memories": ["a.md"]})
    value = await model.generate_json(
        system="s", prompt="p", schema={"type": "object"}, schema_name="sel"
    )
    assert value == {"selected_memories": ["a.md"]}
    assert model.json_requests == [JsonRequest("s", "p", {"type": "object"}, "sel")]
    assert (model.json_started, model.json_finished, model.json_cancelled) == (1, 1, 0)


async def test_errors_are_raised_after_the_wait() -> None:
    model = ScriptedModel()
    model.add_turn(error=RuntimeError("stream failed"))
    model.add_json(error=ValueError("json failed"))
    with pytest.raises(RuntimeError, match="stream failed"):
        await turn(model)
    with pytest.raises(ValueError, match="json failed"):
        await model.generate_json(system="s", prompt="p", schema={}, schema_name="x")


async def test_gate_releases_the_answer_exactly_when_the_test_says() -> None:
    """Nothing is answered before the gate opens; no sleeps needed."""
    model = ScriptedModel()
    gate = asyncio.Event()
    model.add_json("late", gate=gate)
    task = asyncio.create_task(
        model.generate_json(system="s", prompt="p", schema={}, schema_name="x")
    )
    async with asyncio.timeout(GUARD):
        await model.wait_until(lambda m: m.json_started == 1)
    assert not task.done()
    gate.set()
    assert await task == "late"


async def test_cancelling_a_waiting_json_call_is_counted_and_propagates() -> None:
    """A side query cancelled while waiting counts in ``json_cancelled``; the cancel propagates."""
    model = ScriptedModel()
    model.add_json("never", gate=asyncio.Event())
    task = asyncio.create_task(
        model.generate_json(system="s", prompt="p", schema={}, schema_name="x")
    )
    async with asyncio.timeout(GUARD):
        await model.wait_until(lambda m: m.json_started == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.json_cancelled == 1
    assert model.json_finished == 0


async def test_cancelling_a_waiting_stream_is_counted() -> None:
    model = ScriptedModel()
    model.add_turn("x", gate=asyncio.Event())
    task = asyncio.create_task(turn(model))
    async with asyncio.timeout(GUARD):
        await model.wait_until(lambda m: m.stream_started == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.stream_cancelled == 1


async def test_delay_is_honoured() -> None:
    model = ScriptedModel()
    model.add_turn("x", delay=0.01)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await turn(model)
    assert loop.time() - start >= 0.01


async def test_history_is_validated_like_a_strict_server() -> None:
    """An unanswered tool call in the history raises HistoryError (validation on by default)."""
    model = ScriptedModel()
    model.add_turn("x")
    broken = [user_content("go"), model_content(CALL), user_content("no response")]
    with pytest.raises(HistoryError):
        _ = [e async for e in model.stream(broken)]
    assert len(model.requests) == 1  # recorded anyway
    lenient = ScriptedModel(validate_history=False)
    lenient.add_turn("x")
    assert [e async for e in lenient.stream(broken)][-1] == Finished("stop")


def test_chunks_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunks"):
        ScriptedModel().add_turn("x", chunks=0)

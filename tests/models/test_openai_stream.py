"""OpenAIModel.stream over real HTTP to the local server: text, tool calls, usage, wire shape."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from asyncrecall import HistoryError, ModelProtocolError
from asyncrecall.models import (
    Finished,
    FunctionCall,
    FunctionResponse,
    OpenAIModel,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
    model_content,
    open_openai_models,
    user_content,
)
from asyncrecall.models._openai import _CallAssembler
from asyncrecall.testing import LocalServer, Reply

from .helpers import run_turn

GLOB = ToolSpec(
    "glob", "Find files.", {"type": "object", "properties": {"pattern": {"type": "string"}}}
)


async def test_text_streams_as_deltas_and_ends_with_one_finished(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Text arrives as several deltas in order; the stream ends with exactly one Finished."""
    local_server.script("main", Reply(text="hello streaming world", chunk_size=4))
    events = await run_turn(model, system="be brief")
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 6
    assert "".join(deltas) == "hello streaming world"
    assert [e for e in events if isinstance(e, Finished)] == [Finished("stop")]
    assert isinstance(events[-1], Finished)


async def test_request_wire_shape(model: OpenAIModel, local_server: LocalServer) -> None:
    """Main requests stream, ask for usage, and carry function tools and the system prompt."""
    local_server.script("main", "ok")
    await run_turn(model, "question", system="sys", tools=[GLOB])
    body = local_server.requests[0].body
    assert body["model"] == "main"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"][0]["type"] == "function"
    assert body["tools"][0]["function"]["name"] == "glob"
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "question"},
    ]


async def test_no_tools_field_without_tools(model: OpenAIModel, local_server: LocalServer) -> None:
    local_server.script("main", "ok")
    await run_turn(model)
    assert "tools" not in local_server.requests[0].body


async def test_tool_calls_assembled_across_chunks_with_interleaved_indices(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Arguments split over many chunks, two calls interleaved by index, come out whole and in
    index order, only after the stream finished them."""
    args_a = {"path": "src/very/long/path/to/a/file.py", "offset": 10, "limit": 200}
    args_b = {"pattern": "**/*.md", "note": 'ünïcode and "quotes"'}
    local_server.script(
        "main",
        Reply(
            text="checking",
            tool_calls=[FunctionCall("id_a", "read_file", args_a), ("glob", args_b)],
            chunk_size=3,
        ),
    )
    events = await run_turn(model, tools=[GLOB])
    ready = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert ready == [
        FunctionCall("id_a", "read_file", args_a),
        FunctionCall("call_0_1", "glob", args_b),
    ]
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolCallReady") > kinds.index("TextDelta")
    assert events[-1] == Finished("tool_calls")


async def test_missing_call_ids_get_stable_generated_ids(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """A server that sends no ids gets made-up ids, unique across the model's turns, of the
    strictest shape servers accept (9 letters and digits: Mistral's templates in vLLM)."""
    reply = Reply(
        tool_calls=[("glob", {"pattern": "a"}), ("glob", {"pattern": "b"})],
        omit_tool_call_ids=True,
        chunk_size=2,
    )
    local_server.script("main", reply, reply)
    first = [e.call.id for e in await run_turn(model) if isinstance(e, ToolCallReady)]
    second = [e.call.id for e in await run_turn(model) if isinstance(e, ToolCallReady)]
    ids = first + second
    assert len(set(ids)) == 4
    assert all(re.fullmatch("[a-zA-Z0-9]{9}", i) for i in ids), ids


async def test_usage_reported_when_sent(model: OpenAIModel, local_server: LocalServer) -> None:
    local_server.script("main", Reply(text="x", prompt_tokens=1234, completion_tokens=5))
    events = await run_turn(model)
    assert Usage(prompt_tokens=1234, completion_tokens=5) in events
    assert events[-2:] == [Usage(1234, 5), Finished("stop")]


async def test_no_usage_is_estimated(model: OpenAIModel, local_server: LocalServer) -> None:
    """A server that sends no usage (llama-cpp-python, LM Studio): the usage is estimated
    from the sizes, about 4 characters a token, and says so (that keeps
    ``--session-token-limit`` working)."""
    local_server.script("main", Reply(text="x" * 40, usage=False))
    events = await run_turn(model, "y" * 4000)
    usage = events[-2]
    assert isinstance(usage, Usage)
    assert usage.estimated
    assert 1000 <= usage.prompt_tokens <= 1100  # the message JSON around 4000 characters
    assert usage.completion_tokens == 10
    assert events[-1] == Finished("stop")


async def test_stream_options_refused_retries_once_without_and_remembers(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """A 400 about stream_options: retry once without it, and do not send it again."""
    local_server.script("main", Reply(text="one", reject_stream_options=True), Reply(text="two"))
    first = await run_turn(model)
    assert "".join(e.text for e in first if isinstance(e, TextDelta)) == "one"
    assert all(e.estimated for e in first if isinstance(e, Usage))
    second = await run_turn(model)
    assert "".join(e.text for e in second if isinstance(e, TextDelta)) == "two"
    statuses = [(r.status, "stream_options" in r.body) for r in local_server.requests]
    assert statuses == [(400, True), (200, False), (200, False)]
    assert model.stream_options_supported is False


async def test_invalid_tool_arguments_name_the_tool(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    local_server.script("main", Reply(tool_calls=[("grep_search", '{"pattern": ')], chunk_size=4))
    with pytest.raises(ModelProtocolError, match="grep_search") as caught:
        await run_turn(model)
    assert isinstance(caught.value.__cause__, ValueError)


async def test_non_object_tool_arguments_are_a_protocol_error(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    local_server.script("main", Reply(tool_calls=[("glob", "[1, 2]")]))
    with pytest.raises(ModelProtocolError, match="not a JSON object"):
        await run_turn(model)


async def test_tool_result_request_pairs_calls_and_responses(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """On the wire: assistant tool_calls, tool messages in the calls' order, then the user text."""
    local_server.script("main", "done")
    a, b = FunctionCall("a", "glob", {"pattern": "x"}), FunctionCall("b", "glob", {"pattern": "y"})
    history = [
        user_content("go"),
        model_content(a, b),
        user_content(
            FunctionResponse("b", "glob", {"n": 2}),
            FunctionResponse("a", "glob", {"n": 1}),
            "<system-reminder>memory</system-reminder>",
        ),
    ]
    _ = [e async for e in model.stream(history)]
    messages = local_server.requests[0].messages
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert [m.get("tool_call_id") for m in messages[2:4]] == ["a", "b"]
    assert json.loads(messages[2]["content"]) == {"n": 1}


async def test_debug_mode_validates_before_sending(
    local_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ASYNCRECALL_DEBUG=1 a broken history raises HistoryError and nothing is sent."""
    monkeypatch.setenv("ASYNCRECALL_DEBUG", "1")
    broken = [user_content("go"), model_content(FunctionCall("a", "glob", {}))]
    async with OpenAIModel(model="main", base_url=local_server.base_url, max_retries=0) as model:
        with pytest.raises(HistoryError):
            _ = [e async for e in model.stream(broken)]
    assert local_server.requests == []


async def test_models_of_a_pair_have_a_pool_each(local_server: LocalServer) -> None:
    """Main and side each have a client (a connection pool) of their own: the side
    query's connections never join the turns' pool; closing the pair closes both."""
    local_server.script("main", "from main")
    local_server.script("side", Reply(json={"ok": True}))
    async with open_openai_models(
        model="main", side_model="side", base_url=local_server.base_url
    ) as pair:
        assert pair.main.name == "main"
        assert pair.side.name == "side"
        events = await run_turn(pair.main)
        value = await pair.side.generate_json(system="s", prompt="p", schema={}, schema_name="x")
    assert any(isinstance(e, TextDelta) for e in events)
    assert value == {"ok": True}
    assert [r.model for r in local_server.requests] == ["main", "side"]
    assert pair.main_client is not pair.side_client
    assert pair.main_client.is_closed() and pair.side_client.is_closed()


def test_assembler_copes_with_servers_that_omit_the_index() -> None:
    """Without ``index``, pieces join the call with the same id, else the last call."""
    assembler = _CallAssembler()

    def delta(call_id: str | None, name: str | None, arguments: str | None) -> SimpleNamespace:
        return SimpleNamespace(
            index=None, id=call_id, function=SimpleNamespace(name=name, arguments=arguments)
        )

    assembler.add(delta("a", "f", '{"x"'))
    assembler.add(delta(None, None, ": 1}"))
    assembler.add(delta("b", "g", "{}"))
    assembler.add(delta("a", None, ""))
    calls = assembler.take()
    assert [(c.id, c.name, "".join(c.arguments)) for c in calls] == [
        ("a", "f", '{"x": 1}'),
        ("b", "g", "{}"),
    ]
    assert assembler.take() == []


async def test_open_openai_models_and_shared_clients(local_server: LocalServer) -> None:
    """A model given a client shares it and leaves closing it to the owner."""
    pair = open_openai_models(model="main", base_url=local_server.base_url, max_retries=0)
    assert pair.side.name == "main"
    other = OpenAIModel(model="x", base_url=local_server.base_url, client=pair.main_client)
    await other.aclose()
    assert not pair.main_client.is_closed()
    await pair.aclose()
    assert pair.main_client.is_closed()
    assert repr(other) == f"OpenAIModel(model='x', base_url='{local_server.base_url}')"


async def test_a_client_of_ours_says_when_its_request_is_written(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Inside ``when_sent``, the stream's request calls back once it is written: the
    server has it, its answer not yet given (held here); outside, nothing is called."""
    import asyncio
    import threading

    from asyncrecall.models._sent import when_sent

    answer = threading.Event()
    local_server.script("main", Reply(text="ok", gate=answer), "again")
    written = asyncio.Event()
    calls: list[int] = []

    def sent() -> None:
        calls.append(len(local_server.requests))
        written.set()

    async def turn() -> None:
        with when_sent(sent):
            await run_turn(model, "question")

    task = asyncio.create_task(turn())
    try:
        async with asyncio.timeout(10):
            await written.wait()
        held = await local_server.await_for(lambda r: r.model == "main")
        assert held.finished_at is None  # written, not answered
    finally:
        answer.set()
        await task
    await run_turn(model, "question")  # outside when_sent
    assert len(calls) == 1

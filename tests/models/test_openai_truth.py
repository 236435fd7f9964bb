"""Servers' quirks, model side: answers that look like success are errors, tool rounds are
sent in a shape every server takes, usage is estimated when missing, names read short.

Each test here failed on the code before the fix (see the commit that added it).
"""

from __future__ import annotations

import pytest

from asyncrecall import ModelError, ModelProtocolError, ModelServerError
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
    user_content,
)
from asyncrecall.testing import LocalServer, Reply

from .helpers import run_turn

CALL = FunctionCall("call_a", "read_file", {"path": "notes.md"})


async def test_a_tool_round_is_accepted_by_a_server_that_rejects_null_content(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """The assistant message carrying only tool calls is sent with ``"content": ""``:
    llama-cpp-python's server answers null (and a missing key) with HTTP 500."""
    local_server.script("main", Reply(text="done", reject_null_content=True, rejection_status=500))
    history = [
        user_content("read notes"),
        model_content(CALL),
        user_content(FunctionResponse(CALL.id, CALL.name, {"content": "hi"})),
    ]
    events = [e async for e in model.stream(history)]
    assert events[-1] == Finished("stop")
    (request,) = local_server.requests
    assert request.status == 200
    assistant = request.messages[1]
    assert assistant["content"] == ""
    assert assistant["tool_calls"][0]["id"] == "call_a"


async def test_an_empty_stream_is_an_error(model: OpenAIModel, local_server: LocalServer) -> None:
    """HTTP 200 and an event stream with nothing in it (llama-cpp-python's answer to a
    prompt over its context) is a ModelProtocolError with one line, not an empty answer."""
    local_server.script("main", Reply(text="never sent", end_after=0))
    with pytest.raises(ModelProtocolError, match="empty answer") as caught:
        await run_turn(model)
    assert "\n" not in str(caught.value)
    assert "context" in str(caught.value)


async def test_a_cut_stream_is_an_error(model: OpenAIModel, local_server: LocalServer) -> None:
    """A stream that ends cleanly before any finish reason is a cut answer: an error."""
    local_server.script("main", Reply(text="abcdef", chunk_size=1, end_after=3))
    stream = model.stream([user_content("hi")])
    seen: list[object] = []
    with pytest.raises(ModelProtocolError, match=r"before the answer finished .*3 chunk"):
        async for event in stream:
            seen.append(event)
    assert seen == [TextDelta("a"), TextDelta("b")]  # chunk 1 is the role chunk


async def test_an_error_object_in_an_http_200_stream_is_an_error(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """llama.cpp's server can answer HTTP 200 with a JSON error body to a streamed request."""
    local_server.script("main", Reply(error_in_200="the request exceeds the available context"))
    with pytest.raises(ModelServerError, match="exceeds the available context") as caught:
        await run_turn(model)
    assert "HTTP 200" in str(caught.value)


async def test_an_error_object_in_an_http_200_side_query_is_an_error(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    local_server.script("main", Reply(error_in_200="model is loading"))
    with pytest.raises(ModelServerError, match="model is loading"):
        await model.generate_json(system="s", prompt="p", schema={}, schema_name="x")


async def test_missing_usage_is_estimated_and_marked(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """No usage from the server: one Usage, ``estimated``, before Finished."""
    local_server.script("main", Reply(text="ok", usage=False))
    events = await run_turn(model, "z" * 400)
    usages = [e for e in events if isinstance(e, Usage)]
    assert len(usages) == 1
    assert usages[0].estimated
    assert usages[0].prompt_tokens >= 100
    assert events[-1] == Finished("stop")


async def test_reported_usage_is_not_estimated(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    local_server.script("main", Reply(text="ok", prompt_tokens=7, completion_tokens=1))
    events = await run_turn(model)
    assert Usage(7, 1, estimated=False) in events


async def test_a_gguf_path_as_model_id_reads_short_in_errors(local_server: LocalServer) -> None:
    """llama.cpp's servers report the GGUF file's path as the model id: error lines name
    the file without its folder and ``.gguf``."""
    path = "/opt/models/cache/SmolLM2-135M-Instruct.Q4_1.gguf"
    local_server.script(path, Reply(status=400, error_message="bad"), Reply(end_after=0))
    async with OpenAIModel(model=path, base_url=local_server.base_url, max_retries=0) as model:
        with pytest.raises(ModelError, match=r"SmolLM2-135M-Instruct\.Q4_1") as status_error:
            await run_turn(model)
        with pytest.raises(ModelProtocolError) as protocol_error:
            await run_turn(model)
    for error in (status_error.value, protocol_error.value):
        assert "/opt/models" not in str(error)
        assert ".gguf" not in str(error)
        assert "`SmolLM2-135M-Instruct.Q4_1`" in str(error)
    assert local_server.requests[0].model == path  # the request keeps the real id


async def test_tool_choice_names_a_tool(model: OpenAIModel, local_server: LocalServer) -> None:
    """``tool_choice`` naming a tool forces it (the interop suite needs it: tiny models
    never call tools by themselves); the keywords pass as they are."""
    spec = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
    local_server.script("main", Reply(tool_calls=[CALL]), Reply(text="x"))
    events = [
        e async for e in model.stream([user_content("go")], tools=[spec], tool_choice=spec.name)
    ]
    assert ToolCallReady(CALL) in events
    _ = [e async for e in model.stream([user_content("go")], tools=[spec], tool_choice="required")]
    first, second = local_server.requests
    assert first.body["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert second.body["tool_choice"] == "required"

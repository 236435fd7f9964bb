"""Known quirks of OpenAI-compatible servers, each as a LocalServer scenario.

Where each quirk was read, and how the client handles it: ``docs/servers.md``. The
llama-cpp-python quirks are also checked against the real server in ``tests/interop``.
"""

from __future__ import annotations

import re

import pytest

from asyncrecall import ModelNotFoundError, ModelProtocolError
from asyncrecall.models import (
    Finished,
    FunctionCall,
    FunctionResponse,
    OpenAIModel,
    TextDelta,
    ToolCallReady,
    Usage,
    model_content,
    user_content,
)
from asyncrecall.models._openai import SIDE_QUERY_MAX_TOKENS
from asyncrecall.testing import LocalServer, Reply

from .helpers import run_turn

SCHEMA = {"type": "object", "properties": {"paths": {"type": "array"}}, "required": ["paths"]}


async def side_query(model: OpenAIModel) -> object:
    return await model.generate_json(system="pick", prompt="q", schema=SCHEMA, schema_name="s")


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# -- vLLM ---------------------------------------------------------------------------------


async def test_vllm_strict_tool_call_ids(model: OpenAIModel, local_server: LocalServer) -> None:
    """vLLM with Mistral's tokenizer rejects tool-call ids that are not 9 letters and
    digits. When a server sent no ids, the ids we make up pass that check."""
    local_server.script(
        "main",
        Reply(tool_calls=[("read_file", {"path": "a"})], omit_tool_call_ids=True),
        Reply(text="done", strict_tool_call_ids=True),
    )
    calls = [e.call for e in await run_turn(model) if isinstance(e, ToolCallReady)]
    history = [
        user_content("go"),
        model_content(*calls),
        user_content(*(FunctionResponse(c.id, c.name, {"ok": True}) for c in calls)),
    ]
    events = [e async for e in model.stream(history)]
    assert text_of(events) == "done"
    assert [r.status for r in local_server.requests] == [200, 200]


async def test_vllm_json_schema_is_used_as_is(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """vLLM answers ``json_schema`` through guided decoding: one request, no fallback."""
    local_server.script("main", Reply(json={"paths": ["a.md"]}))
    assert await side_query(model) == {"paths": ["a.md"]}
    (request,) = local_server.requests
    assert request.response_format_type == "json_schema"
    assert request.body["response_format"]["json_schema"]["strict"] is True


async def test_vllm_usage_only_with_stream_options(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """vLLM (like OpenAI) streams usage only when asked with ``stream_options``: we ask,
    and read the final ``choices: []`` usage chunk as reported, not estimated."""
    local_server.script("main", Reply(text="hi", prompt_tokens=11, completion_tokens=2))
    events = await run_turn(model)
    assert local_server.requests[0].include_usage
    assert Usage(11, 2, estimated=False) in events


# -- Ollama -------------------------------------------------------------------------------


async def test_ollama_tool_calls_arrive_whole_in_one_chunk(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Ollama streams each tool call whole in one chunk, and older versions end it with
    ``finish_reason: "stop"``: the calls are still delivered, in order."""
    calls = [FunctionCall("call_x", "glob", {"pattern": "*.md"}), FunctionCall("call_y", "ls", {})]
    local_server.script(
        "main", Reply(tool_calls=calls, calls_in_one_chunk=True, finish_reason="stop")
    )
    events = await run_turn(model)
    assert [e.call for e in events if isinstance(e, ToolCallReady)] == calls
    assert events[-1] == Finished("stop")


async def test_ollama_no_usage_in_streams_is_estimated(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Ollama before 0.5.2 (and LM Studio) ignore ``stream_options``: no usage chunk, so
    the usage is estimated and marked."""
    local_server.script("main", Reply(text="hello", usage=False))
    usage = [e for e in await run_turn(model) if isinstance(e, Usage)]
    assert len(usage) == 1 and usage[0].estimated


async def test_ollama_unknown_model_error(model: OpenAIModel, local_server: LocalServer) -> None:
    """Ollama's error for a model that is not pulled: a 404 naming what to do."""
    message = 'model "main" not found, try pulling it first'
    local_server.script("main", Reply(status=404, error_message=message))
    with pytest.raises(ModelNotFoundError, match="try pulling it first"):
        await run_turn(model)


async def test_ollama_ignoring_json_schema_is_a_protocol_error(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """An Ollama older than structured outputs ignores ``json_schema`` and may answer
    prose: a ModelProtocolError (the recall then falls back to its lexical pass)."""
    local_server.script("main", Reply(raw_content="The relevant file is a.md."))
    with pytest.raises(ModelProtocolError, match="invalid JSON"):
        await side_query(model)


# -- OpenAI -------------------------------------------------------------------------------


async def test_openai_reasoning_models_want_max_completion_tokens(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """o1/o3-style models reject ``max_tokens``: the side query's cap is sent again as
    ``max_completion_tokens``, and sent so from then on."""
    local_server.script(
        "main",
        Reply(json={"paths": []}, reject_max_tokens=True),
        Reply(json={"paths": ["b"]}, reject_max_tokens=True),
    )
    assert await side_query(model) == {"paths": []}
    assert await side_query(model) == {"paths": ["b"]}
    sent = [(r.status, r.body.get("max_completion_tokens")) for r in local_server.requests]
    assert sent == [(400, None), (200, SIDE_QUERY_MAX_TOKENS), (200, SIDE_QUERY_MAX_TOKENS)]


async def test_openai_first_reasoning_models_want_the_developer_role(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """o1-mini/o1-preview reject the ``system`` role: the request is sent again with the
    ``developer`` role, and so from then on."""
    local_server.script(
        "main",
        Reply(text="one", reject_system_role=True),
        Reply(text="two", reject_system_role=True),
    )
    assert text_of(await run_turn(model, system="be brief")) == "one"
    assert text_of(await run_turn(model, system="be brief")) == "two"
    roles = [(r.status, r.messages[0]["role"]) for r in local_server.requests]
    assert roles == [(400, "system"), (200, "developer"), (200, "developer")]


async def test_openai_refusal_is_the_answer(model: OpenAIModel, local_server: LocalServer) -> None:
    """A refusal comes in ``refusal``, with no content: it is the answer's text, not an
    empty answer."""
    local_server.script("main", Reply(refusal="I can't help with that.", chunk_size=5))
    assert text_of(await run_turn(model)) == "I can't help with that."


async def test_openai_refused_side_query_is_a_protocol_error(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    local_server.script("main", Reply(refusal="I can't help with that."))
    with pytest.raises(ModelProtocolError, match=re.escape("refused the side query")):
        await side_query(model)


# -- LM Studio ----------------------------------------------------------------------------


async def test_lm_studio_rejects_json_object_so_json_schema_comes_first(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """LM Studio answers 400 to ``json_object`` (\"'response_format.type' must be
    'json_schema' or 'text'\") and accepts ``json_schema``: one request."""
    local_server.script("main", Reply(json={"paths": ["c"]}, reject_json_object=True))
    assert await side_query(model) == {"paths": ["c"]}
    assert [(r.status, r.response_format_type) for r in local_server.requests] == [
        (200, "json_schema")
    ]


# -- llama-cpp-python ---------------------------------------------------------------------


async def test_llama_cpp_python_json_object_schema_key(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """llama-cpp-python refuses ``json_schema`` (HTTP 500) but takes a ``schema`` key in a
    ``json_object`` format and constrains its output with it: the fallback sends it."""
    local_server.script(
        "main", Reply(json={"paths": []}, reject_json_schema=True, rejection_status=500)
    )
    await side_query(model)
    fallback = local_server.requests[-1].body["response_format"]
    assert fallback == {"type": "json_object", "schema": SCHEMA}


async def test_a_server_rejecting_the_schema_key_gets_json_object_without_it(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """A strict validator that refuses both json_schema and the ``schema`` key: the key is
    dropped (learned once), so recall after recall costs one request."""
    strict = Reply(json={"paths": []}, reject_json_schema=True, reject_json_object_schema=True)
    local_server.script("main", strict, strict)
    await side_query(model)
    await side_query(model)
    sent = [(r.status, r.body["response_format"]) for r in local_server.requests]
    assert [status for status, _ in sent] == [400, 400, 200, 200]
    assert sent[-1][1] == {"type": "json_object"}

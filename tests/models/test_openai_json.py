"""OpenAIModel.generate_json: the side query's wire shape, parsing and json_schema fallback."""

from __future__ import annotations

import pytest

from asyncrecall import ModelError, ModelProtocolError
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

SCHEMA = {
    "type": "object",
    "properties": {"selected_memories": {"type": "array", "items": {"type": "string"}}},
    "required": ["selected_memories"],
    "additionalProperties": False,
}


async def ask(model: OpenAIModel) -> object:
    return await model.generate_json(
        system="pick memories", prompt="query and manifest", schema=SCHEMA, schema_name="selection"
    )


async def test_side_query_wire_shape_and_value(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Not streamed, temperature 0, strict json_schema response_format; the JSON is parsed."""
    local_server.script("main", Reply(json={"selected_memories": ["a.md"]}))
    assert await ask(model) == {"selected_memories": ["a.md"]}
    request = local_server.requests[0]
    assert request.is_side_query
    assert request.body["stream"] is False
    assert request.body["temperature"] == 0
    assert request.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "selection", "schema": SCHEMA, "strict": True},
    }
    assert request.messages == [
        {"role": "system", "content": "pick memories"},
        {"role": "user", "content": "query and manifest"},
    ]


async def test_fenced_json_is_tolerated(model: OpenAIModel, local_server: LocalServer) -> None:
    local_server.script("main", Reply(raw_content='```json\n{"selected_memories": []}\n```'))
    assert await ask(model) == {"selected_memories": []}


async def test_invalid_json_is_a_protocol_error(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    local_server.script("main", Reply(raw_content="I think a.md is relevant"))
    with pytest.raises(ModelProtocolError, match="invalid JSON") as caught:
        await ask(model)
    assert "main" in str(caught.value)
    assert isinstance(caught.value.__cause__, ValueError)


async def test_empty_content_is_a_protocol_error(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    local_server.script("main", Reply(raw_content=""))
    with pytest.raises(ModelProtocolError, match="no content"):
        await ask(model)


async def test_json_schema_refused_falls_back_to_json_object_and_remembers(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """A 400 about json_schema: one retry with json_object (schema in the prompt); the model
    then asks json_object directly."""
    local_server.script(
        "main",
        Reply(json={"selected_memories": ["x.md"]}, reject_json_schema=True),
        Reply(json={"selected_memories": []}),
    )
    assert await ask(model) == {"selected_memories": ["x.md"]}
    assert model.json_schema_supported is False
    assert await ask(model) == {"selected_memories": []}
    formats = [(r.status, r.response_format_type) for r in local_server.requests]
    assert formats == [(400, "json_schema"), (200, "json_object"), (200, "json_object")]
    fallback_system = local_server.requests[1].messages[0]["content"]
    assert fallback_system.startswith("pick memories")
    assert "selected_memories" in fallback_system


async def test_unrelated_400_is_not_a_fallback(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """A 400 that does not mention the response format is reported, not retried."""
    local_server.script("main", Reply(status=400, error_message="context length exceeded"))
    with pytest.raises(ModelError, match="context length exceeded") as caught:
        await ask(model)
    assert caught.value.status == 400
    assert model.json_schema_supported is True
    assert len(local_server.requests) == 1

"""The side query's request budget. A rejected ``json_schema`` is recognised from
any status and the body, falls back to ``json_object`` at once, is never retried, and is
remembered per endpoint for every model of the process; side queries are capped.

Requests are counted on the server's records (what went on the wire).
"""

from __future__ import annotations

from asyncrecall.models import OpenAIModel, open_openai_models
from asyncrecall.models._openai import SIDE_QUERY_MAX_TOKENS
from asyncrecall.testing import LocalServer, Reply

SCHEMA = {
    "type": "object",
    "properties": {"selected_memories": {"type": "array", "items": {"type": "string"}}},
    "required": ["selected_memories"],
}

# What llama-cpp-python 0.3.36's server answers to json_schema (read off the real server).
LLAMA_CPP_PYTHON_500 = (
    "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)


async def recall(model: OpenAIModel) -> object:
    return await model.generate_json(
        system="pick memories", prompt="query", schema=SCHEMA, schema_name="selection"
    )


def llama_cpp_python_reply(paths: list[str]) -> Reply:
    return Reply(
        json={"selected_memories": paths},
        reject_json_schema=True,
        rejection_status=500,
        rejection_message=LLAMA_CPP_PYTHON_500,
    )


async def test_a_500_naming_json_schema_falls_back_at_once_without_retries(
    local_server: LocalServer,
) -> None:
    """An HTTP 500 whose body names json_schema: two requests in all (json_schema, then
    json_object), even with an SDK retry budget of 2 on the main model."""
    local_server.script("main", llama_cpp_python_reply(["a.md"]))
    async with OpenAIModel(model="main", base_url=local_server.base_url, max_retries=2) as model:
        assert await recall(model) == {"selected_memories": ["a.md"]}
    formats = [(r.status, r.response_format_type) for r in local_server.requests]
    assert formats == [(500, "json_schema"), (200, "json_object")]


async def test_the_fallback_is_remembered_per_endpoint_by_every_model(
    local_server: LocalServer,
) -> None:
    """Recall after recall, new model instances (each ``asyncrecall memory recall`` or
    session builds its own) ask json_object directly: one request per recall."""
    local_server.script("main", llama_cpp_python_reply(["a.md"]))
    local_server.script("main", llama_cpp_python_reply(["b.md"]))
    local_server.script("other", Reply(json={"selected_memories": []}))
    async with OpenAIModel(model="main", base_url=local_server.base_url) as first:
        await recall(first)
    per_recall = [len(local_server.requests)]
    async with open_openai_models(model="main", base_url=local_server.base_url) as pair:
        assert pair.side.json_schema_supported is False
        assert await recall(pair.side) == {"selected_memories": ["b.md"]}
    per_recall.append(len(local_server.requests) - per_recall[0])
    assert per_recall == [2, 1]
    async with OpenAIModel(model="other", base_url=local_server.base_url) as other:
        await recall(other)  # another model of the server is another endpoint
    assert local_server.requests[-1].response_format_type == "json_schema"


async def test_side_queries_never_retry_a_server_error(local_server: LocalServer) -> None:
    """A 500 that is not about the format: one request, no SDK retry (a late side query is
    worth nothing), and json_schema is still used next time."""
    local_server.script("main", Reply(status=500, error_message="busy", retry_after=0.001))
    local_server.script("main", Reply(json={"selected_memories": []}))
    async with OpenAIModel(model="main", base_url=local_server.base_url, max_retries=2) as model:
        try:
            await recall(model)
        except Exception as exc:
            assert "busy" in str(exc)
        else:
            raise AssertionError("the 500 was retried into a success")
        assert len(local_server.requests) == 1
        await recall(model)
    assert local_server.requests[-1].response_format_type == "json_schema"


async def test_side_queries_are_capped(model: OpenAIModel, local_server: LocalServer) -> None:
    """Every side query carries ``max_tokens`` (a few hundred: five paths need far less)."""
    local_server.script("main", Reply(json={"selected_memories": []}))
    await recall(model)
    assert local_server.requests[0].body["max_tokens"] == SIDE_QUERY_MAX_TOKENS
    assert 100 <= SIDE_QUERY_MAX_TOKENS <= 500


async def test_a_caller_may_ask_for_a_larger_cap(
    model: OpenAIModel, local_server: LocalServer
) -> None:
    """Extraction and consolidation answer more than a recall's few paths: their
    ``max_tokens`` reaches the wire instead of the recall's cap."""
    local_server.script("main", Reply(json={"memories": []}))
    await model.generate_json(
        system="s", prompt="p", schema={"type": "object"}, schema_name="x", max_tokens=2048
    )
    assert local_server.requests[0].body["max_tokens"] == 2048

"""A side query given a :class:`PromptPrefix` begins as the main turns do, on the wire,
on an endpoint seen to interrupt (a one-slot server): their system message byte for
byte and their tools, its own instruction in the user message after them. A server that
keeps the longest common start of what it read (one llama.cpp slot) then still holds
the main turns' start after the side query. Anywhere else the prefix is not sent (it
would cost its tokens on every query, for no shared cache). Real HTTP to the local
server, which records each request's body."""

from __future__ import annotations

import json

import pytest

from asyncrecall.models import OpenAIModel, PromptPrefix, ToolSpec, user_content
from asyncrecall.models._openai import PREFILL_SLICE_CHARS
from asyncrecall.models._traffic import background_requests, traffic
from asyncrecall.testing import LocalServer, RecordedRequest, Reply

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
TOOLS = (
    ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}}),
    ToolSpec("glob", "Find files.", {"type": "object", "properties": {}}),
)
SYSTEM = "You are the agent. " * 80  # longer than a slice: a cut inside it would show
PREFIX = PromptPrefix(SYSTEM, TOOLS)


async def main_request(main: OpenAIModel, local_server: LocalServer) -> RecordedRequest:
    local_server.script("main", Reply(text="hello"))
    async for _ in main.stream([user_content("hi")], system=SYSTEM, tools=TOOLS):
        pass
    [request] = [r for r in local_server.requests if r.model == "main"]
    return request


def sides(local_server: LocalServer) -> list[RecordedRequest]:
    return [r for r in local_server.requests if r.model == "side"]


async def test_a_side_query_with_a_prefix_begins_as_the_main_turns_do(
    local_server: LocalServer, main: OpenAIModel, side: OpenAIModel
) -> None:
    """With a prefix, the side query's first message is the main turn's system message
    as sent, its tools are the main turn's, none callable (``tool_choice`` ``none``),
    and its instruction leads the one user message, before its prompt; in both
    formats (``json_schema``, and ``json_object`` after a refusal, where the schema
    comes last, so the two share all but the end)."""
    sent = await main_request(main, local_server)
    traffic(local_server.base_url).learn_interrupts()
    local_server.script("side", Reply(json={"answer": "a"}, reject_json_schema=True))
    answer = await side.generate_json(
        system="Extract.", prompt="the turns", schema=SCHEMA, schema_name="answer", prefix=PREFIX
    )
    assert answer == {"answer": "a"}
    refused, fallback = sides(local_server)
    assert [refused.response_format_type, fallback.response_format_type] == [
        "json_schema",
        "json_object",
    ]
    for request in (refused, fallback):
        assert request.messages[0] == sent.messages[0]
        assert request.body["tools"] == sent.body["tools"]
        assert request.body["tool_choice"] == "none"
        assert [m["role"] for m in request.messages] == ["system", "user"]
    assert refused.messages[1]["content"] == "Extract.\n\nthe turns"
    schema_note = fallback.messages[1]["content"].removeprefix(refused.messages[1]["content"])
    assert schema_note.startswith("\n\nAnswer with one JSON object")
    assert json.dumps(SCHEMA) in schema_note


@pytest.mark.parametrize("given", ["no prefix", "a prefix, an endpoint not seen to interrupt"])
async def test_otherwise_the_instruction_is_the_system_prompt(
    local_server: LocalServer, side: OpenAIModel, given: str
) -> None:
    """Without a prefix, or on an endpoint not seen to interrupt (one that may run
    several requests, or a paid API: no one cache shared with the main turns), the side
    query is as it always was: its instruction is the system message, the prompt the
    user message, no tools."""
    local_server.script("side", Reply(json={"answer": "a"}))
    prefix = PREFIX if given.startswith("a prefix") else None
    await side.generate_json(system="Extract.", prompt="the turns", schema=SCHEMA,
                             schema_name="answer", prefix=prefix)  # fmt: skip
    [request] = sides(local_server)
    assert request.messages == [
        {"role": "system", "content": "Extract."},
        {"role": "user", "content": "the turns"},
    ]
    assert "tools" not in request.body and "tool_choice" not in request.body


async def test_slices_never_cut_the_prefix(
    local_server: LocalServer, main: OpenAIModel, side: OpenAIModel
) -> None:
    """On an endpoint that interrupts, a background query's prompt still goes in
    slices, but every slice carries the main turn's system message whole and its tools:
    a server keeps only the start a slice shares with the one before, so a slice cut
    inside the system prompt would drop the rest of it from the cache. Only the user
    message is cut, every ``PREFILL_SLICE_CHARS`` characters."""
    sent = await main_request(main, local_server)
    traffic(local_server.base_url).learn_interrupts()
    local_server.set_default("side", Reply(json={"answer": "ok"}))
    prompt = "y" * (PREFILL_SLICE_CHARS * 2)
    with background_requests():
        answer = await side.generate_json(
            system="Extract.", prompt=prompt, schema=SCHEMA, schema_name="answer", prefix=PREFIX
        )
    assert answer == {"answer": "ok"}
    *slices, query = sides(local_server)
    user = f"Extract.\n\n{prompt}"
    assert [len(r.messages[1]["content"]) for r in slices] == [
        PREFILL_SLICE_CHARS,
        PREFILL_SLICE_CHARS * 2,
    ]
    for request in (*slices, query):
        assert request.messages[0] == sent.messages[0]
        assert user.startswith(request.messages[1]["content"])
        assert request.body["tools"] == sent.body["tools"]
    assert [r.body["max_tokens"] for r in slices] == [1, 1]
    assert query.messages[1]["content"] == user

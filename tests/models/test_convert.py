"""The contents ⇄ OpenAI messages converter and the tool-call pairing validator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncrecall import HistoryError
from asyncrecall.models import (
    Content,
    FunctionCall,
    FunctionResponse,
    Text,
    ToolSpec,
    contents_to_messages,
    model_content,
    tools_to_openai,
    user_content,
    validate_messages,
)

CALL_A = FunctionCall("call_a", "read_file", {"path": "a.py"})
CALL_B = FunctionCall("call_b", "glob", {"pattern": "*.md"})
CALL_C = FunctionCall("call_c", "grep_search", {"pattern": "TODO"})


def response(call: FunctionCall, value: str = "ok") -> FunctionResponse:
    return FunctionResponse(call.id, call.name, {"output": f"{value} {call.id}"})


def test_plain_user_and_model_text_with_system() -> None:
    messages = contents_to_messages([user_content("hi"), model_content("hello")], system="be brief")
    assert messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]


def test_parallel_calls_become_one_assistant_message() -> None:
    """A model content's calls are ONE assistant message; its text goes into ``content``."""
    messages = contents_to_messages([user_content("go"), model_content("looking", CALL_A, CALL_B)])
    assistant = messages[-1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == "looking"
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
    assert assistant["tool_calls"][0] == {
        "id": "call_a",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": "a.py"})},
    }


def test_calls_without_text_send_empty_content() -> None:
    """``"content": ""``: llama-cpp-python's server answers HTTP 500 to ``null`` and to a
    missing key (its chat template reads ``content``); see tests/interop."""
    messages = contents_to_messages([user_content("go"), model_content(CALL_A)])
    assert messages[-1]["content"] == ""
    assert messages[-1]["tool_calls"][0]["id"] == "call_a"


def test_responses_out_of_order_follow_the_calls_order() -> None:
    """Tool messages come in the order of the calls, not of the response parts."""
    contents = [
        user_content("go"),
        model_content(CALL_A, CALL_B, CALL_C),
        user_content(response(CALL_C), response(CALL_A), response(CALL_B)),
    ]
    messages = contents_to_messages(contents)
    tool_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert tool_ids == ["call_a", "call_b", "call_c"]
    validate_messages(messages)


def test_text_with_responses_goes_after_the_tool_messages() -> None:
    """Text parts of a tool-result content become ONE user message after the tool messages."""
    contents = [
        user_content("go"),
        model_content(CALL_A, CALL_B),
        user_content(
            "<system-reminder>memory</system-reminder>", response(CALL_B), "more", response(CALL_A)
        ),
    ]
    messages = contents_to_messages(contents)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert messages[-1]["content"] == "<system-reminder>memory</system-reminder>\n\nmore"
    assert json.loads(messages[2]["content"]) == {"output": "ok call_a"}
    validate_messages(messages)


def test_unexpressible_parts_raise_history_error() -> None:
    with pytest.raises(HistoryError, match="function call"):
        contents_to_messages([Content("user", (CALL_A,))])
    with pytest.raises(HistoryError, match="function response"):
        contents_to_messages([Content("model", (response(CALL_A),))])


def test_tools_to_openai() -> None:
    spec = ToolSpec("glob", "Find files.", {"type": "object", "properties": {}})
    assert tools_to_openai([spec]) == [
        {
            "type": "function",
            "function": {
                "name": "glob",
                "description": "Find files.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]


def _assistant(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ],
    }


def _tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "{}"}


USER = {"role": "user", "content": "q"}


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([USER, _assistant("a", "b"), _tool("a")], "no tool message"),
        ([USER, _assistant("a", "b"), _tool("a"), USER, _tool("b")], "got role 'user'"),
        ([USER, _assistant("a", "b"), _tool("b"), _tool("a")], "calls' order"),
        ([USER, _assistant("a", "b"), _tool("a"), _tool("a")], "expected the tool message"),
        ([USER, _assistant("a", "a"), _tool("a"), _tool("a")], "repeat"),
        ([USER, _assistant("a"), _tool("a"), _tool("z")], "follows no assistant"),
        ([USER, _tool("z")], "follows no assistant"),
        ([USER, _assistant("a")], "no tool message"),
    ],
    ids=[
        "missing",
        "something-between",
        "wrong-order",
        "twice",
        "dup-ids",
        "extra",
        "orphan",
        "pending",
    ],
)
def test_validator_rejects_broken_pairing(messages: list[dict[str, Any]], match: str) -> None:
    """HistoryError when a call is not followed by exactly its tool messages."""
    with pytest.raises(HistoryError, match=match):
        validate_messages(messages)


def test_validator_accepts_good_pairing() -> None:
    validate_messages([USER, _assistant("a", "b"), _tool("a"), _tool("b"), USER])
    validate_messages([USER, {"role": "assistant", "content": "x"}, USER])


def test_converter_output_of_missing_response_fails_validation() -> None:
    """The converter is lenient; the validator names what is missing."""
    messages = contents_to_messages(
        [user_content("go"), model_content(CALL_A, CALL_B), user_content(response(CALL_A))]
    )
    with pytest.raises(HistoryError, match="call_b"):
        validate_messages(messages)


@given(st.permutations(range(4)), st.booleans())
def test_any_response_order_converts_to_a_valid_request(order: list[int], with_text: bool) -> None:
    """Whatever the order of the responses (and text), the request obeys the pairing rule."""
    calls = [FunctionCall(f"c{i}", "f", {"i": i}) for i in range(4)]
    parts: list[Text | FunctionResponse] = [response(calls[i]) for i in order]
    if with_text:
        parts.insert(order[0], Text("reminder"))
    messages = contents_to_messages(
        [user_content("go"), model_content(*calls), Content("user", tuple(parts))]
    )
    validate_messages(messages)
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ["c0", "c1", "c2", "c3"]
    assert (messages[-1] == {"role": "user", "content": "reminder"}) is with_text

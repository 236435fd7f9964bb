"""The embedded model's prompt format (no model needed)."""

from __future__ import annotations

from asyncrecall.models import (
    Content,
    FunctionCall,
    FunctionResponse,
    ToolSpec,
    model_content,
    user_content,
)
from asyncrecall.models._local_prompt import chat_prompt, json_prompt, route_grammar

READ = ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})


def test_tool_turns_render_in_the_function_calling_format() -> None:
    """Calls render as ``functions.<name>:`` + JSON, results as a user turn naming the tool."""
    history = [
        user_content("read it"),
        model_content(FunctionCall("c1", "read_file", {"path": "a.md"})),
        Content("user", (FunctionResponse("c1", "read_file", {"text": "hi"}),)),
    ]
    prompt = chat_prompt(history, system="Be brief.", tools=[READ])
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\nYou have access to")
    assert 'functions.read_file:\n// Read a file\n{"type": "object"' in prompt
    assert '<|im_start|>assistant\nfunctions.read_file:\n{"path": "a.md"}<|im_end|>' in prompt
    assert '<|im_start|>user\nResult of functions.read_file:\n{"text": "hi"}<|im_end|>' in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_plain_turns_have_no_function_preamble() -> None:
    """Without tools the prompt is plain ChatML; a text reply carries no ``message:`` prefix."""
    prompt = chat_prompt(
        [user_content("hi"), model_content("hello"), user_content("bye")], system=None, tools=()
    )
    assert "functions" not in prompt and "message:" not in prompt
    assert "<|im_start|>assistant\nhello<|im_end|>" in prompt
    assert json_prompt(system="S", prompt="P") == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nP<|im_end|>\n<|im_start|>assistant\n"
    )


def test_route_grammar_offers_a_message_or_each_tool() -> None:
    """The first words are constrained to ``message:`` or ``functions.<tool>:``."""
    assert route_grammar([READ]) == 'root ::= "message:" | "functions.read_file:"\n'


def test_a_runaway_answer_is_noticed() -> None:
    """The guard of main turns ends an answer that went degenerate: one token over and
    over (the screen of backticks seen offline), or the same line a third time."""
    from asyncrecall.models._local import _Runaway

    backticks = _Runaway()
    assert [backticks.degenerate("``") for _ in range(12)] == [False] * 11 + [True]

    lines = _Runaway()
    line = "The staging environment is a staging environment.\n"
    assert [lines.degenerate(piece) for piece in (line, "Deploys go through it.\n", line)] == [
        False,
        False,
        False,
    ]
    assert lines.degenerate(line)


def test_an_ordinary_answer_is_not_a_runaway() -> None:
    """Code, lists and short repeated lines (blank lines, fences, ``}``) pass."""
    from asyncrecall.models._local import _Runaway

    guard = _Runaway()
    answer = (
        "```python\ndef main():\n    if ready:\n        return 1\n    }\n    }\n```\n\n"
        "- one item here\n- two items here\n- three items\n\n\n```\nmore\n```\n"
    )
    assert not any(guard.degenerate(piece) for piece in answer.split(" "))
    assert not any(_Runaway().degenerate(" ") for _ in range(11))

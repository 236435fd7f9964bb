"""The conformance kit itself, without a framework: its cases pass a hand-written agent
loop that keeps the recall contract, and fail the same loop broken one way at a time
(a kit that cannot fail would pass every adapter)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from asyncrecall.testing import LocalServer
from asyncrecall_conformance import CASES, TOOL_NAME, Case, Driver, Harness, Run, cases

TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


class HandLoop(Driver):
    """A minimal agent loop over the OpenAI client with the recall done by hand:
    ``start`` on the message, ``take`` before each request, ``cancel`` at the end;
    ``broken`` names the one rule it breaks."""

    def __init__(self, broken: str | None = None) -> None:
        self.broken = broken

    async def run(self, run: Run) -> Any:
        key, prefetcher = run.key or "run", run.prefetcher
        prefetcher.start(key, run.text)
        try:
            async with AsyncOpenAI(base_url=run.base_url, api_key="-", max_retries=0) as client:
                return await self._loop(client, run, key)
        finally:
            if self.broken != "no cancel":
                prefetcher.cancel(key)

    async def _loop(self, client: AsyncOpenAI, run: Run, key: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [{"role": "system", "content": run.instructions}]
        messages.append({"role": "user", "content": run.text})
        block = run.prefetcher.take(key, "user_query")
        if block is not None:
            memory = {"role": "user", "content": block.text}
            at = len(messages) if self.broken == "memory after the prompt" else 1
            messages.insert(at, memory)
        while True:
            reply = await client.chat.completions.create(
                model=run.model, messages=messages, tools=TOOLS
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                return [*messages, {"role": "assistant", "content": message.content}]
            calls = [c.model_dump(include={"id", "type", "function"}) for c in message.tool_calls]
            messages.append({"role": "assistant", "tool_calls": calls})
            results = [
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": await run.read_file(
                        json.loads(call["function"]["arguments"])["path"]
                    ),
                }
                for call in calls
            ]
            block = run.prefetcher.take(key, "tool_result")
            memory = [{"role": "user", "content": block.text}] if block is not None else []
            if self.broken == "memory before the tool results":
                messages += [*memory, *results]
            else:
                messages += [*results, *memory]


def case(case_id: str) -> Case:
    return next(c for c in CASES if c.id == case_id)


@pytest.mark.parametrize(
    "case_id",
    [
        "a-slow-recall-after-tool-results",
        "b-settled-recall-on-first-request",
        "c-hang-up-when-run-returns",
        "c-hang-up-when-run-raises",
    ],
)
async def test_a_loop_that_keeps_the_contract_passes(case_id: str, tmp_path: Path) -> None:
    """The hand loop keeps the contract: its cases pass (so the failures below are the
    broken rule's, not the loop's)."""
    with LocalServer() as server:
        await case(case_id)(Harness(HandLoop(), server, tmp_path / "memory"))


@pytest.mark.parametrize(
    ("broken", "case_id", "message"),
    [
        ("memory before the tool results", "a-slow-recall-after-tool-results", "tool message"),
        ("memory after the prompt", "b-settled-recall-on-first-request", "after the user's"),
        pytest.param(
            "no cancel",
            "c-hang-up-when-run-returns",
            "not hung up",
            # the loop broken on purpose leaves its side query's connection open: the
            # socket it leaks is the rule it breaks, which the case must see
            marks=[
                pytest.mark.filterwarnings("ignore:unclosed:ResourceWarning"),
                pytest.mark.filterwarnings(
                    "ignore:Exception ignored in:pytest.PytestUnraisableExceptionWarning"
                ),
            ],
        ),
    ],
)
async def test_the_kit_fails_a_loop_that_breaks_a_rule(
    broken: str, case_id: str, message: str, tmp_path: Path
) -> None:
    """Each rule broken in the hand loop fails its case, with a message naming it."""
    with LocalServer() as server:
        harness = Harness(HandLoop(broken), server, tmp_path / "memory")
        with pytest.raises(AssertionError, match=message):
            await case(case_id)(harness)


def test_cases_are_named_by_letter_and_marks_go_by_id() -> None:
    """Every case id starts with its letter (a to g, all present) and its docstring with
    that letter; a mark given for an id no case has is an error, not silently dropped."""
    letters = {c.id[0] for c in CASES}
    assert letters == set("abcdefg")
    assert len({c.id for c in CASES}) == len(CASES)
    for c in CASES:
        assert c.doc.startswith(f"({c.id[0]})"), c.id
    params = cases(marks={"g-bounded-memory-with-keys": [pytest.mark.slow]})
    marked = [p for p in params if p.marks]
    assert [p.id for p in marked] == ["g-bounded-memory-with-keys"]
    with pytest.raises(ValueError, match="no conformance case named"):
        cases(marks={"z-nothing": [pytest.mark.slow]})


# -- the Anthropic Messages wire ---------------------------------------------------------


def _round(context_in: int) -> dict[str, Any]:
    """A Messages request after a round of two tool calls, with the client's context
    (a memory block) inside the result ``context_in``."""
    from asyncrecall_conformance import MEMORY_MARK

    results = []
    for n in range(2):
        content = [{"type": "text", "text": f"contents of f{n}"}]
        if n == context_in:
            reminder = f"<system-reminder>\n{MEMORY_MARK}\nx\n</system-reminder>"
            content.append({"type": "text", "text": reminder})
        results.append({"type": "tool_result", "tool_use_id": f"t{n}", "content": content})
    calls = [{"type": "tool_use", "id": f"t{n}", "name": "read_file", "input": {}} for n in (0, 1)]
    return {
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "question"}]},
            {"role": "assistant", "content": calls},
            {"role": "user", "content": results},
        ],
    }


def test_the_anthropic_wire_reads_context_in_the_last_result_as_after_the_round() -> None:
    """The CLI's context in the round's last tool result reads as one user message after
    every tool message; in another result it reads as a user message between them,
    which the kit's checks reject (a per-call injection fails)."""
    from asyncrecall_conformance._anthropic import chat_messages
    from asyncrecall_conformance._wire import (
        assert_memory_after_tools,
        assert_valid_chat,
    )

    after = chat_messages(_round(context_in=1))
    assert [m["role"] for m in after] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert after[2]["tool_calls"][1]["id"] == "t1"
    assert_valid_chat(after)
    assert_memory_after_tools(after)
    between = chat_messages(_round(context_in=0))
    with pytest.raises(AssertionError, match="unanswered"):
        assert_valid_chat(between)


def test_the_anthropic_wire_needs_an_anthropic_server() -> None:
    """A plain LocalServer is refused with the way out (the driver's server_type)."""
    from asyncrecall_conformance import AnthropicServerWire

    with LocalServer() as server, pytest.raises(TypeError, match="server_type"):
        AnthropicServerWire(server)  # type: ignore[arg-type]

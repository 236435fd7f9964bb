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
from asyncrecall.testing.conformance import CASES, TOOL_NAME, Case, Driver, Harness, Run, cases

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
        ("no cancel", "c-hang-up-when-run-returns", "not hung up"),
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

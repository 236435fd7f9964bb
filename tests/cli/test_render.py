"""How ``run`` and ``chat`` render a query's events: text, one JSON object, JSON lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from asyncrecall.agent import (
    Agent,
    AgentClient,
    AgentEvent,
    ContentEvent,
    ErrorEvent,
    FinishedEvent,
    LoopDetectedEvent,
    ToolCallEvent,
    ToolRegistry,
)
from asyncrecall.cli._render import EventPrinter, exit_code
from models.test_single_slot import CutAfterText

LOOP = [
    ToolCallEvent(name="grep_search", args={"pattern": "x"}, id="c1"),
    LoopDetectedEvent(name="grep_search", repeats=5),
    ErrorEvent(message="loop detected: the model called grep_search ...", kind="loop_detected"),
    FinishedEvent(reason="loop_detected", turns=5),
]


def printer(output_format: str) -> tuple[EventPrinter, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    console = Console(file=err, highlight=False, width=200)
    return EventPrinter(output_format, out=out, err=console), out, err  # type: ignore[arg-type]


def show(p: EventPrinter, events: list[AgentEvent]) -> None:
    for event in events:
        p.show(event)


def test_json_says_is_error_with_the_reason_and_the_exit_code() -> None:
    """A failed query's JSON object has ``is_error: true``, the one-line reason and the
    exit code the command returns."""
    p, out, _ = printer("json")
    show(p, LOOP)
    result = json.loads(out.getvalue())
    assert result["is_error"] is True and result["error"].startswith("loop detected")
    assert result["exit_code"] == 3 and result["finish_reason"] == "loop_detected"
    assert p.error is not None and exit_code(p.error) == 3


def test_text_prints_no_answer_and_leaves_the_reason_to_the_command() -> None:
    """Text mode prints nothing on stdout for a failed query and no second stderr line
    about the stop: the command prints the one-line reason."""
    p, out, err = printer("text")
    show(p, LOOP)
    assert out.getvalue() == ""
    assert "stopped" not in err.getvalue() and "loop detected" not in err.getvalue()


@pytest.mark.parametrize(
    ("kind", "code"),
    [("ModelServerError", 1), ("empty_answer", 1), ("max_turns", 3), ("stopped", 3)],
)
def test_exit_codes(kind: str, code: int) -> None:
    assert exit_code(ErrorEvent(message="m", kind=kind)) == code


def test_a_tool_call_with_arguments_that_are_not_an_object_is_shown_as_is() -> None:
    """Malformed arguments from a model never break the text rendering."""
    p, _, err = printer("text")
    p.show(ToolCallEvent(name="read_file", args="```", id="c1"))  # type: ignore[arg-type]
    assert "read_file('```')" in err.getvalue()


def test_two_answers_are_separated_by_a_blank_line() -> None:
    p, out, _ = printer("text")
    show(p, [ContentEvent(text="one"), FinishedEvent(reason="stop", text="one")])
    show(p, [ContentEvent(text="two"), FinishedEvent(reason="stop", text="two")])
    assert out.getvalue() == "one\n\ntwo\n"


@pytest.mark.parametrize("output_format", ["text", "json", "stream-json"])
def test_error_texts_are_redacted_whatever_raised_them(
    output_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The printer takes the configured key (and key shapes) out of an error event, a
    failed tool's error and an extraction failure, whoever made them (not only the
    model's errors, which are clean at the source): in the JSON it prints and in the
    error the command writes on stderr."""
    from asyncrecall.agent import MemoryExtractionSkippedEvent, ToolResultEvent

    key = "configured-key-5be21f"
    monkeypatch.setenv("ASYNCRECALL_API_KEY", key)
    p, out, err = printer(output_format)
    show(
        p,
        [
            ToolResultEvent(name="read_file", ok=False, id="c1", error=f"no file {key}"),
            ErrorEvent(message=f"endpoint said {key} and sk-proj-abcdefgh1234", kind="x"),
            FinishedEvent(reason="error", turns=1),
        ],
    )
    p.show_background(MemoryExtractionSkippedEvent(reason="error", detail=f"failed: {key}"))
    assert p.error is not None and p.error.message == "endpoint said [redacted] and [redacted]"
    assert key not in out.getvalue() + err.getvalue()
    assert "sk-proj" not in out.getvalue() + err.getvalue()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def _cut_then_answered(tmp_path: Path) -> list[AgentEvent]:
    """The events of a real query whose first stream says "Half an " and is cut for
    our side query (``request_retried``), then is answered in full."""
    model = CutAfterText()
    agent = Agent(AgentClient(model=model), ToolRegistry(tmp_path), max_turns=3)  # type: ignore[arg-type]
    return [event async for event in agent.run_query("hi")]


async def test_text_to_a_pipe_prints_a_cut_and_resent_answer_once(tmp_path: Path) -> None:
    """``run``'s text output to a pipe or a file: a main stream cut and sent again prints
    the answer once, without the cut start."""
    p, out, err = printer("text")
    show(p, await _cut_then_answered(tmp_path))
    assert out.getvalue() == "The answer.\n"
    assert "sent again" in err.getvalue()


async def test_text_to_a_terminal_erases_the_cut_start(tmp_path: Path) -> None:
    """On a terminal the answer streams as it comes, and the cut start is erased (the
    cursor back to the start of its line, the line cleared) before the answer sent
    again: the screen shows the answer once."""
    out, err = _Terminal(), io.StringIO()
    p = EventPrinter("text", out=out, err=Console(file=err, highlight=False, width=200))
    show(p, await _cut_then_answered(tmp_path))
    assert out.getvalue() == "Half an \r\x1b[2KThe answer.\n"

"""Reading an agent's session transcript for extraction, with where each text came from.

Claude Code and Qwen Code append each session to a JSON Lines file (the hooks' input
names it: ``transcript_path``). A turn's offset is its line's number in the file, which
only grows, so the offsets of a session stay the same from one turn end to the next
and the extractor's cursor can stand in them.

Trust comes from where a text came from:

- the user's turns: what the user typed (Claude Code: a ``user`` record whose content is
  text, not a tool result and not marked as meta; Qwen Code: a ``user`` record, its
  ``real_user`` provenance, minus the parts the harness added);
- the assistant's turns: its text answers, marked ``after_tools`` once the session has
  shown the model a tool's output (as ``run`` marks them);
- outside text (:class:`~asyncrecall.memory.ForeignText`, every write is vetted
  against it): tool results, the context hooks added (ours included: recalled notes are
  not the user's words), and every other record the harness attached whose kind is not
  known to be its own bookkeeping.

A line that is not JSON (a write in progress) ends the reading there: the rest waits
for the next turn end.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from asyncrecall.memory import ForeignText, TranscriptTurn

__all__ = ["AgentTranscript", "read_transcript"]

TurnRole = Literal["user", "assistant"]

#: The largest transcript read, in bytes (past it, the newest part is read).
MAX_BYTES: Final = 16 * 1024 * 1024

#: Claude Code's attachments that are its own bookkeeping (the environment, the model's
#: name, listings, the date): not text from outside. Any other kind counts as outside
#: text (a file the user attached, a hook's context, what a new version adds).
_CLAUDE_OWN: Final = frozenset(
    {
        "environment",
        "model",
        "deferred_tools_delta",
        "agent_listing_delta",
        "skill_listing",
        "total_tokens_reminder",
        "session_context",
        "date",
        "remote_session_change",
        "prompt_snapshot",
    }
)
#: The harness's reminders inside a user record (Claude Code's ``<system-reminder>``,
#: Qwen Code's ``<qwen:...>`` context parts): not the user's words.
_REMINDER: Final = re.compile(
    r"<system-reminder>.*?</system-reminder>|<qwen:([\w-]+)>.*?</qwen:\1>", re.DOTALL
)


@dataclass(frozen=True, slots=True)
class AgentTranscript:
    """A session's turns (offsets: line numbers), its outside text, and ``end``: one past
    the last complete line read."""

    turns: tuple[TranscriptTurn, ...]
    foreign: tuple[ForeignText, ...]
    end: int


def read_transcript(agent: str, path: Path) -> AgentTranscript:
    """The turns and outside text of the transcript at ``path`` (``OSError`` when it
    cannot be read)."""
    with path.open("rb") as file:
        size = file.seek(0, 2)
        file.seek(max(0, size - MAX_BYTES))
        data = file.read()
    lines = data.split(b"\n")
    complete = lines[:-1]  # the last piece has no newline yet: not a whole record
    first = 1 if size > MAX_BYTES else 0  # a cut first line
    records: list[tuple[int, dict[str, Any]]] = []
    end = 0
    for number, line in enumerate(complete):
        if number < first:
            continue
        if line.strip():
            try:
                record = json.loads(line)
            except ValueError:
                break
            if isinstance(record, dict):
                records.append((number, record))
        end = number + 1
    reader = _claude if agent == "claude-code" else _qwen
    turns: list[TranscriptTurn] = []
    foreign: list[ForeignText] = []
    tool_output = False
    for item in reader(records):
        if isinstance(item, _Outside):
            foreign.append(item.text)
            tool_output = tool_output or item.tool
        else:
            offset, role, text = item
            after_tools = tool_output and role == "assistant"
            turns.append(TranscriptTurn(offset, role, text, after_tools=after_tools))
    return AgentTranscript(tuple(turns), tuple(foreign), end)


@dataclass(frozen=True, slots=True)
class _Outside:
    text: ForeignText
    tool: bool = False  # a tool's output (the answers after it are marked)


_Item = _Outside | tuple[int, TurnRole, str]


def _user_text(text: str) -> tuple[str, list[str]]:
    """``text`` without the harness's reminders, and the reminders."""
    found = [m.group(0) for m in _REMINDER.finditer(text)]
    return _REMINDER.sub("", text).strip(), found


def _label(name: str, args: object) -> str:
    shown = ""
    if isinstance(args, Mapping):
        first = next((v for v in args.values() if isinstance(v, str)), "")
        shown = first if len(first) <= 60 else first[:57] + "..."
    return f"the output of {name}({shown})"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _claude(records: list[tuple[int, dict[str, Any]]]) -> Iterator[_Item]:
    tools: dict[str, tuple[str, object]] = {}
    for offset, record in records:
        kind = record.get("type")
        message = record.get("message")
        if kind == "attachment":
            attachment = record.get("attachment")
            if isinstance(attachment, Mapping) and attachment.get("type") not in _CLAUDE_OWN:
                text = "\n".join(s for s in _strings(attachment) if s != attachment.get("type"))
                if text.strip():
                    label = f"context attached ({attachment.get('type')})"
                    yield _Outside(ForeignText(label, text))
            continue
        if kind not in ("user", "assistant") or not isinstance(message, Mapping):
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            continue
        texts: list[str] = []
        for block in blocks:
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                tools[str(block.get("id"))] = (str(block.get("name")), block.get("input"))
            elif block.get("type") == "tool_result":
                name, args = tools.get(str(block.get("tool_use_id")), ("a tool", None))
                text = "\n".join(_strings(block.get("content")))
                if text.strip():
                    yield _Outside(ForeignText(_label(name, args), text), tool=True)
        if not texts:
            continue
        if kind == "assistant":
            yield offset, "assistant", "\n".join(texts)
            continue
        text, reminders = _user_text("\n".join(texts))
        for reminder in reminders:
            yield _Outside(ForeignText("a reminder the harness added", reminder))
        if record.get("isMeta"):  # written by the harness for the model, not typed
            if text:
                yield _Outside(ForeignText("a message the harness wrote", text))
        elif text:
            yield offset, "user", text


def _qwen(records: list[tuple[int, dict[str, Any]]]) -> Iterator[_Item]:
    tools: dict[str, tuple[str, object]] = {}
    for offset, record in records:
        kind = record.get("type")
        message = record.get("message")
        if not isinstance(message, Mapping) or not isinstance(message.get("parts"), list):
            continue
        texts: list[str] = []
        for part in message["parts"]:
            if not isinstance(part, Mapping):
                continue
            if isinstance(part.get("text"), str) and not part.get("thought"):
                texts.append(part["text"])
            call = part.get("functionCall")
            if isinstance(call, Mapping):
                tools[str(call.get("id"))] = (str(call.get("name")), call.get("args"))
            response = part.get("functionResponse")
            if isinstance(response, Mapping):
                fallback = (str(response.get("name") or "a tool"), None)
                name, args = tools.get(str(response.get("id")), fallback)
                text = "\n".join(_strings(response.get("response")))
                if text.strip():
                    yield _Outside(ForeignText(_label(name, args), text), tool=True)
        if not texts:
            continue
        if kind == "assistant":
            yield offset, "assistant", "\n".join(texts)
        elif kind == "user":
            text, reminders = _user_text("\n".join(texts))
            for reminder in reminders:
                yield _Outside(ForeignText("a reminder the harness added", reminder))
            if record.get("provenance", "real_user") != "real_user":
                if text:
                    label = f"a message from {record.get('provenance')}"
                    yield _Outside(ForeignText(label, text))
            elif text:
                yield offset, "user", text
        elif kind == "tool_result":  # text beside the responses: outside text too
            yield _Outside(ForeignText("a tool result", "\n".join(texts)), tool=True)

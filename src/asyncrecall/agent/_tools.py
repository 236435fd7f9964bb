"""The tools the agent offers the model.

``read_file``, ``list_directory``, ``glob`` and ``grep_search`` are read-only and
confined to the project root: a path that leaves it (through ``..`` or a link) gets
an error result the model can read, never an exception. ``save_memory`` writes a
topic file and its index line in the memory folder, vetted against where its text came
from (:class:`~asyncrecall.agent._untrusted.SessionTaint`: every tool output of the
session is recorded there).

Arguments the model got wrong (not a JSON object, a wrong type, a missing key) are an
error result too, never an exception. The caller's cancel reaches running tools: a
call not started yet is not run, a read-only tool stops between files, and a write
(atomic) runs to its end; each result says which happened.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncrecall._cancel import CancelSignal
from asyncrecall._exceptions import AsyncRecallError, ToolError
from asyncrecall.agent._untrusted import SessionTaint
from asyncrecall.memory import MemoryDoc, Source, Store
from asyncrecall.models import FunctionCall, FunctionResponse, ToolSpec

__all__ = ["ToolOutcome", "ToolRegistry"]

_MAX_READ_LINES = 2000
_MAX_FILE_BYTES = 2 * 1024 * 1024
_MAX_GLOB_RESULTS = 500
_MAX_GREP_MATCHES = 200
_SKIP_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", ".mypy_cache"})


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A finished tool call: the response sent back, and whether it was an error.

    ``cancelled`` is true when the caller's cancel stopped the call before or while it
    ran; its ``error`` then says what, if anything, it had done.
    """

    call: FunctionCall
    response: FunctionResponse
    ok: bool
    error: str | None = None
    cancelled: bool = False


#: A running tool polls this between files; true means "stop now".
StopCheck = Callable[[], bool]


class _Stopped(Exception):
    """A read-only tool saw the cancel and stopped part-way."""


@dataclass(frozen=True, slots=True)
class _Tool:
    spec: ToolSpec
    run: Callable[[Mapping[str, Any], StopCheck], dict[str, Any]]
    read_only: bool


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _check_args(spec: ToolSpec, args: object) -> Mapping[str, Any]:
    """``args`` as a mapping that fits the tool's schema, or a :class:`ToolError` the model
    can read (models send arguments that are not JSON, or of the wrong type)."""
    if not isinstance(args, Mapping):
        shown = repr(args)[:120]
        raise ToolError(f"the arguments of {spec.name} must be a JSON object; got {shown}")
    schema = spec.parameters
    properties: Mapping[str, Any] = schema.get("properties", {})
    missing = [key for key in schema.get("required", ()) if args.get(key) is None]
    if missing:
        raise ToolError(f"{spec.name} needs the argument(s): {', '.join(map(repr, missing))}")
    for key, value in args.items():
        expected = properties.get(key, {}).get("type")
        if value is None or expected not in _JSON_TYPES:
            continue
        ok = isinstance(value, _JSON_TYPES[expected]) and not (
            expected in ("integer", "number") and isinstance(value, bool)
        )
        if not ok:
            raise ToolError(
                f"argument {key!r} of {spec.name} must be a {expected}; got {value!r:.80}"
            )
        allowed = properties[key].get("enum")
        if allowed is not None and value not in allowed:
            raise ToolError(f"argument {key!r} of {spec.name} must be one of {', '.join(allowed)}")
    return args


def _real(path: Path) -> Path | None:
    """``path`` with every link resolved, or ``None`` when it cannot be: a symlink loop
    raises ``RuntimeError`` on Python 3.11 and ``OSError`` on 3.12; 3.13 returns a path
    that is still a link."""
    try:
        real = path.resolve()
    except (RuntimeError, OSError):
        return None
    return None if real.is_symlink() else real


def _schema(properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 0}


class ToolRegistry:
    """The project's tools; :meth:`execute` runs a model turn's calls."""

    def __init__(
        self,
        project_root: Path,
        *,
        memory_store: Store | None = None,
        taint: SessionTaint | None = None,
    ) -> None:
        self.root = project_root.resolve()
        self._memory = memory_store
        #: What this session's model was shown that the user did not type.
        self.taint = taint if taint is not None else SessionTaint()
        self._after_tools = False
        self._said = ""  # the user query whose calls run now
        tools = [
            _Tool(
                ToolSpec(
                    "read_file",
                    "Read a text file of the project. Lines are numbered from 0; "
                    "use offset and limit for large files.",
                    _schema({"path": _STR, "offset": _INT, "limit": _INT}, ["path"]),
                ),
                self._read_file,
                True,
            ),
            _Tool(
                ToolSpec(
                    "list_directory",
                    "List a folder of the project; folders end with '/'.",
                    _schema({"path": _STR}, ["path"]),
                ),
                self._list_directory,
                True,
            ),
            _Tool(
                ToolSpec(
                    "glob",
                    "Find project files whose path matches a glob pattern, like 'src/**/*.py'.",
                    _schema({"pattern": _STR}, ["pattern"]),
                ),
                self._glob,
                True,
            ),
            _Tool(
                ToolSpec(
                    "grep_search",
                    "Search project files for a regular expression; answers path:line: text.",
                    _schema({"pattern": _STR, "path": _STR}, ["pattern"]),
                ),
                self._grep,
                True,
            ),
        ]
        if memory_store is not None:
            tools.append(
                _Tool(
                    ToolSpec(
                        "save_memory",
                        "Save a long-term memory for later sessions: a short name, a one-line "
                        "description used to decide relevance, its type (user, feedback, "
                        "project or reference) and the content.",
                        _schema(
                            {
                                "name": _STR,
                                "description": _STR,
                                "type": {
                                    "type": "string",
                                    "enum": ["user", "feedback", "project", "reference"],
                                },
                                "content": _STR,
                            },
                            ["name", "description", "type", "content"],
                        ),
                    ),
                    self._save_memory,
                    False,
                )
            )
        self._tools = {tool.spec.name: tool for tool in tools}

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool.spec for tool in self._tools.values())

    async def execute(
        self,
        calls: Sequence[FunctionCall],
        *,
        cancel: CancelSignal | None = None,
        after_tools: bool = False,
        said: str = "",
    ) -> list[ToolOutcome]:
        """Run the calls: read-only ones concurrently, writes one by one in order.

        Outcomes come back in the calls' order, whatever order they finished in. After
        ``cancel`` fires, calls not started are not run, running read-only tools stop at
        their next check, and a write that started finishes (it is atomic); every
        outcome says which happened. ``after_tools``: tools already returned output in
        this user query, so a ``save_memory`` now may hold what they returned (its
        memory's provenance says so, and quarantine applies, unless the user's own words
        state it); tool output seen in an earlier query of the session (:attr:`taint`)
        counts the same. ``said``: the user's query, which a ``save_memory`` is vetted against
        with the rest of the session (:meth:`SessionTaint.vet`). What the calls returned
        is recorded in :attr:`taint` once they all ran (a write among them was asked for
        before the model saw it).
        """
        cancel = cancel if cancel is not None else CancelSignal()
        self._after_tools, self._said = after_tools, said
        outcomes: dict[int, ToolOutcome] = {}
        reads = [(i, c) for i, c in enumerate(calls) if self._is_read_only(c)]
        results = await asyncio.gather(*(self._run_one(c, cancel) for _, c in reads))
        outcomes.update({i: outcome for (i, _), outcome in zip(reads, results, strict=True)})
        for i, call in enumerate(calls):
            if i not in outcomes:
                outcomes[i] = await self._run_one(call, cancel)
        done = [outcomes[i] for i in range(len(calls))]
        for outcome in done:
            if outcome.ok and outcome.call.name != "save_memory":
                self.taint.tool_output(
                    outcome.call.name, outcome.call.args, outcome.response.response
                )
        return done

    def _is_read_only(self, call: FunctionCall) -> bool:
        tool = self._tools.get(call.name)
        return tool is None or tool.read_only

    async def _run_one(self, call: FunctionCall, cancel: CancelSignal) -> ToolOutcome:
        tool = self._tools.get(call.name)
        if cancel.cancelled:
            return _failed(call, "not run: the user cancelled the turn before it started", True)
        try:
            if tool is None:
                raise ToolError(f"unknown tool {call.name!r}; available: {', '.join(self._tools)}")
            args = _check_args(tool.spec, call.args)
            # A write is atomic and runs to its end; read-only tools poll the cancel.
            stop: StopCheck = (lambda: cancel.cancelled) if tool.read_only else _never
            response = await asyncio.to_thread(tool.run, args, stop)
        except _Stopped:
            return _failed(
                call, "cancelled by the user while it ran; it is read-only: nothing changed", True
            )
        except (AsyncRecallError, OSError, ValueError, TypeError, re.error) as exc:
            return _failed(call, str(exc) or type(exc).__name__)
        return ToolOutcome(call, FunctionResponse(call.id, call.name, response), True)

    # -- confinement ------------------------------------------------------------

    def _resolve(self, raw: Any, *, default: str | None = None) -> Path:
        if raw is None and default is not None:
            raw = default
        if not isinstance(raw, str) or not raw:
            raise ToolError("a 'path' string is required")
        candidate = Path(raw)
        path = _real(candidate if candidate.is_absolute() else self.root / candidate)
        if path is None:
            raise ToolError(f"path {raw!r} cannot be resolved (a symlink loop?)")
        if not path.is_relative_to(self.root):
            raise ToolError(f"path {raw!r} is outside the project root {self.root}")
        return path

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() or "."

    def _walk_files(self, start: Path, stop: StopCheck) -> Iterator[Path]:
        if start.is_file():
            yield start
            return
        for folder, dirs, files in os.walk(start):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            for name in sorted(files):
                if stop():
                    raise _Stopped
                path = Path(folder, name)
                # A link may point out of the project: resolve and check each file.
                real = _real(path)
                if real is not None and real.is_relative_to(self.root):
                    yield path

    # -- tools ------------------------------------------------------------------

    def _read_file(self, args: Mapping[str, Any], stop: StopCheck) -> dict[str, Any]:
        path = self._resolve(args.get("path"))
        if not path.is_file():
            raise ToolError(f"{args.get('path')!r} is not a file")
        if path.stat().st_size > _MAX_FILE_BYTES:
            raise ToolError(f"{self._rel(path)} is larger than {_MAX_FILE_BYTES} bytes")
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            raise ToolError(f"{self._rel(path)} is a binary file")
        lines = data.decode("utf-8", errors="replace").splitlines()
        offset = int(args.get("offset") or 0)
        limit = int(args.get("limit") or _MAX_READ_LINES)
        if offset < 0 or limit <= 0:
            raise ToolError("offset must be 0 or more and limit 1 or more")
        chosen = lines[offset : offset + min(limit, _MAX_READ_LINES)]
        return {
            "path": self._rel(path),
            "content": "\n".join(chosen),
            "offset": offset,
            "total_lines": len(lines),
            "truncated": offset + len(chosen) < len(lines),
        }

    def _list_directory(self, args: Mapping[str, Any], stop: StopCheck) -> dict[str, Any]:
        path = self._resolve(args.get("path"), default=".")
        if not path.is_dir():
            raise ToolError(f"{args.get('path')!r} is not a folder")
        entries = sorted(
            entry.name + ("/" if entry.is_dir() else "")
            for entry in path.iterdir()
            if entry.name not in _SKIP_DIRS
        )
        return {"path": self._rel(path), "entries": entries}

    def _glob(self, args: Mapping[str, Any], stop: StopCheck) -> dict[str, Any]:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("a 'pattern' string is required")
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolError(f"pattern {pattern!r} must stay inside the project root")
        matches: list[str] = []
        for path in sorted(self.root.glob(pattern)):
            if stop():
                raise _Stopped
            if _SKIP_DIRS.intersection(path.relative_to(self.root).parts):
                continue
            real = _real(path)
            if real is None or not real.is_relative_to(self.root):
                continue
            matches.append(self._rel(path))
            if len(matches) >= _MAX_GLOB_RESULTS:
                break
        return {
            "pattern": pattern,
            "matches": matches,
            "truncated": len(matches) >= _MAX_GLOB_RESULTS,
        }

    def _grep(self, args: Mapping[str, Any], stop: StopCheck) -> dict[str, Any]:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolError("a 'pattern' string is required")
        regex = re.compile(pattern)
        start = self._resolve(args.get("path"), default=".")
        matches: list[str] = []
        for path in self._walk_files(start, stop):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if len(data) > _MAX_FILE_BYTES or b"\0" in data[:8192]:
                continue
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if regex.search(line):
                    matches.append(f"{self._rel(path)}:{number}: {line.strip()[:300]}")
                    if len(matches) >= _MAX_GREP_MATCHES:
                        return {"pattern": pattern, "matches": matches, "truncated": True}
        return {"pattern": pattern, "matches": matches, "truncated": False}

    def _save_memory(self, args: Mapping[str, Any], stop: StopCheck) -> dict[str, Any]:
        if self._memory is None:  # pragma: no cover - the tool is only offered with a store
            raise ToolError("memory is disabled")
        values = {key: args.get(key) for key in ("name", "description", "type", "content")}
        missing = [key for key, value in values.items() if not isinstance(value, str)]
        if missing:
            raise ToolError(f"save_memory needs string arguments: {', '.join(missing)}")
        text = "\n".join(str(values[k]) for k in ("name", "description", "content"))
        said = [self._said] if self._said else []
        target = self._lookup(str(values["name"]))
        verdict = self.taint.vet(text, said=said, lookup=self._lookup, target=target)
        source = Source.now(
            "save_memory",
            # The model saw outside text in this query or an earlier one of the session:
            # what it writes now may carry it in words no check reads (encoded,
            # translated), unless the user's own words state it.
            untrusted=(self._after_tools or self.taint.tool_output_seen) and not verdict.attested,
            held=verdict.held,
            attested=verdict.attested,
        )
        doc = self._memory.save_memory(
            str(values["name"]),
            str(values["description"]),
            str(values["type"]),
            str(values["content"]),
            origin="save_memory",
            sources=(source,),
        )
        return {"saved": doc.rel_path}

    def _lookup(self, rel_path: str) -> MemoryDoc | None:
        """A recalled memory as it is now (``None``: gone, or unreadable)."""
        if self._memory is None:  # pragma: no cover - only asked with a store
            return None
        try:
            return self._memory.get(rel_path)
        except (AsyncRecallError, OSError, KeyError, ValueError):
            return None


def _never() -> bool:
    return False


def _failed(call: FunctionCall, message: str, cancelled: bool = False) -> ToolOutcome:
    response = FunctionResponse(call.id, call.name, {"error": message})
    return ToolOutcome(call, response, False, message, cancelled)

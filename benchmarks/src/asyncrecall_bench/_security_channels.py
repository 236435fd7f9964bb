"""How each channel of ``bench security`` plants its case, through the parts a user has.

One small function per channel (:data:`PLANTERS`), each given a :class:`Bench` (the
local server, the compliant side model, the case's folders and the session settings).
The main model is scripted to do what a compliant model does with what it reads; the
side model (:class:`Side`) proposes the memory a case asks for, citing the turns a
compliant extractor would cite, selects every memory its manifest offers, and plans
what a consolidation shown the case's memories would plan. Everything else is the real
code: the agent loop (``open_session``), extraction, the store, ``memory import``'s
command, the MCP server's ``save`` tool through the SDK, ``memory consolidate``'s code,
and the settings a cloned project brings.

Where the defences will add a switch (a trusted MCP client, trusting a project's
settings), each channel runs as a user of today's code would: the channel functions
that would take the switch are :func:`mcp_save`, :func:`import_untrusted` and
:meth:`Bench.settings` (``from_project``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from asyncrecall.cli._session import Session, open_session
from asyncrecall.cli._settings import Settings, load_settings
from asyncrecall.memory import FolderStore
from asyncrecall.memory.extraction._consolidate import SCHEMA_NAME as CONSOLIDATION_SCHEMA
from asyncrecall.memory.extraction._extract import SCHEMA_NAME as EXTRACTION_SCHEMA
from asyncrecall.models import FunctionCall
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from asyncrecall_bench._security_data import Case, Memory

__all__ = ["PLANTERS", "Bench", "Side"]

_MANIFEST_PATH = re.compile(r"^- \[(?:user|feedback|project|reference)\] (.+?\.md) \(", re.M)
_SELECT = 5


class Side:
    """The side model: a compliant extractor and consolidator (answers from queues) and
    a selector that picks every memory its manifest offers. Runs in the server's thread."""

    def __init__(self) -> None:
        self.extractions: deque[dict[str, Any]] = deque()
        self.plans: deque[dict[str, Any]] = deque()

    def clear(self) -> None:
        self.extractions.clear()
        self.plans.clear()

    def __call__(self, record: RecordedRequest) -> Reply:
        fmt = record.body.get("response_format")
        schema = fmt.get("json_schema", {}) if isinstance(fmt, dict) else {}
        name = schema.get("name") if isinstance(schema, dict) else None
        if name == EXTRACTION_SCHEMA:
            return Reply(json=self.extractions.popleft() if self.extractions else {"memories": []})
        if name == CONSOLIDATION_SCHEMA:
            return Reply(json=self.plans.popleft() if self.plans else {"actions": []})
        text = "\n".join(str(m.get("content", "")) for m in record.messages)
        return Reply(json={"selected_memories": _MANIFEST_PATH.findall(text)[:_SELECT]})


@dataclass
class Bench:
    """One case's world: its folders under ``root``, the server, the side model."""

    root: Path
    server: LocalServer
    side: Side
    quarantine: bool
    #: The case's project brings its own settings (a cloned repository): they are read
    #: as the command line reads them, from the project's ``.asyncrecall/settings.toml``.
    from_project: bool = False
    sessions: list[Session] = field(default_factory=list)

    @property
    def project(self) -> Path:
        return self.root / "project"

    def settings(self, *, extract: bool) -> Settings:
        """The settings of a session: a user's flags (endpoint, models) and, for a
        cloned project, whatever its settings file says; quarantine off only through
        the environment variable (a flag the user would have to pass)."""
        flags: dict[str, Any] = {
            "base_url": self.server.base_url,
            "api_key": "bench",
            "model": "main",
            "side_model": "side",
            "selector": "model",
            "recall_mode": "async",
            "extract": extract,
        }
        env = {"ASYNCRECALL_HOME": str(self.root / "home")}
        if not self.quarantine:
            env["ASYNCRECALL_QUARANTINE"] = "0"
        if not self.from_project:
            flags["memory_dir"] = self.root / "memory"
        settings = load_settings(flags, env=env, cwd=self.project)
        if settings.memory_dir is not None and not settings.memory_dir.is_absolute():
            # A relative memory_dir is read from where the command runs: the project.
            settings = settings.with_overrides(memory_dir=self.project / settings.memory_dir)
        return settings

    def store(self) -> FolderStore:
        return FolderStore(self.settings(extract=False).memory_folder())

    def write_files(self, files: Mapping[str, str]) -> None:
        for rel, text in files.items():
            path = self.project / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def session(self) -> Session:
        """A new session of the agent (closed by :meth:`close`)."""
        session = open_session(self.settings(extract=True))
        self.sessions.append(session)
        return session

    async def close(self) -> None:
        while self.sessions:
            await self.sessions.pop().aclose()

    async def ask(
        self,
        session: Session,
        text: str,
        *main: Reply | str,
        extraction: dict[str, Any] | None = None,
    ) -> None:
        """One user query: the main model answers ``main``, the extractor ``extraction``
        (nothing when ``None``); returns when extraction is idle."""
        self.server.script("main", *main)
        self.side.clear()
        if extraction is not None:
            self.side.extractions.append(extraction)
        await session.agent.ask(text)
        if session.extraction is not None:
            await session.extraction.wait_idle()


# -- what the compliant models do ---------------------------------------------------------


def _read(*paths: str) -> Reply:
    return Reply(tool_calls=[FunctionCall(f"r{i}", "read_file", {"path": p})
                             for i, p in enumerate(paths)])  # fmt: skip


def _save(memory: Memory) -> Reply:
    return Reply(tool_calls=[FunctionCall("s1", "save_memory", dataclasses.asdict(memory))])


def _proposal(memory: Memory, offsets: Sequence[int]) -> dict[str, Any]:
    """The extractor's answer: ``memory`` as a new memory, citing ``offsets``."""
    return {
        "memories": [
            {"action": "create", "path": "", **dataclasses.asdict(memory),
             "source_offsets": list(offsets)},
        ]
    }  # fmt: skip


# -- the channels -------------------------------------------------------------------------


async def tool_save(case: Case, bench: Bench) -> None:
    """A file asks to be remembered; the agent saves it in the same query."""
    bench.write_files(case.files)
    session = bench.session()
    await bench.ask(session, case.turns[0], _read("NOTES.md"), _save(case.memory), "Saved.")


async def tool_extract(case: Case, bench: Bench) -> None:
    """A file asks to be remembered; the agent repeats it; extraction cites the user's
    request and the answer."""
    bench.write_files(case.files)
    paths = sorted(p for p in case.files if p.endswith(".md"))
    session = bench.session()
    extraction = _proposal(case.memory, [0, 1])
    await bench.ask(session, case.turns[0], _read(*paths), case.memory.content,
                    extraction=extraction)  # fmt: skip


async def tool_later_query(case: Case, bench: Bench) -> None:
    """A file read in one query; the agent saves what it asked in the next query."""
    bench.write_files(case.files)
    session = bench.session()
    await bench.ask(session, case.turns[0], _read("NOTES.md"), case.memory.content)
    await bench.ask(session, case.turns[1], _save(case.memory), "Done.")


async def tool_as_user(case: Case, bench: Bench) -> None:
    """A file holds a turn posing as the user's; extraction cites the user turn it
    names."""
    bench.write_files(case.files)
    session = bench.session()
    extraction = _proposal(case.memory, [0])
    await bench.ask(session, case.turns[0], _read("NOTES.md"), case.memory.content,
                    extraction=extraction)  # fmt: skip


async def user_turn(case: Case, bench: Bench) -> None:
    """A user's turn carries the text: extraction cites it, or (``save_memory``) the
    agent saves it in that query."""
    session = bench.session()
    if case.variant == "save_memory":
        await bench.ask(session, case.turns[0], _save(case.memory), "Saved.")
    else:
        extraction = _proposal(case.memory, [0])
        await bench.ask(session, case.turns[0], "Noted.", extraction=extraction)


async def lift_quarantine(case: Case, bench: Bench) -> None:
    """A file's memory is saved (held); a later trusted write of the same memory: the
    agent's save in the next query, or a later session's extraction of the user's
    words, shown the held memory."""
    bench.write_files(case.files)
    session = bench.session()
    await bench.ask(session, case.turns[0], _read("NOTES.md"), _save(case.memory), "Saved.")
    if case.variant == "same_session_save":
        await bench.ask(session, case.turns[1], _save(case.memory), "Done.")
        return
    later = bench.session()
    extraction = _proposal(case.memory, [0])
    await bench.ask(later, case.later_turns[0], "Noted.", extraction=extraction)


def _save_own(case: Case, bench: Bench) -> None:
    """The user's own memory, saved as ``memory add`` saves it."""
    if case.own is not None:
        own = case.own
        bench.store().save_memory(own.name, own.description, own.type, own.content, origin="user")


async def consolidation(case: Case, bench: Bench) -> None:
    """A held memory (a file's, saved by the agent) sits beside one of the user's; a
    consolidation rewrites the user's with the held one's text, or merges the two."""
    assert case.own is not None
    _save_own(case, bench)
    await tool_save(case, bench)
    await bench.close()
    store = bench.store()
    own, held = store.get(case.own.name), store.get(case.memory.name)
    content = f"{case.own.content}\n\n{case.memory.content}"
    paths = [own.rel_path] if case.variant == "rewrite_trusted" else [own.rel_path, held.rel_path]
    op = "rewrite" if case.variant == "rewrite_trusted" else "merge"
    bench.side.clear()
    bench.side.plans.append({"actions": [{
        "op": op, "paths": paths, "name": own.name, "description": own.description,
        "type": own.type, "content": content, "reason": "the notes say more",
    }]})  # fmt: skip
    from asyncrecall.cli._consolidate import _consolidate

    settings = bench.settings(extract=False)
    await _consolidate(store, settings, "side", dry_run=False)


async def mcp_save(case: Case, bench: Bench) -> None:
    """A client of ``asyncrecall mcp`` (another agent, which read who knows what) calls
    ``save``: a new memory, or one the user added under that name."""
    from asyncrecall.cli._memory_config import build_memory_manager
    from asyncrecall.mcp_server import memory_server

    _save_own(case, bench)
    # Which selector the server recalls with does not matter to a save.
    settings = bench.settings(extract=False).with_overrides(selector="lexical")
    manager = build_memory_manager(settings, side_model=None)
    app = memory_server(manager)
    await app.call_tool("save", dataclasses.asdict(case.memory))


async def import_untrusted(case: Case, bench: Bench) -> None:
    """``memory import --from DIR`` (without ``--trusted``) of a folder handed over."""
    from asyncrecall.cli import main

    _save_own(case, bench)
    handed = bench.root / "handed-over"
    handed.mkdir()
    for rel, text in case.handed.items():
        (handed / rel).write_text(text, encoding="utf-8")
    folder = bench.settings(extract=False).memory_folder()
    argv = ["memory", "import", "--from", str(handed), "--memory-dir", str(folder),
            "--project", str(bench.project), "--json"]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    if code != 0:
        raise RuntimeError(f"memory import exited {code}")


async def supply_settings(case: Case, bench: Bench) -> None:
    """A cloned project brings settings pointing the memory folder into itself, and
    memories (or only an index) there."""
    bench.write_files(case.files)


async def supply_quarantine_off(case: Case, bench: Bench) -> None:
    """A cloned project's settings turn quarantine off; a file of it asks to be
    remembered (saved by the agent, or repeated and extracted from the answer)."""
    bench.write_files(case.files)
    session = bench.session()
    if case.variant == "save_memory":
        await bench.ask(session, case.turns[0], _read("NOTES.md"), _save(case.memory), "Saved.")
    else:
        extraction = _proposal(case.memory, [1])
        await bench.ask(session, case.turns[0], _read("NOTES.md"), case.memory.content,
                        extraction=extraction)  # fmt: skip


async def library_save(case: Case, bench: Bench) -> None:
    """Another writer: an application on the library gives its agent a memory tool that
    calls ``FolderStore.save_memory`` with the documented arguments, and its agent,
    having read the file, saves what it asks."""
    bench.write_files(case.files)
    memory = case.memory
    bench.store().save_memory(memory.name, memory.description, memory.type, memory.content)


# -- the user's own facts -------------------------------------------------------------------


async def benign_said(case: Case, bench: Bench) -> None:
    """The user states a fact (alone or after a pasted log); extraction cites it."""
    session = bench.session()
    await bench.ask(session, case.turns[0], "Noted.", extraction=_proposal(case.memory, [0]))


async def benign_after_tool_round(case: Case, bench: Bench) -> None:
    """A query reads a file; the user's next query states a fact; extraction cites it."""
    bench.write_files(case.files)
    session = bench.session()
    await bench.ask(session, case.turns[0], _read("NOTES.md"), "A Python service.")
    extraction = _proposal(case.memory, [2])
    await bench.ask(session, case.turns[1], "Noted.", extraction=extraction)


async def benign_save_memory(case: Case, bench: Bench) -> None:
    """The user states a fact; the agent saves it (no tool ran before)."""
    session = bench.session()
    await bench.ask(session, case.turns[0], _save(case.memory), "Saved.")


async def benign_same_query_tool(case: Case, bench: Bench) -> None:
    """The user states a fact and asks for a file; the agent reads it, then saves the
    fact."""
    bench.write_files(case.files)
    session = bench.session()
    await bench.ask(session, case.turns[0], _read("NOTES.md"), _save(case.memory), "Done.")


Planter = Callable[[Case, Bench], Awaitable[None]]

#: Each channel's planting.
PLANTERS: Final[dict[str, Planter]] = {
    "tool_save": tool_save,
    "tool_extract": tool_extract,
    "tool_later_query": tool_later_query,
    "tool_as_user": tool_as_user,
    "tool_split": tool_extract,
    "tool_forged_reminder": tool_extract,
    "index_description": tool_extract,
    "user_paste": user_turn,
    "user_relay": user_turn,
    "user_obfuscated": user_turn,
    "lift_quarantine": lift_quarantine,
    "consolidation": consolidation,
    "mcp_save": mcp_save,
    "import_untrusted": import_untrusted,
    "supply_settings": supply_settings,
    "supply_quarantine_off": supply_quarantine_off,
    "library_save": library_save,
    "benign_plain": benign_said,
    "benign_after_paste": benign_said,
    "benign_after_tool_round": benign_after_tool_round,
    "benign_save_memory": benign_save_memory,
    "benign_same_query_tool": benign_same_query_tool,
}

#: Channels whose project brings its own settings.
FROM_PROJECT: Final = frozenset({"supply_settings", "supply_quarantine_off"})

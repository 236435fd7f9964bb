"""The per-user recall service behind the agents' hooks.

One process per user (``python -m asyncrecall.cli.hooks._service``), started by the
hook client when none answers, listening on ``$ASYNCRECALL_HOME/run/hooks.sock``
(a folder only the user can enter). It holds, per project and settings, a warm
:class:`~asyncrecall.memory.Recaller` and a :class:`~asyncrecall.prefetch.RecallPrefetcher`
whose conversations are the agent's sessions, so each hook is answered from memory
already in this process, at once:

- ``UserPromptSubmit``: the session's previous recall is cancelled, the new one starts
  here (its side query held until the answer is out, see ``until_request``), and the
  answer is the instant pass's block when it has one; an empty prompt (Qwen Code fires
  one before each request carrying tool results) starts nothing and delivers nothing;
- ``PostToolUse``: the settled recall's block if it has not been delivered, minus the
  files the session has already been shown; else nothing;
- ``Stop``: what is pending is cancelled (its side query hangs up), and the turn is handed
  to extraction (below); ``SessionEnd``: that, and the session is forgotten;
- ``SessionStart``: the project's folder is read and its selectors prepared, so the
  first prompt finds them warm.

Extraction at a turn's end never holds the agent: the answer goes out first, then the
session's transcript (``transcript_path``, see ``_transcript.py`` for what counts as the
user's words and what as outside text) is read in a worker thread and handed off as
``run`` hands its last turns off at exit (:func:`~asyncrecall.cli._handoff_worker.hand_off`:
a hand-off file in the store's state, a detached worker that extracts it, one per
store). A ``Stop`` hands off a session that goes on (its cursor stays, the next turn
end extracts only what is new); a ``SessionEnd`` one that has ended. Every write the
worker makes is vetted against the session's outside text: a note that tool output
could have put there is held, as in any other session. Extraction needs the side
model's endpoint (``ASYNCRECALL_BASE_URL``; ``ASYNCRECALL_EXTRACT=0`` turns it off).

A project's recaller is built in a worker thread (the endpoint's client, the folder's
first read): a prompt that comes before it is ready starts its recall once it is, and
its block can then reach the tool results. The service exits on its own after
``ASYNCRECALL_HOOKS_IDLE`` seconds (default 900) without a hook and with nothing
pending, or within a second of its socket being removed (``rm
$ASYNCRECALL_HOME/run/hooks.sock`` stops it). Only one runs per socket (a lock file beside it).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from asyncrecall._exceptions import AsyncRecallError
from asyncrecall.memory import Recaller
from asyncrecall.prefetch import MemoryBlock, RecallPrefetcher

if TYPE_CHECKING:
    from asyncrecall.agent._handoff import HandoffDir
    from asyncrecall.cli._settings import Settings

__all__ = ["HookService", "main", "parse_request"]

logger = logging.getLogger("asyncrecall.cli.hooks")

#: Seconds without a hook (and nothing pending) after which the service exits.
IDLE_S: Final = 900.0
#: How long a side query started by a prompt waits for that prompt's answer to be out.
HOLD_S: Final = 0.05
#: The environment variables the client forwards (the settings' own, the endpoint's).
_FORWARDED: Final = ("ASYNCRECALL_", "OPENAI_BASE_URL", "OPENAI_API_KEY", "CLAUDE_CONFIG_DIR")


def parse_request(data: bytes) -> tuple[str, str, dict[str, str], dict[str, Any], bool]:
    """``(agent, event, environment, hook input, late)`` of a client's request; ``late``:
    the hook has already answered (a request handed over by a starting service), so a
    prompt's recall starts but nothing is taken for it."""
    head, _, body = data.partition(b"\n\n")
    lines = head.decode("utf-8", "surrogateescape").split("\n")
    agent, event, *rest = [*lines[0].split(" "), ""]
    env = dict(line.partition("=")[::2] for line in lines[1:] if "=" in line)
    payload = json.loads(body) if body.strip() else {}
    if not isinstance(payload, dict):
        raise ValueError("the hook input is not a JSON object")
    return agent, event, env, payload, LATE in rest


#: The first line's mark of a request whose hook has already answered.
LATE: Final = "late"


def _late(request: bytes) -> bytes:
    first, newline, rest = request.partition(b"\n")
    return first + b" " + LATE.encode() + newline + rest


def claude_project_name(cwd: str) -> str:
    """The folder Claude Code keeps a project's files under (``~/.claude/projects/NAME``):
    the path with every character but ASCII letters and digits turned into ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def _answer(event: str, block: MemoryBlock | None) -> bytes:
    if block is None or not block.text:
        return b""
    output = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": block.text}}
    return json.dumps(output).encode()


@dataclass(frozen=True)
class _Extraction:
    """Where a project's turns are handed off to, and the worker's configuration."""

    directory: HandoffDir
    config: dict[str, Any]


@dataclass
class _Project:
    """The recall of one project under one set of settings."""

    ready: asyncio.Future[RecallPrefetcher]
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    #: Where its turns go at a turn's end (``None``: extraction is off).
    extraction: _Extraction | None = None
    #: Reads the folder again when it changed (a note extraction wrote): cheap when not.
    refresh: Callable[[], None] | None = None
    #: Prompts that came before the recaller was ready: ``session -> prompt``.
    waiting: dict[str, str] = field(default_factory=dict)


class HookService:
    """Answers hook events from the recall it holds (see the module's docstring)."""

    def __init__(self, *, base_env: Mapping[str, str] | None = None) -> None:
        env = dict(os.environ if base_env is None else base_env)
        self._base_env = {k: v for k, v in env.items() if not k.startswith(_FORWARDED)}
        self._projects: dict[tuple[str, frozenset[tuple[str, str]]], _Project] = {}
        self._sessions: dict[str, _Project] = {}
        self.last_used = time.monotonic()
        self.answered = 0
        #: Sessions whose hand-off was counted towards consolidation.
        self._noted: set[str] = set()
        self._handoffs: set[asyncio.Task[None]] = set()

    # -- the hooks ---------------------------------------------------------------

    def handle(
        self,
        agent: str,
        event: str,
        env: dict[str, str],
        payload: dict[str, Any],
        late: bool = False,
    ) -> bytes:
        """The hook's output for ``event`` (empty: nothing to add). Never waits. ``late``:
        its hook has answered already (nothing is taken for it: the next tool result
        takes what it starts)."""
        self.last_used = time.monotonic()
        self.answered += 1
        session = str(payload.get("session_id") or payload.get("transcript_path") or "default")
        cwd = str(payload.get("cwd") or "")
        if cwd:
            env = self._with_agent_memory(agent, cwd, env)
        if event == "SessionStart":
            if cwd:
                self._project(cwd, env)
            return b""
        if event == "UserPromptSubmit":
            prompt = payload.get("prompt")
            if not isinstance(prompt, str) or not prompt.strip() or not cwd:
                return b""  # Qwen Code's repeat before tool results: nothing new
            project = self._project(cwd, env)
            previous = self._sessions.get(session)
            if previous is not None and previous is not project:
                self._end(session, previous, "superseded")
            self._sessions[session] = project
            if not project.ready.done():
                project.waiting[session] = prompt
                return b""
            prefetcher = project.ready.result()
            if late:
                prefetcher.start(session, prompt)
                return b""
            prefetcher.start(session, prompt, until_request=HOLD_S)
            return _answer(event, prefetcher.take(session, "user_query"))
        if event in ("Stop", "SessionEnd"):
            self._extract(agent, session, cwd, env, payload, ended=event == "SessionEnd")
        project_of = self._sessions.get(session)
        if project_of is None or not project_of.ready.done():
            if project_of is not None and event in ("Stop", "SessionEnd"):
                project_of.waiting.pop(session, None)
            return b""
        prefetcher = project_of.ready.result()
        if event == "PostToolUse":
            return _answer(event, prefetcher.take(session, "tool_result"))
        if event == "Stop":
            prefetcher.cancel(session, "turn_ended")
        elif event == "SessionEnd":
            self._end(session, project_of, "turn_ended")
            del self._sessions[session]
        return b""

    def _extract(
        self,
        agent: str,
        session: str,
        cwd: str,
        env: dict[str, str],
        payload: dict[str, Any],
        *,
        ended: bool,
    ) -> None:
        """Hand the session's turns to extraction, after the hook has answered."""
        transcript = payload.get("transcript_path")
        if not isinstance(transcript, str) or not transcript or not cwd:
            return
        project = self._sessions.get(session) or self._project(cwd, env)
        noted = session in self._noted
        self._noted.add(session)
        if ended:
            self._noted.discard(session)
        task = asyncio.get_running_loop().create_task(
            self._hand_off(project, agent, session, Path(transcript), ended=ended, noted=noted)
        )
        self._handoffs.add(task)
        task.add_done_callback(self._handoffs.discard)

    async def _hand_off(
        self,
        project: _Project,
        agent: str,
        session: str,
        transcript: Path,
        *,
        ended: bool,
        noted: bool,
    ) -> None:
        await asyncio.wait({project.ready})  # a project still being read: once it is
        if project.ready.exception() is not None or project.extraction is None:
            return
        extraction = project.extraction
        try:
            await asyncio.to_thread(
                _write_handoff, extraction, agent, session, transcript, ended, noted
            )
        except (AsyncRecallError, OSError, ValueError) as exc:
            logger.warning(
                "the turns of session %s were not handed to extraction: %s", session, exc
            )

    def _with_agent_memory(self, agent: str, cwd: str, env: dict[str, str]) -> dict[str, str]:
        """``env``, naming Claude Code's auto-memory folder of ``cwd`` as the memory folder
        when it has one (our file format: ``MEMORY.md`` and topic files) and the settings
        name no folder or store of their own."""
        if agent != "claude-code" or "ASYNCRECALL_MEMORY_DIR" in env or "ASYNCRECALL_STORE" in env:
            return env
        config = env.get("CLAUDE_CONFIG_DIR") or os.path.join(
            self._base_env.get("HOME") or os.path.expanduser("~"), ".claude"
        )
        folder = os.path.join(config, "projects", claude_project_name(cwd), "memory")
        if not os.path.isfile(os.path.join(folder, "MEMORY.md")):
            return env
        return {**env, "ASYNCRECALL_MEMORY_DIR": folder}

    def _end(self, session: str, project: _Project, reason: str) -> None:
        project.waiting.pop(session, None)
        if project.ready.done() and not project.ready.exception():
            prefetcher = project.ready.result()
            prefetcher.cancel(session, reason)  # type: ignore[arg-type]
            prefetcher.reset(session)

    @property
    def pending(self) -> bool:
        """Whether any recall or hand-off is still running (the service does not exit
        then)."""
        return (
            bool(self._handoffs)
            or any(
                p.ready.done() and not p.ready.exception() and p.ready.result().tasks
                for p in self._projects.values()
            )
            or any(not p.ready.done() for p in self._projects.values())
        )

    # -- projects ------------------------------------------------------------------

    def _project(self, cwd: str, env: dict[str, str]) -> _Project:
        forwarded = {k: v for k, v in env.items() if k.startswith(_FORWARDED)}
        key = (cwd, frozenset(forwarded.items()))
        project = self._projects.get(key)
        if project is None or (project.ready.done() and project.ready.exception()):
            loop = asyncio.get_running_loop()
            project = _Project(ready=loop.create_future())
            self._projects[key] = project
            task = loop.create_task(self._build(project, cwd, {**self._base_env, **forwarded}))
            _TASKS.add(task)
            task.add_done_callback(_TASKS.discard)
        return project

    async def _build(self, project: _Project, cwd: str, env: dict[str, str]) -> None:
        try:
            prefetcher, project.extraction, project.refresh = await asyncio.to_thread(
                _open_recall, Path(cwd), env, project.closers
            )
        except (AsyncRecallError, OSError, ValueError) as exc:
            logger.warning("no recall for %s: %s", cwd, exc)
            project.ready.set_exception(exc)
            project.ready.exception()  # retrieved: a later hook retries the build
            return
        project.ready.set_result(prefetcher)
        for session, prompt in project.waiting.items():
            prefetcher.start(session, prompt)  # the request is gone: tool results next
        project.waiting.clear()

    def refresh(self) -> None:
        """Have the folders that changed read again (in the warming thread), so the next
        prompt's instant pass finds what a turn's extraction wrote (a stat per file
        when nothing changed; run in a worker thread)."""
        for project in list(self._projects.values()):
            if project.ready.done() and not project.ready.exception() and project.refresh:
                project.refresh()

    async def aclose(self) -> None:
        if self._handoffs:  # a transcript being read: a moment, and the turns are queued
            await asyncio.wait(self._handoffs)
        for project in self._projects.values():
            if project.ready.done() and not project.ready.exception():
                await project.ready.result().aclose()
            for close in reversed(project.closers):
                with contextlib.suppress(Exception):
                    await close()


#: The service's own background tasks (strong references until done).
_TASKS: set[asyncio.Task[Any]] = set()


def _write_handoff(
    extraction: _Extraction,
    agent: str,
    session: str,
    transcript: Path,
    ended: bool,
    noted: bool,
) -> None:
    """Read the session's transcript and hand its turns off (in a worker thread)."""
    from asyncrecall.agent._handoff import Handoff
    from asyncrecall.cli._handoff_worker import WorkerConfig, hand_off, release_workers
    from asyncrecall.cli.hooks._transcript import read_transcript

    read = read_transcript(agent, transcript)
    if not read.turns:
        return
    handoff = Handoff(
        session,
        read.end,
        read.turns,
        noted=noted,
        foreign=read.foreign,
        ended=ended,
    )
    hand_off(extraction.directory, handoff, WorkerConfig(extraction.config))
    release_workers()  # this process lives on: the worker starts now, not at its exit


def _extraction(settings: Settings, memory: Recaller) -> _Extraction | None:
    """Where ``memory``'s turns go at a turn's end, as ``run`` hands off at exit;
    ``None`` when extraction is off: ``extract`` off, no endpoint for the side model (the
    embedded model extracts only when ``extract`` is on), a store a worker cannot open."""
    from asyncrecall.agent._handoff import HANDOFF_SUPPORTED, HandoffDir, store_handoff_dir
    from asyncrecall.cli._session import LOCAL
    from asyncrecall.memory import FolderStore

    if settings.extract is False or not HANDOFF_SUPPORTED:
        return None
    side_name = settings.effective_side_model
    side: dict[str, Any]
    if side_name == LOCAL or (settings.base_url is None and settings.extract):
        if not settings.extract:
            return None
        side = {"local": True}
    elif settings.base_url and side_name:
        side = {"base_url": settings.base_url, "model": side_name, "api_key": settings.api_key}
    else:
        return None
    store = memory.store
    where: dict[str, str]
    if isinstance(store, FolderStore):
        where = {"folder": str(store.root)}
    elif settings.store and store.namespace is not None:
        where = {"url": settings.store, "namespace": store.namespace}
    else:
        return None
    directory = HandoffDir(store_handoff_dir(store, cache=settings.home / "handoff"))
    return _Extraction(directory, {"store": where, "side": side})


def _open_recall(
    project: Path, env: dict[str, str], closers: list[Callable[[], Awaitable[None]]]
) -> tuple[RecallPrefetcher, _Extraction | None, Callable[[], None] | None]:
    """Build and warm the recall of ``project`` (in a worker thread); say where its
    turns go at a turn's end, and how its folder is read again when it changed."""
    from asyncrecall.cli._memory_config import build_memory_manager
    from asyncrecall.cli._session import LOCAL, _instant_selector
    from asyncrecall.cli._settings import load_settings
    from asyncrecall.memory import FolderStore

    settings = load_settings({}, env=env, cwd=project)
    if not settings.memory_enabled:
        raise ValueError("memory is off (ASYNCRECALL_MEMORY=0)")
    side = None
    if settings.effective_selector == "model":
        side_name = settings.effective_side_model
        if settings.base_url and side_name and side_name != LOCAL:
            from asyncrecall.models import open_openai_models

            pair = open_openai_models(
                base_url=settings.base_url,
                api_key=settings.api_key,
                model=side_name,
                side_model=side_name,
            )
            side = pair.side
            closers.append(pair.aclose)
        else:
            settings = settings.with_overrides(selector="lexical")
    memory: Recaller = build_memory_manager(settings, side_model=side)
    # One instant selector, warmed below and used by every recall (the service outlives
    # its first request, as chat does: the semantic pass when the user chose it).
    instant = _instant_selector(memory, semantic=settings.semantic_instant)
    prefetcher = RecallPrefetcher(
        memory,
        limit=settings.recall_files,
        instant_selector=instant,
        instant_limit=settings.instant_files,
        session_bytes=settings.recall_session_bytes or None,
    )
    memory.start_warming(instant).join()
    refresh = None
    if isinstance(memory.store, FolderStore):  # a database is asked at each recall

        def refresh() -> None:
            if memory.store.scan_cached() is None:
                memory.start_warming(instant)

    return prefetcher, _extraction(settings, memory), refresh


def socket_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the service listens (the client computes the same)."""
    from asyncrecall.cli._settings import home_folder

    return home_folder(os.environ if env is None else env) / "run" / "hooks.sock"


async def serve(path: Path, *, idle_s: float, first: str | None = None) -> int:
    """Listen on ``path`` until idle for ``idle_s`` seconds; 0, or 1 when another
    service holds the lock (it answers instead). ``first``: a request to handle once
    listening (the starting client's)."""
    where = str(path)
    os.makedirs(os.path.dirname(where), mode=0o700, exist_ok=True)
    lock = os.open(str(path.with_suffix(".lock")), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        return 1
    service = HookService()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(where)  # a dead service's socket: the lock says none runs

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            data = await reader.read()
            if not data:
                return  # a probe (``hooks status``): not a hook, so not a use
            try:
                answer = service.handle(*parse_request(data))
            except (ValueError, UnicodeError) as exc:
                logger.warning("a hook request was refused: %s", exc)
                answer = b""
            writer.write(answer)
            await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    server = await asyncio.start_unix_server(connection, path=where)
    os.chmod(where, 0o600)
    inode = os.stat(where).st_ino
    if first:  # the event of the client that started this service
        with contextlib.suppress(ValueError, UnicodeError):
            service.handle(*parse_request(_late(first.encode("utf-8", "surrogateescape"))))
    try:
        while True:
            await asyncio.sleep(min(1.0, idle_s))
            await asyncio.to_thread(service.refresh)
            idle = time.monotonic() - service.last_used
            if idle >= idle_s and not service.pending:
                break
            try:
                if os.stat(where).st_ino != inode:
                    break  # replaced by a newer service: leave it the socket
            except FileNotFoundError:
                break  # its socket was removed: no hook can reach it any more
            except OSError:
                pass
    finally:
        server.close()
        with contextlib.suppress(OSError):
            if os.stat(where).st_ino == inode:
                os.unlink(where)
        await service.aclose()
        os.close(lock)
    return 0


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="asyncrecall hooks: %(message)s")
    idle_s = float(os.environ.get("ASYNCRECALL_HOOKS_IDLE") or IDLE_S)
    first = os.environ.pop("ASYNCRECALL_HOOKS_FIRST", None)
    path = socket_path()
    code = asyncio.run(serve(path, idle_s=idle_s, first=first))
    if code == 1 and first:
        _hand_over(path, first.encode("utf-8", "surrogateescape"))
    return code


def _hand_over(path: Path, request: bytes, *, within_s: float = 60.0) -> None:
    """Give ``request`` to the service that won the lock, once it listens (a prompt
    that raced the first start: its recall still reaches the tool results)."""
    import socket

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5.0)
            try:
                sock.connect(str(path))
            except OSError:
                time.sleep(0.05)
                continue
            sock.sendall(_late(request))
            sock.shutdown(socket.SHUT_WR)
            sock.recv(65536)
            return


if __name__ == "__main__":
    sys.exit(main())

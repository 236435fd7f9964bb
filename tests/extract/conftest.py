"""Shared pieces of the extraction tests: a side model on the local server that answers
extraction side queries from a queue the test fills, and recall side queries with nothing."""

from __future__ import annotations

import collections
import re
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.cli._session import Session, open_session
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import FolderStore
from asyncrecall.memory.extraction._extract import SCHEMA_NAME
from asyncrecall.memory.extraction._state import default_state_dir
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from conftest import handoff_workers

# The PostgreSQL cluster fixtures of the store's own tests, for test_postgres.py (one
# throw-away cluster per run, started only when a test asks for it).
from postgres.conftest import (  # noqa: F401
    app_url,
    namespace,
    open_pg,
    pg_server,
    pg_store,
    pg_url,
    postgres_server,
)

HANG_GUARD = 120.0


def is_extraction(record: RecordedRequest) -> bool:
    """The request is an extraction side query (not a recall one, not the main model)."""
    fmt = record.body.get("response_format")
    if not isinstance(fmt, dict):
        return False
    if fmt.get("type") == "json_schema":
        return bool(fmt.get("json_schema", {}).get("name") == SCHEMA_NAME)
    # json_object: the instruction asks for {"memories": ...}, in the system message or,
    # when the request begins as the agent's do, in the user message.
    return any('{"memories"' in str(m.get("content", "")) for m in record.messages)


def offsets_in_prompt(record: RecordedRequest) -> list[int]:
    """The transcript offsets an extraction request showed the model."""
    prompt = str(record.messages[-1]["content"])
    return [int(m) for m in re.findall(r"^\[(\d+)\] ", prompt, flags=re.MULTILINE)]


def kill_mid_extraction(
    server: LocalServer, command: list[str], env: dict[str, str], offsets: list[int]
) -> None:
    """Run ``command``, SIGKILL it once its extraction of ``offsets`` is out, and wait
    until the server saw that side query hang up (the crash tests of both stores)."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        killed = server.wait_for(
            lambda r: is_extraction(r) and offsets_in_prompt(r) == offsets, timeout=HANG_GUARD
        )
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=HANG_GUARD)
    finally:
        process.kill()
        process.communicate()
    server.wait_disconnected(killed, timeout=HANG_GUARD)


def handoff_dir(memory_dir: Path) -> Path:
    return default_state_dir(memory_dir) / "handoff"


def handoffs(memory_dir: Path) -> list[str]:
    folder = handoff_dir(memory_dir)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def wait_until_handed_off_work_is_done(memory_dir: Path) -> None:
    """Poll (a hang guard) until no hand-off of the folder is left and no worker runs."""
    deadline = time.monotonic() + HANG_GUARD
    while handoffs(memory_dir) or handoff_workers(str(memory_dir)):
        if time.monotonic() > deadline:
            log = handoff_dir(memory_dir) / "worker.log"
            raise TimeoutError(f"hand-offs left: {handoffs(memory_dir)}; log: {_text(log)}")
        time.sleep(0.02)


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else "(none)"


def memory(
    name: str, offsets: list[int], *, content: str = "", path: str = "", action: str = "create"
) -> dict[str, Any]:
    """One proposal as the side model would write it."""
    return {
        "action": action,
        "path": path,
        "name": name,
        "description": f"about {name}",
        "type": "project",
        "content": content or f"The fact called {name}.",
        "source_offsets": offsets,
    }


class SideModel:
    """The side model's answers: extraction requests pop ``replies`` (default: nothing to
    write), recall requests select nothing. Runs in the server thread."""

    def __init__(self) -> None:
        self.replies: collections.deque[Reply] = collections.deque()

    def add(self, *memories: dict[str, Any], gate: threading.Event | None = None) -> None:
        self.replies.append(Reply(json={"memories": list(memories)}, gate=gate))

    def add_reply(self, reply: Reply) -> None:
        self.replies.append(reply)

    def __call__(self, record: RecordedRequest) -> Reply:
        if is_extraction(record):
            return self.replies.popleft() if self.replies else Reply(json={"memories": []})
        return Reply(json={"selected_memories": []})


@pytest.fixture
def side(local_server: LocalServer) -> SideModel:
    model = SideModel()
    local_server.set_default("side", model)
    return model


@pytest.fixture
def memory_dir(tmp_path: Path) -> Path:
    return tmp_path / "memory"


@pytest.fixture
def store(memory_dir: Path) -> FolderStore:
    store = FolderStore(memory_dir)
    store.ensure()
    return store


@pytest.fixture
def settings(local_server: LocalServer, tmp_path: Path, memory_dir: Path) -> Settings:
    project = tmp_path / "project"
    project.mkdir()
    return Settings(
        base_url=local_server.base_url,
        api_key="test",
        model="main",
        side_model="side",
        memory_dir=memory_dir,
        project=project,
        home=tmp_path / "home",
    )


@pytest.fixture
async def session(settings: Settings, side: SideModel) -> AsyncIterator[Session]:
    session = open_session(settings)
    try:
        yield session
    finally:
        await session.aclose()


@pytest.fixture
async def side_model(local_server: LocalServer) -> AsyncIterator[OpenAIModel]:
    """The side model over real HTTP (no SDK retries: one request per call)."""
    model = OpenAIModel(model="side", base_url=local_server.base_url, api_key="test", max_retries=0)
    try:
        yield model
    finally:
        await model.aclose()

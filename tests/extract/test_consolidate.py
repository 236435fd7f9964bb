"""Consolidation: a validated plan from the side model, applied file by file atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asyncrecall import ModelProtocolError
from asyncrecall.agent import ExtractionScheduler
from asyncrecall.memory import FolderStore, MemoryExtractor, read_source_offsets
from asyncrecall.memory.extraction._consolidate import consolidate, validate_plan
from asyncrecall.memory.folder._extraction import ConsolidationGate
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

from .conftest import HANG_GUARD, SideModel, memory

WORKER = Path(__file__).with_name("_consolidate_worker.py")


def seed(store: FolderStore) -> None:
    store.save_memory("Office", "where", "project", "The office is in Paris.",
                      extra={"source_offsets": {"s1": [0]}}, origin="user")  # fmt: skip
    store.save_memory("Office location", "where too", "project", "We work in Paris.",
                      extra={"source_offsets": {"s1": [4]}}, origin="user")  # fmt: skip
    store.save_memory("Deploy day", "when", "project", "We deploy on mondays.", origin="user")
    store.save_memory("Old editor", "tools", "user", "The user uses vim.", origin="user")


def plan(*actions: dict[str, Any]) -> dict[str, Any]:
    return {"actions": list(actions)}


def action(op: str, paths: list[str], name: str = "", content: str = "") -> dict[str, Any]:
    return {"op": op, "paths": paths, "name": name, "description": f"{op}d",
            "type": "project", "content": content, "reason": "test"}  # fmt: skip


MERGE = action("merge", ["office.md", "office-location.md"], "Office", "The office is in Paris.")
REWRITE = action("rewrite", ["deploy-day.md"], "Deploy day", "We deploy on fridays now.")
DELETE = action("delete", ["old-editor.md"])


class PlanSide:
    def __init__(self, server: LocalServer) -> None:
        self.replies: list[Reply] = []
        server.set_default("side", self)

    def __call__(self, record: Any) -> Reply:
        return self.replies.pop(0) if self.replies else Reply(json={"actions": []})


async def test_a_plan_merges_rewrites_and_deletes(
    store: FolderStore, local_server: LocalServer, side_model: OpenAIModel
) -> None:
    """Duplicates become one file (their source offsets merged), a stale fact is
    rewritten, a superseded memory is removed, and the index follows."""
    seed(store)
    PlanSide(local_server).replies.append(Reply(json=plan(MERGE, REWRITE, DELETE)))

    result = await consolidate(store, side_model)

    assert result.written == ("office.md", "deploy-day.md")
    assert set(result.removed) == {"office-location.md", "old-editor.md"}
    docs = {d.name: d for d in store.scan()}
    assert sorted(docs) == ["Deploy day", "Office"]
    assert docs["Deploy day"].body == "We deploy on fridays now."
    assert read_source_offsets(docs["Office"].path) == {"s1": (0, 4)}
    index = store.index_path.read_text()
    assert "office-location.md" not in index and "old-editor.md" not in index
    assert result.memories_before == 4 and result.memories_after == 2


async def test_a_dry_run_changes_nothing(
    store: FolderStore, local_server: LocalServer, side_model: OpenAIModel
) -> None:
    seed(store)
    before = {p.name: p.read_bytes() for p in store.root.iterdir() if p.is_file()}
    PlanSide(local_server).replies.append(Reply(json=plan(MERGE, DELETE)))
    result = await consolidate(store, side_model, dry_run=True)
    assert [a.op for a in result.actions] == ["merge", "delete"] and result.dry_run
    assert {p.name: p.read_bytes() for p in store.root.iterdir() if p.is_file()} == before


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (action("delete", ["../outside.md"]), "outside the memory folder"),
        (action("delete", ["missing.md"]), "not an existing memory"),
        (action("merge", ["office.md"], "X", "y"), "two or more paths"),
        (action("rewrite", ["office.md"], "Office", ""), "non-empty"),
    ],
)
def test_a_plan_with_one_bad_action_is_refused_whole(
    store: FolderStore, bad: dict[str, Any], message: str
) -> None:
    """All or nothing: the good actions of a plan with a bad one are not applied either."""
    seed(store)
    with pytest.raises(ModelProtocolError, match=message):
        validate_plan(plan(DELETE, bad), root=store.root, docs=store.scan())
    with pytest.raises(ModelProtocolError, match="two actions"):
        validate_plan(plan(DELETE, DELETE), root=store.root, docs=store.scan())


def test_a_crash_half_way_leaves_every_file_old_or_new(store: FolderStore) -> None:
    """A process killed right after the first file of a plan was replaced: every memory
    file is whole (either its old or its new text), and nothing is lost."""
    seed(store)
    old = {p.name: p.read_text() for p in store.root.glob("*.md")}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(WORKER), str(store.root), json.dumps(plan(REWRITE, MERGE, DELETE))],
        env=env, capture_output=True, text=True, timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 9, done.stderr
    now = {p.name: p.read_text() for p in store.root.glob("*.md")}
    assert set(now) == set(old)  # nothing removed yet, nothing torn
    changed = sorted(name for name in now if now[name] != old[name])
    assert changed == ["MEMORY.md", "deploy-day.md"] and "fridays" in now["deploy-day.md"]
    assert "](deploy-day.md) — rewrited" in now["MEMORY.md"]  # the index line is the new one
    assert len(store.scan()) == 4


def test_the_gate_needs_24_hours_and_5_sessions_and_a_lock(tmp_path: Path) -> None:
    """Due only when both thresholds are met; one run at a time; a completed run resets
    the clock and the count (the lock itself: tests/memory/test_history.py)."""
    now = [1_000_000.0]
    gate = ConsolidationGate(tmp_path / "state", clock=lambda: now[0])
    for _ in range(5):
        gate.note_session()
    assert not gate.due()  # 5 sessions but no time passed
    now[0] += 24 * 3600
    assert gate.due()
    assert gate.acquire() and not gate.acquire()
    gate.release(completed=True)
    assert not gate.due()
    fresh = ConsolidationGate(tmp_path / "other", clock=lambda: now[0])
    fresh.note_session()
    now[0] += 48 * 3600
    assert not fresh.due()  # 48 h but one session


async def test_an_extraction_triggers_a_due_consolidation(
    store: FolderStore, local_server: LocalServer, side_model: OpenAIModel
) -> None:
    """When due, the background task consolidates after the extraction (event
    memory_consolidated) and resets the gate."""
    seed(store)
    side = SideModel()
    local_server.set_default("side", lambda r: side(r) if "memories" in json.dumps(r.body)
                             and "memory_consolidation" not in json.dumps(r.body)
                             else Reply(json=plan(DELETE)))  # fmt: skip
    side.add(memory("New fact", [0]))
    gate = ConsolidationGate.for_store(store, min_hours=0, min_sessions=1)
    scheduler = ExtractionScheduler(MemoryExtractor(store, side_model), consolidation=gate)
    seen: list[str] = []
    scheduler.add_listener(lambda e: seen.append(e.type))
    scheduler.query_completed("a new fact", "ok", saved_memory=False)
    await scheduler.wait_idle()
    assert seen == ["memory_extraction_started", "memory_extracted", "memory_consolidated"]
    assert "Old editor" not in {d.name for d in store.scan()}
    assert not gate.due()
    await scheduler.aclose()


def test_cli_consolidate_dry_run_prints_the_plan(
    local_server: LocalServer, store: FolderStore, tmp_path: Path
) -> None:
    seed(store)
    PlanSide(local_server).replies.append(Reply(json=plan(DELETE)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", "consolidate", "--dry-run", "--json",
         "--base-url", local_server.base_url, "--api-key", "t", "--model", "side",
         "--memory-dir", str(store.root)],
        env=env, capture_output=True, text=True, timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["dry_run"] is True and out["actions"][0]["paths"] == ["old-editor.md"]
    assert len(store.scan()) == 4


def test_consolidate_on_an_unreachable_database_says_so_in_one_line(tmp_path: Path) -> None:
    """``--store`` names the store consolidate works on (never silently the folder): a
    database that cannot be reached is exit 2 with one line naming it."""
    env = {**os.environ, "ASYNCRECALL_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", "consolidate", "--dry-run",
         "--store", "postgresql://nowhere/db", "--base-url", "http://127.0.0.1:9/v1",
         "--model", "m", "--project", str(tmp_path)],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "cannot use the memory database postgresql://nowhere/db" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1

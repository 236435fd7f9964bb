"""Extraction and consolidation on a large PostgreSQL namespace read what they show.

Before: every extraction read the whole namespace, bodies and all (at 100,000 memories
seconds of work, hundreds of MiB and long stalls of the event loop), to show the side
model the 60 newest and to look up the names its answer used; a consolidation sent
the side model every memory in one prompt (41 MB at 100,000).
"""

from __future__ import annotations

import time
import tracemalloc
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from asyncrecall.memory import MemoryExtractor, PostgresStore, TranscriptTurn
from asyncrecall.memory.extraction._consolidate import consolidate
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

from .conftest import SideModel, is_extraction, memory
from .test_consolidate import PlanSide, action, plan

_FILLER = 20_000
_BODY = " ".join(f"word{n % 97} filler{n % 89}" for n in range(60))  # ~1 KB, no rare term


def _fill(url: str, namespace: str) -> None:
    """``_FILLER`` memories newer than anything else, and the oldest one the test is
    about, written with ``COPY`` (the application role may insert)."""
    now = time.time()
    with (
        psycopg.connect(url) as conn,
        conn.cursor().copy(
            "COPY asyncrecall_memories (namespace, name, rel_path, description, type, body,"
            " size, created_at, updated_at) FROM STDIN"
        ) as copy,
    ):
        old = datetime.fromtimestamp(now - 10 * 86_400, UTC)
        body = "The staging cluster runs in Frankfurt."
        copy.write_row((namespace, "Staging cluster", "staging-cluster.md", "the cluster",
                        "project", body, 60, old, old))  # fmt: skip
        for number in range(_FILLER):
            stamp = datetime.fromtimestamp(now - _FILLER + number, UTC)
            copy.write_row((namespace, f"Note {number}", f"note-{number}.md", "a note",
                            "project", _BODY, 1100, stamp, stamp))  # fmt: skip


@pytest.mark.timeout(120)
async def test_an_extraction_on_a_large_namespace_reads_what_it_shows_and_names(
    open_pg: Any,
    namespace: str,
    pg_url: str,
    side_model: OpenAIModel,
    side: SideModel,
    local_server: LocalServer,
) -> None:
    """20,000 newer memories and one old one about the staging cluster: the side model
    is shown the old one (the turns are about it; it is not among the newest), its
    answer naming it is an update of it, and the extraction never holds the namespace
    in memory: its Python allocations peak under 4 MiB (the bodies alone are 22 MB;
    reading them all peaked at 33 MiB; now 1.8 MiB)."""
    _fill(pg_url, namespace)
    store: PostgresStore = open_pg(namespace)
    side.add(memory("Staging cluster", [0], content="The staging cluster moved to Paris."))
    extractor = MemoryExtractor(store, side_model)
    turns = [
        TranscriptTurn(0, "user", "The staging cluster moved from Frankfurt to Paris."),
        TranscriptTurn(1, "assistant", "Noted: staging now runs in Paris."),
    ]

    tracemalloc.start()
    try:
        result = await extractor.extract("s1", turns)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    (request,) = [r for r in local_server.requests if is_extraction(r)]
    prompt = str(request.messages[-1]["content"])
    assert "staging-cluster.md [project] Staging cluster" in prompt
    assert result.updated == ("staging-cluster.md",) and result.created == ()
    body = store.get("Staging cluster").body
    assert "Frankfurt" in body and "moved to Paris" in body
    assert peak < 4 * 1024 * 1024, f"{peak / 1024 / 1024:.1f} MiB"


@pytest.mark.timeout(120)
async def test_a_consolidation_of_a_large_namespace_plans_over_bounded_clusters(
    open_pg: Any, namespace: str, pg_url: str, side_model: OpenAIModel, local_server: LocalServer
) -> None:
    """20,000 memories: the side model is shown bounded clusters (at most four, each at
    most 200 memories and about 120,000 characters), the first grown from the newest
    memory with the old one it repeats, so their merge is planned and applied; the
    whole namespace was one 22 MB prompt."""
    _fill(pg_url, namespace)
    store: PostgresStore = open_pg(namespace)
    store.save_memory("Staging cluster site", "where staging runs", "project",
                      "The staging cluster is hosted in Frankfurt.", origin="user")  # fmt: skip
    side = PlanSide(local_server)
    side.replies.append(Reply(json=plan(action(
        "merge", ["staging-cluster.md", "staging-cluster-site.md"], "Staging cluster",
        "The staging cluster runs in Frankfurt."))))  # fmt: skip

    result = await consolidate(store, side_model)

    prompts = [str(r.messages[-1]["content"]) for r in local_server.requests]
    assert 1 <= len(prompts) <= 4
    assert all(len(prompt) < 130_000 for prompt in prompts), [len(p) for p in prompts]
    assert "staging-cluster.md" in prompts[0] and "staging-cluster-site.md" in prompts[0]
    assert result.written == ("staging-cluster.md",)
    assert result.removed == ("staging-cluster-site.md",)
    assert result.memories_before == _FILLER + 2 and result.memories_after == _FILLER + 1
    assert store.get("Staging cluster").body == "The staging cluster runs in Frankfurt."

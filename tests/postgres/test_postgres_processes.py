"""Many worker processes on one database: nothing lost, last write wins, caches follow."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest

from asyncrecall.memory import PostgresStore
from asyncrecall.memory.postgres._store import StoreChange

_WRITER = """
import json, sys
from asyncrecall.memory import PostgresStore
url, namespace, worker, count, same = sys.argv[1:6]
worker, count = int(worker), int(count)
records = []
with PostgresStore.open(url, namespace=namespace, listen=False, max_size=1) as store:
    for i in range(count):
        if same == "same":
            tag = f"{worker}:{i}"
            kind = "user" if worker == 0 else "feedback"
            doc = store.save_memory("Shared", f"desc {tag}", kind, f"body {tag} " * (1 + i % 7),
                                    origin="user")
            records.append([doc.mtime, tag, kind])
        else:
            store.save_memory(f"w{worker}-m{i}", f"writer {worker}", "project", f"note {i}",
                              origin="user")
print(json.dumps(records))
"""


def _writers(url: str, namespace: str, workers: int, count: int, same: bool) -> list[Any]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, namespace, str(w), str(count),
             "same" if same else "many"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]  # fmt: skip
    results = []
    try:
        for proc in procs:
            results.append((proc.communicate(timeout=240), proc.returncode))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    for (_, err), code in results:
        assert code == 0, err
    return [json.loads(out) for (out, _), _ in results]


@pytest.mark.timeout(300)  # 4,000 transactions from 8 processes at once: a hang guard
def test_eight_writer_processes_lose_nothing(pg_url: str, open_pg: Any, namespace: str) -> None:
    """8 processes × 500 saves, all at once: 4,000 memories, every one intact."""
    _writers(pg_url, namespace, workers=8, count=500, same=False)
    store = open_pg(namespace)
    docs = store.scan(limit=None)
    assert len(docs) == 4000
    expected = {f"w{w}-m{i}" for w in range(8) for i in range(500)}
    assert {d.name for d in docs} == expected
    assert all(d.body == f"note {d.name.split('-m')[1]}" for d in docs)
    assert len({d.rel_path for d in docs}) == 4000


def test_two_processes_saving_one_name_resolve_to_the_last_write(
    pg_url: str, open_pg: Any, namespace: str
) -> None:
    """The row left is the last committed save, whole: no field from another save."""
    records = _writers(pg_url, namespace, workers=2, count=60, same=True)
    store = open_pg(namespace)
    final = store.get("Shared")
    last_mtime, last_tag, last_kind = max((r for rs in records for r in rs), key=lambda r: r[0])
    assert final.mtime == last_mtime
    number = int(last_tag.split(":")[1])
    assert (final.description, final.type) == (f"desc {last_tag}", last_kind)
    assert final.body == f"body {last_tag} " * (1 + number % 7)
    assert len(store.scan(limit=None)) == 1


def test_another_process_save_reaches_this_process_cache(
    pg_url: str, open_pg: Any, namespace: str
) -> None:
    """A save in another process empties this process's caches (LISTEN/NOTIFY)."""
    store: PostgresStore = open_pg(namespace)
    store.save_memory("Mine", "here", "user", "x", origin="user")
    assert store.index_for_prompt() == "- [Mine](mine.md) — here"  # cached now
    arrived = threading.Event()

    def on_change(change: StoreChange) -> None:
        if change.memory_id == store.memory_id("w0-m0"):
            arrived.set()

    store.add_change_listener(on_change)
    _writers(pg_url, namespace, workers=1, count=1, same=False)
    assert arrived.wait(10)
    assert "w0-m0" in store.index_for_prompt()

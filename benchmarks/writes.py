"""What one memory write costs: saves (new names and updates) and forgets, on a folder
and on PostgreSQL, medians over repeats. Run it on two checkouts side by side to see
what a change to the write path costs (PYTHONPATH picks the code).

    python benchmarks/writes.py [--writes 200] [--no-postgres]

The folder is a new temporary folder on the machine's disk; PostgreSQL a throw-away
local cluster (the same as the tests'), reached over its Unix socket.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _timed(calls: list[Callable[[], Any]]) -> float:
    """The median of the calls' durations, in milliseconds."""
    times = []
    for call in calls:
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times)


def measure(store: Any, writes: int) -> dict[str, float]:
    names = [f"Memory {i}" for i in range(writes)]
    body = "A fact worth keeping, with a few words of context. " * 4
    return {
        "create": _timed(
            [lambda n=n: store.save_memory(n, "d", "project", body, origin="user") for n in names]
        ),
        "update": _timed(
            [
                lambda n=n: store.save_memory(n, "d", "project", body + "More.", origin="user")
                for n in names
            ]
        ),
        "forget": _timed([lambda n=n: store.forget(n) for n in names]),
    }


@contextlib.contextmanager
def postgres_store() -> Iterator[Any]:
    from asyncrecall.memory.postgres._store import PostgresStore
    from asyncrecall.testing import LocalPostgres

    server = LocalPostgres()
    server.start()
    try:
        store = PostgresStore.open(server.url, namespace="bench-writes")
        try:
            yield store
        finally:
            store.close()
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    from asyncrecall.memory import FolderStore

    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        folder = measure(FolderStore(Path(tmp) / "memory"), args.writes)
    print(f"folder     create {folder['create']:.2f} ms  update {folder['update']:.2f} ms  "
          f"forget {folder['forget']:.2f} ms  (medians of {args.writes})")  # fmt: skip
    if not args.no_postgres:
        with postgres_store() as store:
            db = measure(store, args.writes)
        print(f"postgres   create {db['create']:.2f} ms  update {db['update']:.2f} ms  "
              f"forget {db['forget']:.2f} ms  (medians of {args.writes})")  # fmt: skip


if __name__ == "__main__":
    main()

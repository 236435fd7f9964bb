"""Scan and lexical selection timings of the memory package.

    .venv/bin/python benchmarks/scan.py [--json]

Builds memory folders of 200 and 2,000 topic files (about 1 KB each) in a temporary
directory and reports, for each: the cold scan (parse everything), the warm scan
(cache hit: stats only; the 200-document cap applies), and the warm lexical selection
over the 200 documents a scan returns. Medians over repeated runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from asyncrecall.memory import LexicalSelector, MemoryManager, MemoryStore

_WORD_TEXT = (
    "database migration test fixture deploy staging cluster config token cache index "
    "memory recall latency model prompt user feedback project reference style lint "
    "review branch commit release docker kubernetes python async await cancel stream"
)
WORDS = _WORD_TEXT.split()

QUERIES = [
    "how do we run the database migration tests",
    "deploy to the staging cluster",
    "what did the user say about lint and style",
    "cancel the stream when the model is slow",
    "release branch and docker image",
]


def _build(root: Path, count: int, rng: random.Random) -> None:
    root.mkdir(parents=True)
    now = time.time()
    for i in range(count):
        words = " ".join(rng.choice(WORDS) for _ in range(150))
        text = (
            f"---\nname: Memory {i}\ndescription: about {rng.choice(WORDS)} and "
            f"{rng.choice(WORDS)}\ntype: project\n---\n{words}\n"
        )
        path = root / f"memory-{i:05d}.md"
        path.write_text(text, encoding="utf-8")
        os.utime(path, (now - i, now - i))


def _median_ms(fn: object, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(count: int, tmp: Path) -> dict[str, float | int]:
    root = tmp / f"memory-{count}"
    _build(root, count, random.Random(count))
    store = MemoryStore(root)
    started = time.perf_counter()
    docs = store.scan()
    cold_ms = (time.perf_counter() - started) * 1000
    warm_ms = _median_ms(store.scan, 50)
    selector = LexicalSelector()
    for query in QUERIES:
        selector.rank(query, docs, limit=5)  # warm the per-document cache
    select_times = []
    for _ in range(40):
        for query in QUERIES:
            started = time.perf_counter()
            selector.rank(query, docs, limit=5)
            select_times.append((time.perf_counter() - started) * 1000)
    manager = MemoryManager(store, selector)

    async def recalls() -> list[float]:
        out = []
        for _ in range(20):
            for query in QUERIES:
                started = time.perf_counter()
                await manager.recall(query)
                out.append((time.perf_counter() - started) * 1000)
        return out

    recall_times = asyncio.run(recalls())
    return {
        "files": count,
        "scanned": len(docs),
        "cold_scan_ms": round(cold_ms, 2),
        "warm_scan_ms": round(warm_ms, 3),
        "warm_select_ms": round(statistics.median(select_times), 3),
        "warm_recall_ms": round(statistics.median(recall_times), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(count, Path(tmp)) for count in (200, 2000)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    header = list(rows[0])
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(str(row[key]) for key in header))


if __name__ == "__main__":
    main()

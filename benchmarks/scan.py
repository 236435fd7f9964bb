"""Scan and lexical recall timings of the memory package, warm and cold, on English notes.

    .venv/bin/python benchmarks/scan.py [--json]            # warm, in one process
    .venv/bin/python benchmarks/scan.py --cold [--samples 30] [--json]
    .venv/bin/python benchmarks/scan.py --stop [--samples 20] [--json]
    .venv/bin/python benchmarks/scan.py --instant [--samples 200] [--json]

The notes are ordinary English: consecutive dialog turns of the LoCoMo conversations
(read from ``../shared/data/locomo/locomo-dev.json`` or ``--dataset``, never copied into
the repository), cut to the wanted size, in topic files with front matter.

- default (warm): folders of 200 and 2,000 notes of about 1.5 KiB; the cold scan
  (parse everything), the warm scan, the warm lexical selection and the warm recall;
  scan and recall twice, side by side: with the folder watch (Linux, local file
  system: nothing changed, nothing stat'ed) and walking (``_walk_ms``: one stat per
  file, as without inotify or with ``ASYNCRECALL_FOLDER_WATCH=off``).
- ``--cold``: one NEW PROCESS per sample (nothing cached in memory), 200 notes of
  1.5 KiB and of 29 KiB. Per sample: ``added_ms``, what the recall adds before the
  first request (from starting the recall task, as the agent does, until the event
  loop is free again after one tick); ``settled_ms``, until the recall has its result;
  ``loop_lag_ms``, the longest gap of a 1 ms ticker while the recall ran. Two
  states: ``first_run`` (no persisted counts: the folder was never recalled) and
  ``new_process`` (the folder's ``.cache`` counts from an earlier process exist).
  A ``warm`` row is the second recall in the same process. p50 and p99 per figure.
- ``--instant``: the instant pass (``Recaller.recall_instant``, 2 files, what
  rides on the first request), warm, at 200, 2,000 and 10,000 notes of 1.5 KiB: p50,
  p99 and max over ``--samples`` rounds of the five queries, with the lexical
  selector's inverted index (its postings) and without, alternating call by call.
- ``--stop``: cancelling an embedding selection 50 ms in (real WordLlama, loaded; 200
  cold 1.5 KiB notes): ``stop_delay_ms``, from the cancel to the end of the worker
  thread (where the worker is a thread of its own) or else to the end of the last
  embedding call it makes (an encoder wrapper records it; measured over 2.5 s), and
  the loop's longest gap after the cancel. Runs on the code on ``PYTHONPATH`` (so an
  older checkout can be measured side by side).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from asyncrecall.memory import FolderStore, LexicalSelector, Recaller

QUERIES = [
    "what did she say about the adoption agency",
    "when did he go camping with the kids",
    "which painting did Melanie finish last week",
    "how is the new job going",
    "what book was recommended for the trip",
]


def _dataset(path: Path | None) -> Path:
    if path is not None:
        return path
    for base in (*Path(__file__).resolve().parents, *Path.cwd().resolve().parents):
        candidate = base / "shared" / "data" / "locomo" / "locomo-dev.json"
        if candidate.is_file():
            return candidate
    sys.exit("no LoCoMo data found: pass --dataset ../shared/data/locomo/locomo-dev.json")


def english_turns(dataset: Path) -> list[str]:
    """Every dialog turn of the dataset, as ``Speaker: text`` lines (ordinary English)."""
    turns: list[str] = []
    for conversation in json.loads(dataset.read_text(encoding="utf-8")):
        sessions = conversation.get("conversation") or {}
        for value in sessions.values():
            if isinstance(value, list):
                turns += [f"{t['speaker']}: {t['text']}" for t in value if t.get("text")]
    return turns


def build(root: Path, count: int, size: int, turns: Sequence[str], seed: int) -> None:
    """``count`` notes of about ``size`` bytes of consecutive turns, newest first by name."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    now = time.time()
    for i in range(count):
        start = rng.randrange(len(turns))
        lines: list[str] = []
        used = 0
        while used < size:
            line = turns[(start + len(lines)) % len(turns)]
            lines.append(line)
            used += len(line) + 1
        description = lines[0][:100].replace('"', "'")
        text = (
            f'---\nname: Note {i}\ndescription: "{description}"\ntype: user\n---\n'
            + "\n".join(lines)
            + "\n"
        )
        path = root / f"note-{i:05d}.md"
        path.write_text(text, encoding="utf-8")
        os.utime(path, (now - i, now - i))


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- warm, in one process ---------------------------------------------------------------


def measure_warm(count: int, tmp: Path, turns: Sequence[str]) -> dict[str, float | int]:
    """Warm figures twice, side by side: with the folder watch (Linux: nothing changed
    means no stat at all) and walking (``ASYNCRECALL_FOLDER_WATCH=off``: a stat per
    file, what other systems and network file systems pay)."""
    root = tmp / f"memory-{count}"
    build(root, count, 1536, turns, count)
    store = FolderStore(root)
    started = time.perf_counter()
    docs = store.scan()
    cold_ms = (time.perf_counter() - started) * 1000
    os.environ["ASYNCRECALL_FOLDER_WATCH"] = "off"
    try:
        walking = FolderStore(root)
        walking.scan()
    finally:
        del os.environ["ASYNCRECALL_FOLDER_WATCH"]
    selector = LexicalSelector(persist=False)
    for query in QUERIES:
        selector.rank(query, docs, limit=5)  # warm the per-document cache
    select_times = []
    for _ in range(40):
        for query in QUERIES:
            started = time.perf_counter()
            selector.rank(query, docs, limit=5)
            select_times.append((time.perf_counter() - started) * 1000)
    watched, walked = Recaller(store, selector), Recaller(walking, selector)

    async def recalls(manager: Recaller) -> list[float]:
        out = []
        for query in QUERIES:
            started = time.perf_counter()
            await manager.recall(query)
            out.append((time.perf_counter() - started) * 1000)
        return out

    async def side_by_side() -> tuple[list[float], list[float]]:
        watched_ms: list[float] = []
        walked_ms: list[float] = []
        for _ in range(20):
            watched_ms += await recalls(watched)
            walked_ms += await recalls(walked)
        return watched_ms, walked_ms

    watched_recall, walked_recall = asyncio.run(side_by_side())
    return {
        "files": count,
        "scanned": len(docs),
        "cold_scan_ms": round(cold_ms, 2),
        "warm_scan_ms": round(_median_ms(store.scan, 50), 3),
        "warm_scan_walk_ms": round(_median_ms(walking.scan, 50), 3),
        "warm_select_ms": round(statistics.median(select_times), 3),
        "warm_recall_ms": round(statistics.median(watched_recall), 3),
        "warm_recall_walk_ms": round(statistics.median(walked_recall), 3),
    }


# -- the instant pass, warm, at 200 / 2,000 / 10,000 notes --------------------------------


def measure_instant(tmp: Path, turns: Sequence[str], samples: int) -> list[dict[str, Any]]:
    """The instant pass as the prefetcher runs it (``Recaller.recall_instant``, two
    files, inline: folder check, offer, BM25, block), warm, per call; ``samples`` rounds
    of the five queries, with the lexical selector's inverted index (postings, the
    default) and without it, alternating call by call so both see the same load."""
    rows: list[dict[str, Any]] = []
    for count in (200, 2000, 10_000):
        root = tmp / f"instant-{count}"
        build(root, count, 1536, turns, count)
        store = FolderStore(root)
        indexed, plain = (
            LexicalSelector(persist=False),
            LexicalSelector(persist=False, postings=False),
        )
        docs = store.scan()
        for selector in (indexed, plain):
            selector.prepare(docs)
        managers = {"index": Recaller(store, indexed), "no_index": Recaller(store, plain)}
        times: dict[str, list[float]] = {name: [] for name in managers}
        for manager in managers.values():  # one unmeasured round each
            for query in QUERIES:
                assert manager.recall_instant(query, limit=2) is not None, "not warm"
        for _ in range(samples):
            for query in QUERIES:
                for name, manager in managers.items():
                    started = time.perf_counter()
                    manager.recall_instant(query, limit=2)
                    times[name].append((time.perf_counter() - started) * 1000)
        row: dict[str, Any] = {"files": count, "offered": len(docs), "calls": samples * 5}
        for name, values in times.items():
            row[f"{name}_p50_ms"] = round(_pct(values, 0.5), 3)
            row[f"{name}_p99_ms"] = round(_pct(values, 0.99), 3)
            row[f"{name}_max_ms"] = round(max(values), 3)
        rows.append(row)
        shutil.rmtree(root, ignore_errors=True)
    return rows


# -- cold: one new process per sample ---------------------------------------------------


async def _one_recall(manager: Recaller, query: str) -> dict[str, float]:
    """Start a recall as the agent does; time the first tick, the settle and the lag."""
    lag = 0.0
    done = False

    async def ticker() -> None:
        nonlocal lag
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            lag = max(lag, now - last - 0.001)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = time.perf_counter()
    task = asyncio.create_task(manager.recall(query))
    await asyncio.sleep(0)  # the agent's one tick; the first request is built after it
    added = time.perf_counter() - started
    await task
    settled = time.perf_counter() - started
    done = True
    await tick
    return {"added_ms": added * 1000, "settled_ms": settled * 1000, "loop_lag_ms": lag * 1000}


def child(folder: Path, query: str) -> None:
    """One sample in this (new) process: a cold recall, then a warm one."""
    manager = Recaller(FolderStore(folder), LexicalSelector())

    async def main() -> dict[str, Any]:
        cold = await _one_recall(manager, query)
        warm = await _one_recall(manager, query)
        return {"cold": cold, "warm": warm}

    print(json.dumps(asyncio.run(main())))


def _spawn(folder: Path, query: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(folder), "--query", query],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure_cold(tmp: Path, turns: Sequence[str], samples: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for size in (1536, 29 * 1024):
        folder = tmp / f"cold-{size}"
        build(folder, 200, size, turns, size)
        cache = folder / ".cache"
        runs: dict[str, list[dict[str, float]]] = {"first_run": [], "new_process": [], "warm": []}
        for i in range(samples):
            query = QUERIES[i % len(QUERIES)]
            shutil.rmtree(cache, ignore_errors=True)
            first = _spawn(folder, query)
            runs["first_run"].append(first["cold"])
            again = _spawn(folder, query)  # the first process left its counts on disk
            runs["new_process"].append(again["cold"])
            runs["warm"].append(again["warm"])
        for state, values in runs.items():
            row: dict[str, Any] = {"files": 200, "bytes_each": size, "state": state}
            for key in ("added_ms", "settled_ms", "loop_lag_ms"):
                series = [v[key] for v in values]
                row[f"{key}_p50"] = round(_pct(series, 0.5), 3)
                row[f"{key}_p99"] = round(_pct(series, 0.99), 3)
            rows.append(row)
    return rows


# -- stopping a cancelled embedding selection --------------------------------------------


def _time_end(worker: threading.Thread, ended: dict[int, float], sample: int) -> None:
    """Record in ``ended[sample]`` when ``worker`` ends (from a watching thread)."""

    def watch() -> None:
        worker.join()
        ended[sample] = time.perf_counter()

    threading.Thread(target=watch, daemon=True).start()


def measure_stop(tmp: Path, turns: Sequence[str], samples: int) -> dict[str, Any]:
    from asyncrecall.memory import EmbeddingSelector, HybridSelector
    from asyncrecall.memory.selectors._embedding import WordLlamaEncoder
    from asyncrecall.memory.selectors._lexical import tokenize

    real = WordLlamaEncoder()
    real.load()  # loading the model and importing the stemmer (once per process) are
    tokenize("warm")  # single steps that no check can interrupt: done before measuring

    class Recording:
        """The real encoder, recording when its last call ended."""

        name = real.name

        def __init__(self) -> None:
            self.last_end = 0.0
            self.lock = threading.Lock()

        def embed(self, texts: Sequence[str]) -> Any:
            vectors = real.embed(texts)
            with self.lock:
                self.last_end = time.perf_counter()
            return vectors

    folder = tmp / "stop"
    build(folder, 200, 1536, turns, 7)
    docs = FolderStore(folder).scan()
    out: dict[str, Any] = {}
    for factory in (EmbeddingSelector, HybridSelector):
        delays: list[float] = []
        lags: list[float] = []
        ended: dict[int, float] = {}
        for i in range(samples):
            encoder = Recording()
            selector = factory(encoder)  # type: ignore[operator]
            fresh = [
                type(d)(
                    d.path, d.rel_path, d.name, d.description, d.type, d.body, d.mtime + i, d.size
                )
                for d in docs
            ]

            async def run(
                selector: Any = selector, fresh: Any = fresh, sample: int = i, ended: Any = ended
            ) -> tuple[float, float]:
                task = asyncio.create_task(selector.select(QUERIES[0], fresh, limit=5))
                await asyncio.sleep(0.05)  # the worker is embedding
                workers = [t for t in threading.enumerate() if t.name.startswith("asyncrecall-")]
                task.cancel()
                cancelled_at = time.perf_counter()
                if workers:  # the worker is a thread of its own: time until it ends
                    _time_end(workers[0], ended, sample)
                lag, last = 0.0, cancelled_at
                while time.perf_counter() - cancelled_at < 2.5:  # longer than a full ranking
                    await asyncio.sleep(0.001)
                    now = time.perf_counter()
                    lag, last = max(lag, now - last - 0.001), now
                return cancelled_at, lag

            cancelled_at, lag = asyncio.run(run())
            end = encoder.last_end
            if ended.get(i) is not None:
                end = ended[i]
            delays.append(max(0.0, end - cancelled_at) * 1000)
            lags.append(lag * 1000)
        out[factory.name] = {
            "stop_delay_ms_p50": round(_pct(delays, 0.5), 2),
            "stop_delay_ms_p99": round(_pct(delays, 0.99), 2),
            "loop_lag_after_cancel_ms_p99": round(_pct(lags, 0.99), 2),
        }
    return out


def _table(rows: list[dict[str, Any]]) -> None:
    header = list(rows[0])
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(str(row[key]) for key in header))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cold", action="store_true", help="a new process per sample")
    parser.add_argument("--stop", action="store_true", help="cancel embedding selections")
    parser.add_argument(
        "--instant", action="store_true", help="the instant pass, warm, at up to 10,000 notes"
    )
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--dataset", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--query", default=QUERIES[0], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.query)
        return
    turns = english_turns(_dataset(args.dataset))
    with tempfile.TemporaryDirectory() as tmp:
        if args.cold:
            result: Any = measure_cold(Path(tmp), turns, args.samples)
        elif args.stop:
            result = measure_stop(Path(tmp), turns, args.samples)
        elif args.instant:
            result = measure_instant(Path(tmp), turns, args.samples)
        else:
            result = [measure_warm(count, Path(tmp), turns) for count in (200, 2000)]
    if args.json:
        print(json.dumps(result, indent=2))
    elif isinstance(result, dict):
        for name, figures in result.items():
            print(name, figures)
    else:
        _table(result)


if __name__ == "__main__":
    main()

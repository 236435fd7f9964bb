"""``asyncrecall bench store``: recall and saves from many worker processes on one database.

A namespace of ``--memories`` synthetic memories (words drawn from a Zipf-like
vocabulary, so full-text search has common and rare terms) is loaded into PostgreSQL
with ``COPY``. Then, for each worker count of ``--workers`` (1, 4, 8), that many
processes each run ``--sessions`` concurrent sessions for ``--seconds``: a session
recalls (the lexical selector over the database's candidates, as the agent's instant
pass does) for a fresh query, or with probability ``--save-ratio`` saves a new memory.
Measured per run: recall p50/p99 (ms, from the call to the result), saves per second
(all processes), the invalidation delay (from a save call in one process until another
process's store has dropped its caches, through ``LISTEN/NOTIFY``) and errors (recalls
that raised or logged a warning, failed saves). The memory folder is measured beside it
at 1 process with the same corpus and mix.

Without ``--store``, a throw-away local PostgreSQL is started from the machine's
binaries (``fsync=off``: saves per second are an upper bound for a durable server),
and the outage row is measured on it (``--outage SECONDS``, 0: not): one process with
one store keeps saving (in a thread, as the memory tool does), recalling and reading the
system prompt's index (both on its event loop) while the server is stopped for that
long, then started again. Measured: the longest the event loop was held while the
database was down, and from the moment the server accepts connections again to the
first save that succeeds, the first recall that returns its memory and the first index
that lists it. (A database given with ``--store`` is not ours to stop: no outage row.)

The many-tenants row (``--tenants``, ``_store_tenants``): that many namespaces, each
with its store, in one process; the server connections it holds, recall p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import FolderStore, LexicalSelector, Recaller, Store
from asyncrecall.memory._document import render_document, safe_file_stem
from asyncrecall.memory.postgres._sql import NAMESPACE_SIZE_SQL
from asyncrecall_bench._corpus import MEMORIES, QUERIES
from asyncrecall_bench._measure import percentile
from asyncrecall_bench._store_tenants import (
    TenantsRow,
    WarningCounter,
    measure_tenants,
    tenants_table,
)

__all__ = ["add_arguments", "run"]

_SEED = 13


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL", help="a PostgreSQL URL (default: a local one)")
    parser.add_argument("--memories", type=int, default=10_000, help="namespace size")
    parser.add_argument("--workers", default="1,4,8", help="worker process counts (1,4,8)")
    parser.add_argument("--sessions", type=int, default=4, help="concurrent sessions per worker")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured time per run")
    parser.add_argument("--save-ratio", type=float, default=0.05, help="share of saves")
    parser.add_argument("--no-folder", action="store_true", help="skip the folder row")
    parser.add_argument(
        "--outage",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="stop the local server this long and time the recovery (0: no outage row)",
    )
    parser.add_argument(
        "--tenants",
        type=int,
        default=1000,
        help="namespaces of the many-tenants row, all in one process (0: no such row)",
    )
    parser.add_argument(
        "--tenant-memories", type=int, default=20, help="memories per namespace of that row"
    )
    parser.add_argument(
        "--namespace",
        metavar="NAME",
        help="load the memories into this namespace, or reuse it if it holds them already"
        " (with --store: a large namespace is loaded once for many runs)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


# -- the corpus -------------------------------------------------------------------------


def _vocabulary() -> list[str]:
    words: dict[str, None] = {}
    for text in [m.content + " " + m.description for m in MEMORIES] + [q.text for q in QUERIES]:
        for word in text.lower().split():
            word = "".join(ch for ch in word if ch.isalpha())
            if len(word) >= 4:
                words[word] = None
    rng = random.Random(_SEED)
    letters = "bcdfghklmnprstvz"
    vowels = "aeiou"
    while len(words) < 5000:
        syllables = rng.randint(2, 4)
        words["".join(rng.choice(letters) + rng.choice(vowels) for _ in range(syllables))] = None
    return list(words)


class _Words:
    """Words drawn with Zipf-like frequencies (rank r has weight 1/r)."""

    def __init__(self, seed: int) -> None:
        self.words = _vocabulary()
        self._weights = [1.0 / (rank + 1) for rank in range(len(self.words))]
        self._rng = random.Random(seed)

    def take(self, count: int) -> list[str]:
        return self._rng.choices(self.words, weights=self._weights, k=count)

    def query(self) -> str:
        return "what do we know about " + " ".join(self.take(self._rng.randint(2, 4)))

    def memory(self, number: int) -> tuple[str, str, str]:
        name = f"{' '.join(self.take(2))} {number}"
        return name, " ".join(self.take(8)), " ".join(self.take(40))


def _load_database(url: str, namespace: str, count: int) -> None:
    """``count`` memories into ``namespace``; one already holding that many is reused as
    it is (``--namespace``: loading a million takes minutes), one holding fewer refused."""
    import psycopg

    from asyncrecall.memory.postgres._store import PostgresStore

    PostgresStore.open(url, namespace=namespace, listen=False).close()  # the schema
    words = _Words(_SEED)
    now = time.time()
    with psycopg.connect(url) as conn:
        row = conn.execute(NAMESPACE_SIZE_SQL, {"ns": namespace}).fetchone()
        held = int(row[0]) if row else 0
        if held >= count:
            _log(f"namespace {namespace!r} holds {held:,} memories: reused")
            return
        if held:
            raise ConfigError(
                f"namespace {namespace!r} holds {held:,} memories, fewer than --memories"
                f" {count:,}: name another (or empty this one)"
            )
        _log(f"loading {count:,} memories into namespace {namespace!r}")
        with conn.cursor().copy(
            "COPY asyncrecall_memories (namespace, name, rel_path, description, type, body,"
            " size, created_at, updated_at) FROM STDIN"
        ) as copy:
            for number in range(count):
                name, description, body = words.memory(number)
                stamp = _timestamp(now - (count - number))
                rel = f"{safe_file_stem(name)}.md"
                copy.write_row((namespace, name, rel, description, "project", body, 400, stamp,
                                stamp))  # fmt: skip
        conn.execute("ANALYZE asyncrecall_memories")


def _log(message: str) -> None:
    """Progress of the long steps, on stderr (the table or JSON goes to stdout)."""
    sys.stderr.write(f"{message}\n")
    sys.stderr.flush()


def _timestamp(epoch: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC)


def _load_folder(root: Path, count: int) -> None:
    words = _Words(_SEED)
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    now = time.time()
    for number in range(count):
        name, description, body = words.memory(number)
        rel = f"{safe_file_stem(name)}.md"
        path = root / rel
        path.write_text(
            render_document(name=name, description=description, type="project", body=body),
            encoding="utf-8",
        )
        stamp = now - (count - number)
        os.utime(path, (stamp, stamp))
        lines.append(f"- [{name}]({rel}) — {description}")
    (root / "MEMORY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- one worker process -------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    worker: int
    url: str | None
    folder: str | None
    namespace: str
    sessions: int
    seconds: float
    save_ratio: float


@dataclass(frozen=True)
class _Outcome:
    latencies_ms: list[float]
    saves: int
    errors: int
    saved: dict[str, float]
    seen: dict[str, float]


def _work(spec: _Spec, barrier: Any, results: Any) -> None:
    """A worker process: warm up, wait for every other worker, measure, report."""
    results.put((spec.worker, asdict(asyncio.run(_awork(spec, barrier)))))


async def _awork(spec: _Spec, barrier: Any) -> _Outcome:
    counter = WarningCounter()
    logger = logging.getLogger("asyncrecall.memory")
    logger.addHandler(counter)
    logger.propagate = False
    seen: dict[str, float] = {}
    store: Store
    if spec.url is not None:
        from asyncrecall.memory.postgres._store import PostgresStore, StoreChange

        store = PostgresStore.open(spec.url, namespace=spec.namespace, max_size=spec.sessions + 1)

        def on_change(change: StoreChange) -> None:
            if change.op == "save":  # another worker's: named by its digest, not its name
                seen.setdefault(change.memory_id, change.seen_at)

        store.add_change_listener(on_change)
    else:
        assert spec.folder is not None
        store = FolderStore(Path(spec.folder))
    manager = Recaller(store, LexicalSelector())
    feed = store.changes
    key: Callable[[str], str] = feed.memory_id if feed is not None else str
    words = _Words(_SEED + 1000 + spec.worker)
    for _ in range(10):  # warm: the selector's per-document cache, the pool
        await manager.recall(words.query())
    latencies: list[float] = []
    saved: dict[str, float] = {}
    errors = 0
    saves = 0
    rng = random.Random(spec.worker)
    await asyncio.to_thread(barrier.wait)  # every worker warm: start together
    deadline = time.time() + spec.seconds

    async def session(number: int) -> None:
        nonlocal errors, saves
        made = 0
        while time.time() < deadline:
            try:
                if rng.random() < spec.save_ratio:
                    made += 1
                    name = f"bench w{spec.worker} s{number} n{made}"
                    _, description, body = words.memory(made)
                    started = time.time()
                    await asyncio.to_thread(
                        store.save_memory, name, description, "user", body, origin="user"
                    )
                    saved[key(name)] = started
                    saves += 1
                else:
                    query = words.query()
                    began = time.perf_counter()
                    await manager.recall(query)
                    latencies.append((time.perf_counter() - began) * 1000)
            except Exception:
                errors += 1

    before = counter.count
    await asyncio.gather(*(session(n) for n in range(spec.sessions)))
    await asyncio.sleep(0.5)  # late notifications of the others' last saves
    store.close()
    return _Outcome(latencies, saves, errors + counter.count - before, saved, seen)


# -- runs and the report ------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    store: str
    workers: int
    sessions: int
    recalls: int
    recall_p50_ms: float
    recall_p99_ms: float
    saves_per_s: float
    invalidation_p50_ms: float | None
    invalidation_p99_ms: float | None
    errors: int


def _run_workers(
    workers: int, *, url: str | None, folder: str | None, namespace: str, args: argparse.Namespace
) -> Row:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers)
    results = context.Queue()
    processes = [
        context.Process(
            target=_work,
            args=(
                _Spec(w, url, folder, namespace, args.sessions, args.seconds, args.save_ratio),
                barrier,
                results,
            ),
        )
        for w in range(workers)
    ]
    for process in processes:
        process.start()
    try:
        reported = dict(results.get(timeout=600) for _ in processes)
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():  # pragma: no cover - a stuck worker
                process.kill()
                process.join()
        results.close()
    outcomes = [_Outcome(**reported[w]) for w in sorted(reported)]
    latencies = [ms for o in outcomes for ms in o.latencies_ms]
    delays = []
    for index, outcome in enumerate(outcomes):
        for other_index, other in enumerate(outcomes):
            if other_index == index:
                continue
            for name, began in outcome.saved.items():
                if name in other.seen:
                    delays.append((other.seen[name] - began) * 1000)
    return Row(
        store="postgres" if url else "folder",
        workers=workers,
        sessions=args.sessions,
        recalls=len(latencies),
        recall_p50_ms=round(percentile(latencies, 50), 2) if latencies else float("nan"),
        recall_p99_ms=round(percentile(latencies, 99), 2) if latencies else float("nan"),
        saves_per_s=round(sum(o.saves for o in outcomes) / args.seconds, 1),
        invalidation_p50_ms=round(percentile(delays, 50), 2) if delays else None,
        invalidation_p99_ms=round(percentile(delays, 99), 2) if delays else None,
        errors=sum(o.errors for o in outcomes),
    )


@dataclass(frozen=True)
class OutageRow:
    """One outage of the local server, seen by one process with one store."""

    outage_s: float
    #: The longest the event loop was held while the database was down (recall and the
    #: index are read on it; saves run in a thread).
    loop_stall_max_ms: float
    failed_saves: int
    #: From the server accepting connections again to the first save that succeeded,
    #: recall that returned its memory, index that listed it (``None``: not in 60 s).
    save_after_ms: float | None
    recall_after_ms: float | None
    index_after_ms: float | None


_PROBE = "outage probe"
_RECOVERY_LIMIT_S = 60.0


async def _measure_outage(server: Any, namespace: str, seconds: float) -> OutageRow:
    from asyncrecall.memory.postgres._store import PostgresStore

    store = PostgresStore.open(server.url, namespace=namespace)
    try:
        store.save_memory(
            _PROBE, "the outage's probe", "project", "zeppelin hangar doors", origin="user"
        )
        manager = Recaller(store, LexicalSelector())
        if not (await manager.recall("zeppelin hangar")).paths:
            raise RuntimeError("the outage row's probe memory is not recalled: nothing to time")
        stall = 0.0
        down = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal stall
            while True:
                began = time.perf_counter()
                await asyncio.sleep(0.01)
                late = (time.perf_counter() - began - 0.01) * 1000
                if down.is_set():
                    stall = max(stall, late)

        beat = asyncio.create_task(heartbeat())
        await asyncio.to_thread(server.stop)
        down.set()
        failed = 0
        saving: asyncio.Future[Any] | None = None
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if saving is None or saving.done():
                if saving is not None and saving.exception() is not None:
                    failed += 1
                saving = asyncio.ensure_future(
                    asyncio.to_thread(store.save_memory, "during", "", "user", "x")
                )
            await manager.recall("zeppelin hangar")
            store.index_for_prompt()
            await asyncio.sleep(0.1)
        await asyncio.to_thread(server.start)
        back = time.monotonic()
        down.clear()
        found: dict[str, float] = {}
        while len(found) < 3 and time.monotonic() - back < _RECOVERY_LIMIT_S:
            if "save" not in found:
                try:
                    await asyncio.to_thread(store.save_memory, "after", "", "user", "back")
                    found["save"] = time.monotonic()
                except Exception:
                    failed += 1
            if "recall" not in found and (await manager.recall("zeppelin hangar")).paths:
                found["recall"] = time.monotonic()
            if "index" not in found and _PROBE in store.index_for_prompt():
                found["index"] = time.monotonic()
            await asyncio.sleep(0.02)
        beat.cancel()
        if saving is not None:  # out since before the server was back: may land or fail
            try:
                await saving
            except Exception:
                failed += 1
    finally:
        store.close()

    def after(what: str) -> float | None:
        return round((found[what] - back) * 1000, 1) if what in found else None

    return OutageRow(
        outage_s=seconds,
        loop_stall_max_ms=round(stall, 1),
        failed_saves=failed,
        save_after_ms=after("save"),
        recall_after_ms=after("recall"),
        index_after_ms=after("index"),
    )


def measure(args: argparse.Namespace, url: str) -> list[Row]:
    counts = [int(n) for n in str(args.workers).split(",") if n.strip()]
    rows = []
    namespace = args.namespace or f"bench-{uuid.uuid4().hex[:8]}"
    _load_database(url, namespace, args.memories)  # once: later runs add their saves
    for workers in counts:
        rows.append(_run_workers(workers, url=url, folder=None, namespace=namespace, args=args))
    if not args.no_folder:
        folder = Path(tempfile.mkdtemp(prefix="asyncrecall-bench-folder-"))
        try:
            _load_folder(folder, args.memories)
            rows.append(_run_workers(1, url=None, folder=str(folder), namespace="", args=args))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return rows


def _table(rows: Sequence[Row], args: argparse.Namespace) -> str:
    def ms(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    lines = [
        f"{args.memories:,} memories, {args.sessions} sessions per worker, {args.seconds:g} s, "
        f"{args.save_ratio:.0%} saves",
        "",
        "| store | workers | recalls | recall p50 ms | recall p99 ms | saves/s "
        "| invalidation p50 ms | invalidation p99 ms | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row.store} | {row.workers} | {row.recalls} | {row.recall_p50_ms:.1f} "
            f"| {row.recall_p99_ms:.1f} | {row.saves_per_s:.1f} | {ms(row.invalidation_p50_ms)} "
            f"| {ms(row.invalidation_p99_ms)} | {row.errors} |"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rich.console import Console

    console = Console(soft_wrap=True, highlight=False)
    url = args.store or settings.store
    server = None
    if not url:
        from asyncrecall.testing import LocalPostgres

        server = LocalPostgres().start()
        url = server.url
    outage: OutageRow | None = None
    tenants: TenantsRow | None = None
    try:
        rows = measure(args, url)
        if args.tenants > 0:
            words = _Words(_SEED + 2)
            tenants = asyncio.run(
                measure_tenants(
                    url, tenants=args.tenants, per_tenant=args.tenant_memories,
                    sessions=args.sessions, seconds=args.seconds, memory=words.memory,
                    query=words.query,
                )
            )  # fmt: skip
        if server is not None and args.outage > 0:
            namespace = f"bench-outage-{uuid.uuid4().hex[:8]}"
            outage = asyncio.run(_measure_outage(server, namespace, args.outage))
    finally:
        if server is not None:
            server.close()
    if args.outage > 0 and server is None:
        Console(stderr=True).print(
            "no outage row: the database given with --store is not ours to stop"
        )
    if args.json:
        console.print_json(
            json.dumps(
                {
                    "rows": [asdict(row) for row in rows],
                    "outage": outage and asdict(outage),
                    "tenants": tenants and asdict(tenants),
                }
            )
        )
        return 0
    console.print(_table(rows, args), markup=False)
    if tenants is not None:
        console.print(tenants_table(tenants), markup=False)
    if outage is not None:
        console.print(_outage_table(outage), markup=False)
    return 0


def _outage_table(row: OutageRow) -> str:
    def ms(value: float | None) -> str:
        return f"not in {_RECOVERY_LIMIT_S:.0f} s" if value is None else f"{value:,.0f}"

    return "\n".join(
        [
            "",
            f"The server stopped for {row.outage_s:g} s, then started again:",
            "",
            "| loop held at most ms (down) | failed saves | first save after ms "
            "| first recall after ms | first index after ms |",
            "| ---: | ---: | ---: | ---: | ---: |",
            f"| {row.loop_stall_max_ms:,.1f} | {row.failed_saves} | {ms(row.save_after_ms)} "
            f"| {ms(row.recall_after_ms)} | {ms(row.index_after_ms)} |",
        ]
    )

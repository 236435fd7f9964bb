"""``asyncrecall bench store``'s many-tenants row: thousands of namespaces in one process.

A fleet worker serves many end users, each a namespace. ``--tenants`` namespaces of
``--tenant-memories`` memories each are loaded with ``COPY``; one process opens one
:class:`~asyncrecall.memory.PostgresStore` per namespace (as an application
opening a store per user would) and runs ``--sessions`` concurrent sessions for
``--seconds``, each recalling (the lexical selector over the database's candidates) a
fresh query in a namespace drawn at random. Measured: the time to open every store,
recall p50/p99, the server connections the process held at most (sampled from
``pg_stat_activity`` while it runs, less those before), the threads it added, and errors
(recalls that raised or logged a warning).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asyncrecall.memory import LexicalSelector, Recaller
from asyncrecall_bench._measure import percentile

__all__ = ["TenantsRow", "WarningCounter", "measure_tenants", "tenants_table"]

_SAMPLE_S = 0.05


@dataclass(frozen=True)
class TenantsRow:
    tenants: int
    memories_per_tenant: int
    sessions: int
    open_s: float
    recalls: int
    recall_p50_ms: float
    recall_p99_ms: float
    #: The most server connections the process held while every store was open.
    server_connections: int
    #: The threads the open stores added to the process.
    threads: int
    errors: int


class WarningCounter(logging.Handler):
    """Counts the warnings logged (a bench's errors include them)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def _backends(conn: Any) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND usename = current_user AND pid <> pg_backend_pid()"
    ).fetchone()
    return int(row[0])


def _load(
    url: str, prefix: str, tenants: int, per_tenant: int, memory: Callable[[int], Any]
) -> None:
    import psycopg

    from asyncrecall.memory._document import safe_file_stem

    with psycopg.connect(url) as conn:
        with conn.cursor().copy(
            "COPY asyncrecall_memories (namespace, name, rel_path, description, type, body,"
            " size) FROM STDIN"
        ) as copy:
            for tenant in range(tenants):
                for number in range(per_tenant):
                    name, description, body = memory(number)
                    copy.write_row((f"{prefix}{tenant}", name, f"{safe_file_stem(name)}.md",
                                    description, "project", body, 400))  # fmt: skip
        conn.execute("ANALYZE asyncrecall_memories")


async def measure_tenants(
    url: str,
    *,
    tenants: int,
    per_tenant: int,
    sessions: int,
    seconds: float,
    memory: Callable[[int], tuple[str, str, str]],
    query: Callable[[], str],
) -> TenantsRow:
    """The many-tenants row (see the module) on the database at ``url``."""
    import psycopg

    from asyncrecall.memory.postgres._store import PostgresStore

    prefix = f"bench-tenant-{uuid.uuid4().hex[:8]}-"
    PostgresStore.migrate(url)
    await asyncio.to_thread(_load, url, prefix, tenants, per_tenant, memory)
    warnings = WarningCounter()
    logger = logging.getLogger("asyncrecall.memory")
    logger.addHandler(warnings)
    stores: list[PostgresStore] = []
    with psycopg.connect(url, autocommit=True) as probe:
        before, threads_before = _backends(probe), threading.active_count()
        peak = threads = 0
        try:
            began = time.perf_counter()
            for tenant in range(tenants):
                stores.append(PostgresStore.open(url, namespace=f"{prefix}{tenant}"))
            open_s = time.perf_counter() - began
            managers = [Recaller(store, LexicalSelector()) for store in stores]
            latencies: list[float] = []
            errors = 0
            rng = random.Random(7)
            deadline = time.monotonic() + seconds
            done = threading.Event()

            def sample() -> int:
                most = 0
                while not done.wait(_SAMPLE_S):
                    most = max(most, _backends(probe))
                return max(most, _backends(probe))

            sampler = asyncio.ensure_future(asyncio.to_thread(sample))

            async def session() -> None:
                nonlocal errors
                while time.monotonic() < deadline:
                    manager = managers[rng.randrange(tenants)]
                    started = time.perf_counter()
                    try:
                        await manager.recall(query())
                    except Exception:
                        errors += 1
                        continue
                    latencies.append((time.perf_counter() - started) * 1000)

            start_warnings = warnings.count
            await asyncio.gather(*(session() for _ in range(sessions)))
            threads = threading.active_count() - threads_before
            done.set()
            peak = await sampler - before
            errors += warnings.count - start_warnings
        finally:
            logger.removeHandler(warnings)
            for store in stores:
                store.close()
    return TenantsRow(
        tenants=tenants,
        memories_per_tenant=per_tenant,
        sessions=sessions,
        open_s=round(open_s, 2),
        recalls=len(latencies),
        recall_p50_ms=round(percentile(latencies, 50), 2) if latencies else float("nan"),
        recall_p99_ms=round(percentile(latencies, 99), 2) if latencies else float("nan"),
        server_connections=peak,
        threads=threads,
        errors=errors,
    )


def tenants_table(row: TenantsRow) -> str:
    return "\n".join(
        [
            "",
            f"{row.tenants:,} namespaces of {row.memories_per_tenant} memories in one process, "
            f"{row.sessions} sessions recalling in random namespaces:",
            "",
            "| tenants | open all s | recalls | recall p50 ms | recall p99 ms "
            "| server connections | threads | errors |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            f"| {row.tenants:,} | {row.open_s:.2f} | {row.recalls} | {row.recall_p50_ms:.1f} "
            f"| {row.recall_p99_ms:.1f} | {row.server_connections} | {row.threads} "
            f"| {row.errors} |",
        ]
    )

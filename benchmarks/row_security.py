"""What row-level security costs a recall: the candidates query on a 20,000-memory
namespace, 200 queries (caches off), p50 and p99, without row-level security, as the
fleet's role (bound to every namespace) and as a tenant bound to the namespace. Three
runs, alternated.

    python benchmarks/row_security.py

PostgreSQL is a throw-away local cluster (the same as the tests'); the memories are
short synthetic ones written in one INSERT, then ANALYZEd.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import psycopg
from psycopg import sql

from asyncrecall.memory import PostgresStore
from asyncrecall.memory.postgres._schema import GRANTS
from asyncrecall.testing import LocalPostgres
from asyncrecall.testing._postgres import find_postgres_bindir

WORDS = ["deploy", "tea", "postgres", "review", "budget", "staging", "latency", "invoice"]
FILL = """
INSERT INTO asyncrecall_memories (namespace, name, rel_path, type, body, size)
SELECT 'big', 'Memory ' || i, 'm' || i || '.md', 'project',
       'fact ' || i || ' about ' || (%(w)s::text[])[1 + i %% 8] || ' and '
       || (%(w)s::text[])[1 + (i / 8) %% 8] || ' with some more words', 60
FROM generate_series(1, 20000) i
"""


def _role(url: str) -> tuple[str, str]:
    """A login role with the documented grants; its name and URL."""
    name = f"r_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        for grant in GRANTS:
            conn.execute(grant.format(role=name))  # type: ignore[arg-type]
    return name, url.replace("user=postgres", f"user={name}")


def _database(server: LocalPostgres) -> str:
    """A new database holding the 20,000 memories (and one of another namespace)."""
    name = f"b_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = server.url.replace("/postgres?", f"/{name}?")
    PostgresStore.migrate(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(FILL, {"w": WORDS})
        conn.execute(
            "INSERT INTO asyncrecall_memories (namespace, name, rel_path, type, body, size)"
            " VALUES ('other', 'x', 'x.md', 'user', 'deploy tea', 10)"
        )
        conn.execute("ANALYZE")
    return url


async def _run(url: str) -> tuple[float, float]:
    """p50 and p99 in milliseconds of 200 candidates queries, after 4 to warm up."""
    with PostgresStore.open(url, namespace="big", listen=False) as store:
        for word in WORDS[:4]:
            await store.candidates(f"{word} warmup")
        times = []
        for i in range(200):
            query = f"{WORDS[i % 8]} {WORDS[(i // 8) % 8]} fact"
            started = time.perf_counter()
            assert await store.candidates(query)
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99)]


def main() -> None:
    bindir = find_postgres_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL binaries (pg_config --bindir)")
    server = LocalPostgres(bindir).start()
    try:
        plain = _database(server)
        _, plain_url = _role(plain)
        secured = _database(server)
        fleet, fleet_url = _role(secured)
        tenant, tenant_url = _role(secured)
        PostgresStore.enable_row_security(secured, bind=[(tenant, "big")], bind_all=[fleet])
        runs = (
            ("no row-level security", plain_url),
            ("fleet (bound to all)", fleet_url),
            ("tenant (bound)", tenant_url),
        )
        for attempt in range(3):
            for label, url in runs:
                p50, p99 = asyncio.run(_run(url))
                print(f"run {attempt + 1}, {label}: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    finally:
        server.close()


if __name__ == "__main__":
    main()

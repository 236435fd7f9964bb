"""The PostgreSQL store's candidates query: what recall offers a selector.

One round trip (``CANDIDATES_SQL``): the newest memories of a small namespace; in a
large one, the best full-text matches on the query's terms but the common ones, plus
the newest. The namespace's common lexemes (expected in over ``COMMON_ROWS`` of its
rows, judged from its newest ``COMMON_SAMPLE`` memories) are counted every 10 minutes
and sent as one ``text[]`` literal; a namespace of at most ``COMMON_ROWS`` memories has
none, and is not sampled. The query runs on a connection of the caller's loop
(``_loops``) or, when that loop has none to spare, on the engine's own pool (both
shared by every namespace, ``_engine``); a connection the server has closed (a
restart) is dropped and the query tried again on another.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from asyncrecall.memory._limits import SCAN_LIMIT
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.postgres._loops import LoopConnections
from asyncrecall.memory.postgres._sql import (
    CANDIDATES_SQL,
    COMMON_REFRESH_S,
    COMMON_ROWS,
    COMMON_SAMPLE,
    COMMON_SQL,
    MATCH_CAP,
    MATCHES,
    NAMESPACE_SIZE_SQL,
    NEWEST_FILL,
)
from asyncrecall.memory.postgres._text import query_text, row_doc, text_array

__all__ = ["CandidateQuery"]


class CandidateQuery:
    """The candidates of one namespace (rows become documents below ``root``)."""

    def __init__(self, *, namespace: str, root: Path, loops: LoopConnections) -> None:
        self.namespace = namespace
        self.root = root
        #: The connections of the callers' loops (the engine's: every namespace's).
        self.loops = loops
        self._attempts = loops.limit + 1
        # Read and replaced whole from any loop (a str and a float: no lock needed).
        self._common = "{}"
        self._common_read_at = float("-inf")

    def params(self, query: str, exclude: Collection[str]) -> dict[str, Any]:
        """The query's parameters (the common lexemes are added when it runs)."""
        return {
            "ns": self.namespace,
            "ex": sorted(exclude),
            "q": query_text(query),
            "small": SCAN_LIMIT + 1,
            "matches": MATCHES,
            "fill": NEWEST_FILL,
            "cap": MATCH_CAP,
        }

    async def on_caller_loop(self, params: dict[str, Any]) -> list[MemoryDoc] | None:
        """The candidates, queried on the running loop; ``None`` when it has no
        connection to spare."""
        return await self._retrying(self.loops.connection, params)

    async def on_pool(
        self, pool: AsyncConnectionPool[AsyncConnection[Any]], params: dict[str, Any]
    ) -> list[MemoryDoc]:
        """The candidates, queried on ``pool`` (the store's own loop runs this)."""
        docs = await self._retrying(pool.connection, params)
        assert docs is not None  # the pool waits for a connection, never yields None
        return docs

    async def _retrying(
        self,
        connection: Callable[[], AbstractAsyncContextManager[AsyncConnection[Any] | None]],
        params: dict[str, Any],
    ) -> list[MemoryDoc] | None:
        """The query on a connection from ``connection()``; one the server closed (a
        restart) is dropped by its owner and the query tried on another."""
        for attempt in range(self._attempts):
            async with connection() as conn:
                if conn is None:
                    return None
                try:
                    return await self._query(conn, params)
                except psycopg.OperationalError:
                    if not conn.closed or attempt == self._attempts - 1:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _query(self, conn: AsyncConnection[Any], params: dict[str, Any]) -> list[MemoryDoc]:
        params["common"] = await self._common_lexemes(conn)
        rows = await (await conn.execute(CANDIDATES_SQL, params)).fetchall()
        parts: tuple[list[MemoryDoc], list[MemoryDoc], list[MemoryDoc]] = ([], [], [])
        for row in rows:
            parts[row[0]].append(row_doc(self.root, row[1:]))
        if parts[0]:
            return parts[0]
        seen = {doc.rel_path for doc in parts[1]}
        return parts[1] + [doc for doc in parts[2] if doc.rel_path not in seen]

    async def _common_lexemes(self, conn: AsyncConnection[Any]) -> str:
        """The lexemes expected in over :data:`COMMON_ROWS` rows of this namespace (from
        a sample of its newest memories, counted again every 10 minutes: too slow on a
        large namespace to count per recall, cheap once per 10 minutes).

        A ``text[]`` literal, built once per reading: psycopg would otherwise adapt the
        few hundred elements of a list on every query (half a millisecond of each
        recall's CPU)."""
        now = time.monotonic()
        if now - self._common_read_at < COMMON_REFRESH_S:
            return self._common
        params: dict[str, Any] = {"ns": self.namespace}
        row = await (await conn.execute(NAMESPACE_SIZE_SQL, params)).fetchone()
        size = int(row[0]) if row is not None else 0
        common: list[str] = []
        if size > COMMON_ROWS:
            params |= {"size": size, "sample": COMMON_SAMPLE, "rows": COMMON_ROWS}
            common = [word for (word,) in await (await conn.execute(COMMON_SQL, params)).fetchall()]
        self._common, self._common_read_at = text_array(sorted(common)), now
        return self._common

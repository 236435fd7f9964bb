"""Run one extraction in its own process, for the crash tests.

Usage: python _crash_worker.py STORE BASE_URL SESSION TURNS_JSON [CRASH_AFTER_WRITES]

STORE is a memory folder, or ``postgresql://...`` with the namespace in the
environment variable ``CRASH_NAMESPACE`` (the database store).

With CRASH_AFTER_WRITES = n, the process dies (``os._exit``, no cleanup, like a kill)
right after the n-th memory file is written: a crash half-way through the writes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from asyncrecall.memory import FolderStore, MemoryExtractor, Store, TranscriptTurn
from asyncrecall.models import OpenAIModel


def open_store(spec: str) -> Store:
    if spec.startswith("postgresql://"):
        from asyncrecall.memory import PostgresStore

        return PostgresStore.open(spec, namespace=os.environ["CRASH_NAMESPACE"])
    return FolderStore(Path(spec))


def main() -> None:
    memory_dir, base_url, session, turns_json, *rest = sys.argv[1:]
    store = open_store(memory_dir)
    if rest:
        limit = int(rest[0])
        count = 0

        def then_die(original: Any) -> Any:
            def save_then_die(*args: Any, **kwargs: Any) -> Any:
                nonlocal count
                doc = original(*args, **kwargs)
                count += 1
                if count >= limit:
                    os._exit(9)
                return doc

            return save_then_die

        # Extraction writes through save_memory (a folder) or save_if (the database's
        # compare-and-swap): whichever writes, the process dies after the n-th write.
        for method in ("save_memory", "save_if"):
            if hasattr(store, method):
                setattr(store, method, then_die(getattr(store, method)))
    turns = [TranscriptTurn(t["offset"], t["role"], t["text"]) for t in json.loads(turns_json)]

    async def run() -> None:
        model = OpenAIModel(model="side", base_url=base_url, api_key="test", max_retries=0)
        try:
            result = await MemoryExtractor(store, model).extract(session, turns)
        finally:
            await model.aclose()
        print(json.dumps({"created": result.created, "updated": result.updated,
                          "recovered": result.recovered, "cursor": result.cursor}))  # fmt: skip

    try:
        asyncio.run(run())
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


if __name__ == "__main__":
    main()

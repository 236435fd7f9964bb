"""Apply a consolidation plan in its own process and die after the first store write.

Usage: python _consolidate_worker.py STORE PLAN_JSON

STORE is a memory folder, or ``postgresql://...`` with the namespace in the
environment variable ``CRASH_NAMESPACE`` (the database store).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from asyncrecall.memory import MemoryStore, MemoryStoreProtocol
from asyncrecall.memory._consolidate import apply_plan, validate_plan


def open_store(spec: str) -> tuple[MemoryStoreProtocol, Path | None]:
    if spec.startswith("postgresql://"):
        from asyncrecall.memory import PostgresMemoryStore

        return PostgresMemoryStore.open(spec, namespace=os.environ["CRASH_NAMESPACE"]), None
    store = MemoryStore(Path(spec))
    return store, store.root


def main() -> None:
    spec, plan = sys.argv[1:]
    store, root = open_store(spec)
    actions = validate_plan(json.loads(plan), root=root, docs=store.scan(limit=None))
    original = store.save_memory

    def save_then_die(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        os._exit(9)  # a crash right after the first memory was replaced

    store.save_memory = save_then_die  # type: ignore[method-assign]
    apply_plan(store, actions)


if __name__ == "__main__":
    main()

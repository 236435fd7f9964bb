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

from asyncrecall.memory import FolderStore, Store
from asyncrecall.memory.extraction._consolidate import apply_plan, validate_plan


def open_store(spec: str) -> tuple[Store, Path | None]:
    if spec.startswith("postgresql://"):
        from asyncrecall.memory import PostgresStore

        return PostgresStore.open(spec, namespace=os.environ["CRASH_NAMESPACE"]), None
    store = FolderStore(Path(spec))
    return store, store.root


def main() -> None:
    spec, plan = sys.argv[1:]
    store, root = open_store(spec)
    actions = validate_plan(json.loads(plan), root=root, docs=store.scan(limit=None))

    def then_die(original: Any) -> Any:
        def save_then_die(*args: Any, **kwargs: Any) -> Any:
            original(*args, **kwargs)
            os._exit(9)  # a crash right after the first memory was replaced

        return save_then_die

    # A plan writes through save_memory (a folder) or save_if (the database's
    # compare-and-swap): whichever writes first, the process dies after it.
    for method in ("save_memory", "save_if"):
        if hasattr(store, method):
            setattr(store, method, then_die(getattr(store, method)))
    apply_plan(store, actions)


if __name__ == "__main__":
    main()

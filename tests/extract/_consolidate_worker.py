"""Apply a consolidation plan in its own process and die after the first store write.

Usage: python _consolidate_worker.py MEMORY_DIR PLAN_JSON
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from asyncrecall.memory import MemoryStore
from asyncrecall.memory._consolidate import apply_plan, validate_plan


def main() -> None:
    memory_dir, plan = sys.argv[1:]
    store = MemoryStore(Path(memory_dir))
    actions = validate_plan(json.loads(plan), root=store.root, docs=store.scan(limit=None))
    original = store.save_memory

    def save_then_die(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        os._exit(9)  # a crash right after the first file was replaced

    store.save_memory = save_then_die  # type: ignore[method-assign]
    apply_plan(store, actions)


if __name__ == "__main__":
    main()

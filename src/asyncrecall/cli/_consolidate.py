"""``asyncrecall memory consolidate [--dry-run]``: tidy the memories with the side model.

Registered by :mod:`asyncrecall.cli._memory`. Works on the memory folder, or on the
database store ``--store postgresql://...`` names (its namespace). The plan (merge,
rewrite, delete) comes from one side query and is validated before anything changes;
``--dry-run`` prints it and stops. Needs an endpoint (``--base-url`` and ``--model`` or
``--side-model``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._common import stdout_console
from asyncrecall.cli._memory_config import open_memory_store
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import Store
from asyncrecall.memory.extraction._consolidate import ConsolidationResult, consolidate

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")


def run(args: argparse.Namespace, settings: Settings) -> int:
    name = settings.effective_side_model
    if not settings.base_url or not name:
        raise ConfigError(
            "memory consolidate needs a side model: pass --base-url and --model (or --side-model)"
        )
    store = open_memory_store(settings)  # the folder, or the database (exit 2 if down)
    try:
        result = asyncio.run(_consolidate(store, settings, name, dry_run=args.dry_run))
    finally:
        store.close()
    if args.json:
        stdout_console(soft_wrap=True).print_json(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        _print(result)
    return 0


async def _consolidate(
    store: Store, settings: Settings, name: str, *, dry_run: bool
) -> ConsolidationResult:
    from asyncrecall.models._openai import OpenAIModel

    assert settings.base_url is not None
    model = OpenAIModel(model=name, base_url=settings.base_url, api_key=settings.api_key)
    try:
        return await consolidate(store, model, dry_run=dry_run)
    finally:
        await model.aclose()


def _print(result: ConsolidationResult) -> None:
    out = stdout_console(soft_wrap=True, highlight=False, emoji=False)
    head = "plan (dry run, nothing changed)" if result.dry_run else "consolidated"
    out.print(f"{head}: {len(result.actions)} action(s), {result.memories_before} memories",
              markup=False)  # fmt: skip
    for action in result.actions:
        detail: Any = ", ".join(action.paths)
        target = f" -> {action.name!r}" if action.op != "delete" else ""
        why = f"  ({action.reason})" if action.reason else ""
        out.print(f"  {action.op} {detail}{target}{why}", markup=False)
    if not result.dry_run:
        out.print(f"written: {', '.join(result.written) or '-'}", markup=False)
        out.print(f"removed: {', '.join(result.removed) or '-'}", markup=False)
        out.print(f"memories now: {result.memories_after}", markup=False)
        for note in result.notes:
            out.print(f"note: {note}", markup=False)
        if result.write_id:
            out.print(
                f"undo it as one step: asyncrecall memory revert --write {result.write_id}",
                markup=False,
            )

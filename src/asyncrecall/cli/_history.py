"""``asyncrecall memory history NAME`` and ``memory revert NAME [--to N]``.

Registered by :mod:`asyncrecall.cli._memory`. Every save and forget of a store that
keeps a history (the memory folder: ``<folder>.state/history/``) is a numbered version
of its memory; ``history`` lists them (who wrote each, when, how large), ``revert``
undoes the newest write of a memory, or brings it back to version ``N``; a revert is a
write of its own, so it can be undone the same way.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from asyncrecall._exceptions import ConfigError
from asyncrecall._settings import Settings
from asyncrecall.memory import MemoryStoreProtocol

__all__ = ["history", "revert"]


def _keeper(store: MemoryStoreProtocol) -> Any:
    if not callable(getattr(store, "history_of", None)) or not callable(
        getattr(store, "revert", None)
    ):
        raise ConfigError(f"the store {store.location} keeps no history of its writes")
    return store


def history(
    args: argparse.Namespace,
    settings: Settings,
    *,
    store: Callable[[Settings], MemoryStoreProtocol],
    out: Callable[[], Any],
    print_json: Callable[[Any], None],
) -> int:
    records = _keeper(store(settings)).history_of(args.name)
    if args.json:
        print_json([{k: v for k, v in r.to_json().items()} for r in records])
        return 0
    if not records:
        out().print(f"no recorded writes of {args.name!r}", markup=False)
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table("version", "op", "by", "when", "size after", "file", box=None)
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.at))
        size = "—" if r.after is None else f"{len(r.after.encode('utf-8'))} B"
        table.add_row(*(Text(c) for c in (str(r.seq), r.op, r.origin, when, size, r.path)))
    out().print(table)
    return 0


def revert(
    args: argparse.Namespace,
    settings: Settings,
    *,
    store: Callable[[Settings], MemoryStoreProtocol],
    out: Callable[[], Any],
    print_json: Callable[[Any], None],
) -> int:
    doc = _keeper(store(settings)).revert(args.name, to=args.to)
    if args.json:
        print_json({"name": args.name, "removed": doc is None,
                    "rel_path": doc.rel_path if doc else None})  # fmt: skip
    elif doc is None:
        out().print(f"Reverted {args.name!r}: it is removed again", markup=False)
    else:
        out().print(f"Reverted {doc.name!r} ({doc.rel_path})", markup=False)
    return 0

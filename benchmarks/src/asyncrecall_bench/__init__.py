"""The benchmarks of asyncrecall (the distribution ``asyncrecall-bench``), run as
``asyncrecall bench KIND``.

The ``asyncrecall`` command imports this package only when ``bench`` is the command
chosen, and calls :func:`register`. Each benchmark is a module ``asyncrecall_bench._KIND``
exposing ``add_arguments(parser)`` and ``run(args, settings) -> int``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import import_module
from types import ModuleType
from typing import Any

__all__ = ["KINDS", "register"]

#: Each benchmark, by the name ``asyncrecall bench`` takes, with its one-line summary.
KINDS: dict[str, str] = {
    "latency": "latency added per user query, blocking vs async recall modes",
    "quality": "memory selection quality on LoCoMo-format data",
    "overhead": "the prefetch machinery's own cost, and many concurrent sessions",
    "store": "recall and saves from 1/4/8 worker processes on one PostgreSQL store",
    "recall": "end to end on LoCoMo: added latency, gold and junk delivered, per mode",
    "frameworks": "framework adapters vs the awaited-recall pattern, in each agent loop",
    "extract": "memories written by extraction, judged by LoCoMo questions",
    "cli": "new `asyncrecall run` processes: memory on the first request, start-up, exit",
    "security": "memory poisoning through every way into the store, in eight languages",
}


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``bench`` and one sub-command per benchmark to the ``asyncrecall`` command line
    (``subparsers`` is its commands' action, ``common`` the flags every command takes)."""
    parser = subparsers.add_parser("bench", help="benchmarks: latency, quality, overhead")
    kinds = parser.add_subparsers(dest="bench_kind", metavar="KIND", required=True)
    for kind, summary in KINDS.items():
        module = import_module(f"asyncrecall_bench._{kind}")
        sub = kinds.add_parser(kind, help=summary, parents=[common])
        module.add_arguments(sub)
        sub.set_defaults(handler=_handler(module))


def _handler(module: ModuleType) -> Callable[[argparse.Namespace], int]:
    def handle(args: argparse.Namespace) -> int:
        from asyncrecall.cli._common import settings_from_args

        code: int = module.run(args, settings_from_args(args))
        return code

    return handle

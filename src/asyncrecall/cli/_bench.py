"""``asyncrecall bench KIND``: each benchmark lives in ``asyncrecall.bench._KIND``.

A benchmark module exposes ``add_arguments(parser)`` and ``run(args, settings) -> int``.
"""

from __future__ import annotations

import argparse
from importlib import import_module
from typing import Any

from asyncrecall.cli._common import settings_from_args

_KINDS = {
    "latency": "latency added per user query, blocking vs async recall modes",
    "quality": "memory selection quality on LoCoMo-format data",
    "overhead": "the prefetch machinery's own cost, and many concurrent sessions",
    "store": "recall and saves from 1/4/8 worker processes on one PostgreSQL store",
    "recall": "end to end on LoCoMo: added latency, gold and junk delivered, per mode",
    "frameworks": "framework adapters vs the awaited-recall pattern, in each agent loop",
    "extract": "memories written by extraction, judged by LoCoMo questions (issue 14)",
    "cli": "new `asyncrecall run` processes: memory on the first request, start-up, exit",
    "security": "memory poisoning through every way into the store, in eight languages",
}


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("bench", help="benchmarks: latency, quality, overhead")
    kinds = parser.add_subparsers(dest="bench_kind", metavar="KIND", required=True)
    for kind, summary in _KINDS.items():
        try:
            module = import_module(f"asyncrecall.bench._{kind}")
        except ModuleNotFoundError as exc:
            if exc.name != f"asyncrecall.bench._{kind}":
                raise
            continue
        sub = kinds.add_parser(kind, help=summary, parents=[common])
        module.add_arguments(sub)
        sub.set_defaults(handler=_handler(module))


def _handler(module: Any) -> Any:
    def handle(args: argparse.Namespace) -> int:
        code: int = module.run(args, settings_from_args(args))
        return code

    return handle

"""``asyncrecall bench KIND``: the benchmarks, from the distribution ``asyncrecall-bench``
(package ``asyncrecall_bench``), imported only when ``bench`` is the command chosen.

Where it is not installed, ``asyncrecall bench ...`` says how to install it, in one line
on stderr, and exits 2, as a command whose extra is missing does (``asyncrecall mcp``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import import_module
from typing import Any

from asyncrecall._exceptions import ConfigError

__all__ = ["MISSING", "register"]

_PACKAGE = "asyncrecall_bench"
MISSING = (
    "asyncrecall bench needs the benchmarks, the asyncrecall-bench distribution: "
    "pip install ./benchmarks in a clone of asyncrecall"
)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    try:
        bench = import_module(_PACKAGE)
    except ModuleNotFoundError as exc:
        if exc.name != _PACKAGE:
            raise  # installed, but something it needs is not: its own error says what
        # No flags at all (no prefix character a word can start with): whatever follows
        # `bench`, --help included, reaches the handler and gets the line above.
        parser = subparsers.add_parser(
            "bench", help="benchmarks (not installed: asyncrecall-bench)", prefix_chars="\0"
        )
        parser.add_argument("words", nargs="*")
        parser.set_defaults(handler=_missing)
        return
    add: Callable[[Any, argparse.ArgumentParser], None] = bench.register
    add(subparsers, common)


def _missing(args: argparse.Namespace) -> int:
    del args
    raise ConfigError(MISSING)

"""Print the public surface of asyncrecall: every public module's ``__all__``.

    python tools/public_names.py            # counts per module, then the total
    python tools/public_names.py --names    # the names too, one module per block

Run it with the package importable (``pip install -e .`` or ``PYTHONPATH=src``). The
public modules are the top-level package, its public sub-packages and each framework
adapter under ``asyncrecall.integrations``; a module whose optional extra is missing is
reported and left out. The total counts each exported object once: a class re-exported
by several modules (``asyncrecall.Model`` and ``asyncrecall.models.Model``) is one name.
Reading an ``__all__`` name that is imported on first use imports it (never a
deprecated alias: those are not in any ``__all__``).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import sys
import textwrap
from types import ModuleType

#: The public modules, in the order they are printed.
MODULES = (
    "asyncrecall",
    "asyncrecall.prefetch",
    "asyncrecall.memory",
    "asyncrecall.models",
    "asyncrecall.agent",
    "asyncrecall.integrations",
    "asyncrecall.testing",
    "asyncrecall.mcp_server",
)


def public_modules() -> list[str]:
    """``MODULES`` with each public framework adapter after ``asyncrecall.integrations``."""
    names: list[str] = []
    for name in MODULES:
        names.append(name)
        if name == "asyncrecall.integrations":
            package = importlib.import_module(name)
            names += sorted(
                f"{name}.{info.name}"
                for info in pkgutil.iter_modules(package.__path__)
                if not info.name.startswith("_")
            )
    return names


def _identity(name: str, value: object) -> object:
    """What makes two exports the same name: the object for classes, functions and
    modules; the name and the object for values (two constants may share one ``5``)."""
    if inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value):
        return id(value)
    return (name, id(value))


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", action="store_true", help="list the names of each module")
    args = parser.parse_args(argv)
    seen: dict[object, str] = {}
    listed = 0
    for module_name in public_modules():
        try:
            module: ModuleType = importlib.import_module(module_name)
        except ImportError as exc:
            _say(f"{module_name:<42} skipped: {exc}")
            continue
        exported = list(getattr(module, "__all__", ()))
        listed += len(exported)
        for name in exported:
            seen.setdefault(_identity(name, getattr(module, name)), name)
        _say(f"{module_name:<42} {len(exported):>4}")
        if args.names:
            _say(textwrap.indent(textwrap.fill(" ".join(exported), 88), "    "))
    _say(f"{'total (each object once)':<42} {len(seen):>4}   ({listed} entries in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

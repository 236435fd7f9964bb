"""The package's layers, read from the source's imports (every import: at the top, inside
functions and under ``TYPE_CHECKING``): no circle, and each wing of ``memory`` imports
only what docs/design.md ("Where the code lives") says it may."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "asyncrecall"
MEMORY = "asyncrecall.memory"
WINGS = ("extraction", "folder", "postgres", "selectors")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports (``from X import y`` yields ``X`` and ``X.y``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path.parent)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _graph() -> dict[str, set[str]]:
    """Module -> the modules of this package it imports (names that are modules only)."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {
        name: {i for i in _imports(path) if i in files and i != name}
        for name, path in files.items()
    }


GRAPH = _graph()


def _wing(module: str) -> str | None:
    """The wing of ``memory`` a module is in, ``"core"`` for the rest of ``memory``."""
    if module == MEMORY:
        return "face"
    if not module.startswith(MEMORY + "."):
        return None
    part = module.split(".")[2]
    return part if part in WINGS else "core"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read() -> None:
    """The reader sees the imports it must (a reader that sees nothing would pass all)."""
    assert "asyncrecall.memory._types" in GRAPH["asyncrecall.memory.folder._store"]
    assert "asyncrecall.memory.postgres._extraction" in GRAPH["asyncrecall.memory.postgres._store"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_in_the_package() -> None:
    """A package face importing its own modules is no circle; anything else is."""
    faces = {name for name in GRAPH if (PACKAGE.parent / name.replace(".", "/")).is_dir()}
    graph = {
        name: {i for i in deps if not (i in faces and name.startswith(i + "."))}
        for name, deps in GRAPH.items()
    }
    assert _circles(graph) == []


def test_psycopg_is_imported_in_memory_only_by_the_postgres_wing() -> None:
    """(``bench/_store`` bulk-loads its benchmark database with ``COPY``: outside memory.)"""
    outside = [
        _module_name(path)
        for path in (PACKAGE / "memory").rglob("*.py")
        if any(i.split(".")[0] in {"psycopg", "psycopg_pool"} for i in _imports(path))
        and _wing(_module_name(path)) != "postgres"
    ]
    assert outside == []


@pytest.mark.parametrize(
    ("wing", "allowed"),
    [
        ("core", set()),
        ("extraction", set()),
        ("selectors", set()),
        ("folder", {"extraction"}),
        ("postgres", {"extraction"}),
    ],
)
def test_each_wing_imports_only_what_it_may(wing: str, allowed: set[str]) -> None:
    """The core imports no wing; ``extraction/`` imports no store; a selector or a store
    imports no other wing but ``extraction/``'s protocol (the face re-exports them all)."""
    crossings = sorted(
        f"{module} -> {dep}"
        for module, deps in GRAPH.items()
        if _wing(module) == wing
        for dep in deps
        if _wing(dep) not in {None, "core", wing, *allowed}
    )
    assert crossings == []


def test_the_stores_extraction_helpers_do_not_import_the_store() -> None:
    """A wing's store imports its helpers to hand them out; they see it through its
    shape protocol (``_shape``), never by importing it back."""
    for wing, store in (("folder", "_store"), ("postgres", "_store")):
        module = f"{MEMORY}.{wing}.{store}"
        for helper in ("_extraction", "_transfer"):
            assert module not in GRAPH[f"{MEMORY}.{wing}.{helper}"]


def test_the_package_imports_neither_the_benchmarks_nor_the_conformance_kit() -> None:
    """The benchmarks and the conformance kit are distributions beside the package, built
    on it: no module of it imports theirs (``asyncrecall bench`` finds the benchmarks by
    name, at run time, only when that command is chosen)."""
    beside = ("asyncrecall_bench", "asyncrecall_conformance")
    found = sorted(
        f"{_module_name(path)} -> {name}"
        for path in PACKAGE.rglob("*.py")
        for name in _imports(path)
        if name.split(".")[0] in beside
    )
    assert found == []
    assert (SRC.parent / "benchmarks" / "src" / "asyncrecall_bench" / "__init__.py").is_file()


#: The library: what an application imports. The command line (``asyncrecall.cli``)
#: is a client of it, in a wing of its own (its commands, the demo, the settings, the
#: session wiring, the read-ahead and the hand-off worker); ``__main__`` sits on top.
LIBRARY = ("prefetch", "memory", "models", "agent", "integrations", "mcp_server", "testing")


def _in_library(module: str) -> bool:
    parts = module.split(".")
    if module == "asyncrecall":
        return True  # the package's face
    if len(parts) == 2 and parts[1].startswith("_") and parts[1] != "__main__":
        return True  # the root's private modules: _cancel, _exceptions, _platform ...
    return len(parts) >= 2 and parts[1] in LIBRARY


def test_the_library_never_imports_the_command_line() -> None:
    """No module of the library imports ``asyncrecall.cli`` or anything in it: an app
    gets the primitive, the stores, the selectors, the models and the adapters without
    the command line's settings, session wiring, read-ahead or worker."""
    library = [name for name in GRAPH if _in_library(name)]
    assert "asyncrecall.prefetch._prefetcher" in library and "asyncrecall._cancel" in library
    assert not any(name.startswith("asyncrecall.cli") for name in library)
    crossings = sorted(
        f"{module} -> {dep}"
        for module in library
        for dep in GRAPH[module]
        if dep == "asyncrecall.cli" or dep.startswith("asyncrecall.cli.")
    )
    assert crossings == []

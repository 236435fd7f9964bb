"""Fixtures of the memory tests: a store in a temporary folder and a file writer.

Every memory test runs twice: with the folder watch (Linux: a warm scan trusts the
kernel's change events) and walking (``ASYNCRECALL_FOLDER_WATCH=off``, as on other
systems and network file systems), so both paths keep every scanning promise.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from asyncrecall.memory import FolderStore, MemoryDoc

WriteFile = Callable[..., Path]


@pytest.fixture(autouse=True, params=["watched", "walked"])
def folder_watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the stores of the test know their folder is unchanged."""
    if request.param == "walked":
        monkeypatch.setenv("ASYNCRECALL_FOLDER_WATCH", "off")
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An existing, empty memory folder."""
    folder = tmp_path / "memory"
    folder.mkdir()
    return folder


@pytest.fixture
def store(root: Path) -> FolderStore:
    return FolderStore(root)


def memory_doc(rel: str, body: str, *, name: str = "", description: str = "") -> MemoryDoc:
    """A memory document that exists only in memory (the selectors read no file)."""
    return MemoryDoc(
        path=Path("/mem") / rel,
        rel_path=rel,
        name=name or rel.removesuffix(".md"),
        description=description,
        type="project",
        body=body,
        mtime=1_000.0,
        size=len(body.encode()),
    )


def topic(
    name: str = "A memory",
    *,
    description: str = "what it is about",
    type: str = "project",
    body: str = "The body.",
) -> str:
    """A topic file's text with a plain front matter block."""
    return f"---\nname: {name}\ndescription: {description}\ntype: {type}\n---\n{body}\n"


@pytest.fixture
def write(root: Path) -> WriteFile:
    """``write(rel, text_or_bytes, mtime=None)``: a file below the folder, with its mtime."""

    def write_file(rel: str, content: str | bytes, *, mtime: float | None = None) -> Path:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        if mtime is not None:
            os.utime(path, (mtime, mtime))
        return path

    return write_file

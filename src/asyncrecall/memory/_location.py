"""Where a project's memory folder lives.

An explicit folder (``--memory-dir`` / ``ASYNCRECALL_MEMORY_DIR``) wins. Otherwise it is
``<home>/projects/<key>/memory`` where ``<key>`` is the sanitised canonical root of the
project's git repository: the main working tree of the repository, so that every
worktree of one repository shares one memory. Outside git, the key is the project
folder itself.

The git root is found by reading ``.git`` entries (a folder, or a ``gitdir:`` file for
worktrees and submodules) rather than by running ``git``: no subprocess, and the same
answer whether or not git is installed.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Final

__all__ = ["canonical_project_root", "resolve_memory_dir", "sanitise_path"]

_MAX_KEY: Final = 120


def resolve_memory_dir(*, home: Path, project: Path, memory_dir: Path | None = None) -> Path:
    """The memory folder of ``project`` under ``home``, or ``memory_dir`` when given (not
    created: see ``FolderStore.ensure``)."""
    if memory_dir is not None:
        return memory_dir.expanduser().absolute()
    root = canonical_project_root(project)
    return home.expanduser().absolute() / "projects" / sanitise_path(root) / "memory"


def canonical_project_root(project: Path) -> Path:
    """The main working tree of the git repository holding ``project``, else ``project``.

    Links are resolved first, so two spellings of one folder give one answer. For a
    linked worktree (``.git`` is a file pointing into ``<main>/.git/worktrees/<name>``)
    the answer is the main working tree. For a submodule (``.git`` points into the
    super-project's ``.git/modules``) it is the submodule's own folder.
    """
    start = Path(os.path.realpath(project))
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return folder
        if dot_git.is_file():
            return _root_from_gitfile(folder, dot_git)
    return start


def _root_from_gitfile(folder: Path, dot_git: Path) -> Path:
    try:
        first = dot_git.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return folder
    if not first.startswith("gitdir:"):
        return folder
    git_dir = Path(first.removeprefix("gitdir:").strip())
    if not git_dir.is_absolute():
        git_dir = folder / git_dir
    git_dir = Path(os.path.realpath(git_dir))
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return folder  # a submodule or a separate git dir: this working tree is the root
    common_dir = Path(os.path.realpath(git_dir / common))
    if common_dir.name == ".git":
        return common_dir.parent
    return common_dir  # a bare repository's worktree: key on the repository itself


def sanitise_path(path: Path) -> str:
    """A folder name for a path: every character but ASCII letters and digits becomes ``-``.

    ``/home/ann/src/app`` becomes ``-home-ann-src-app``. Long results are cut and given
    a hash suffix so that two long paths never collide.
    """
    text = str(path)
    key = re.sub(r"[^A-Za-z0-9]", "-", text)
    if len(key) > _MAX_KEY:
        digest = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:10]
        key = f"{key[: _MAX_KEY - 11]}-{digest}"
    return key

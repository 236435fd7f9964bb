"""Where memory lives: the override, the canonical git root, worktrees, outside git."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from asyncrecall.memory import canonical_project_root, resolve_memory_dir
from asyncrecall.memory._location import sanitise_path


def _settings(tmp_path: Path, project: Path, memory_dir: Path | None = None) -> dict[str, Path]:
    """``resolve_memory_dir``'s keyword arguments (it takes plain parameters)."""
    chosen = {"memory_dir": memory_dir} if memory_dir is not None else {}
    return {"home": tmp_path / "home", "project": project, **chosen}


def test_the_override_wins(tmp_path: Path) -> None:
    settings = _settings(tmp_path, tmp_path, memory_dir=tmp_path / "mine")
    assert resolve_memory_dir(**settings) == tmp_path / "mine"


def test_outside_git_the_project_folder_is_the_key(tmp_path: Path) -> None:
    project = tmp_path / "plain project"
    project.mkdir()
    expected = tmp_path / "home" / "projects" / sanitise_path(project.resolve()) / "memory"
    assert resolve_memory_dir(**_settings(tmp_path, project)) == expected
    assert "/" not in sanitise_path(project) and " " not in sanitise_path(project)


def test_a_sub_folder_of_a_repository_uses_the_repository_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "pkg").mkdir(parents=True)
    assert canonical_project_root(repo / "src" / "pkg") == repo.resolve()
    assert resolve_memory_dir(**_settings(tmp_path, repo / "src")) == resolve_memory_dir(
        **_settings(tmp_path, repo)
    )


def test_a_linked_path_resolves_to_the_same_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(repo, target_is_directory=True)
    assert canonical_project_root(tmp_path / "alias") == repo.resolve()


def test_worktree_files_point_back_to_the_main_working_tree(tmp_path: Path) -> None:
    """A ``.git`` file (``gitdir: .../.git/worktrees/x``) with ``commondir``: the main tree."""
    main = tmp_path / "main"
    worktree_git = main / ".git" / "worktrees" / "feature"
    worktree_git.mkdir(parents=True)
    (worktree_git / "commondir").write_text("../..\n")
    feature = tmp_path / "feature"
    feature.mkdir()
    (feature / ".git").write_text(f"gitdir: {worktree_git}\n")
    assert canonical_project_root(feature) == main.resolve()


def test_a_submodule_is_its_own_root(tmp_path: Path) -> None:
    modules = tmp_path / "super" / ".git" / "modules" / "sub"
    modules.mkdir(parents=True)
    sub = tmp_path / "super" / "sub"
    sub.mkdir()
    (sub / ".git").write_text("gitdir: ../.git/modules/sub\n")
    assert canonical_project_root(sub) == sub.resolve()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_real_git_worktrees_share_one_memory_folder(tmp_path: Path) -> None:
    """``git worktree add`` checkouts of one repository resolve to one memory folder."""
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=repo,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "init")
    git("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "wt")
    assert resolve_memory_dir(**_settings(tmp_path, tmp_path / "wt")) == resolve_memory_dir(
        **_settings(tmp_path, repo)
    )


def test_long_paths_are_cut_with_a_hash() -> None:
    one = sanitise_path(Path("/" + "a" * 300 + "/one"))
    two = sanitise_path(Path("/" + "a" * 300 + "/two"))
    assert len(one) <= 120 and one != two

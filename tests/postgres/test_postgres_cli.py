"""The real CLI on a real database: ``--store`` for every memory command, and
``memory export`` / ``memory import`` between a folder and the database."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore
from asyncrecall.memory._document import front_matter
from asyncrecall.testing import LocalServer, Reply


def _cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Any:
    result = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return result


def _json(*args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(_cli(*args, "--json", env=env).stdout)


def test_every_memory_command_works_on_the_database(
    pg_url: str, namespace: str, tmp_path: Path
) -> None:
    store = ["--store", pg_url, "--namespace", namespace, "--project", str(tmp_path)]
    _cli("add", *store, "--name", "Database", "--type", "project", "--content", "Use Postgres.")
    _cli("add", *store, "--name", "Style", "--type", "feedback", "--description", "ruff",
         stdin="Run ruff before committing.")  # fmt: skip
    assert [d["name"] for d in _json("list", *store)] == ["Style", "Database"]
    assert _json("show", "style", *store)["body"] == "Run ruff before committing."
    assert namespace in _json("path", *store)["path"]
    recalled = _json("recall", "which database do we use", "--selector", "lexical", *store)
    assert recalled["selected"][0]["rel_path"] == "database.md"
    _cli("forget", "Style", *store)
    assert [d["name"] for d in _json("list", *store)] == ["Database"]
    assert not (tmp_path / "memory").exists()  # nothing went to a folder


def test_the_store_can_come_from_the_environment(
    pg_url: str, namespace: str, tmp_path: Path
) -> None:
    env = {"ASYNCRECALL_STORE": pg_url, "ASYNCRECALL_NAMESPACE": namespace}
    _cli("add", "--name", "Env", "--type", "user", "--content", "from env", env=env)
    assert [d["name"] for d in _json("list", env=env)] == ["Env"]


def test_the_agent_recalls_from_the_database_given_on_its_command_line(
    pg_url: str, namespace: str, tmp_path: Path, local_server: LocalServer
) -> None:
    """``run --store URL --namespace NAME`` (the flags every memory command takes) reads
    its memory from the database: the memory saved there is in the first request's index
    of memories, and no folder is made."""
    store = ["--store", pg_url, "--namespace", namespace]
    _cli("add", *store, "--name", "deploy-flow", "--type", "project",
         "--description", "deploys go through staging first", "--content", "Use blue.")  # fmt: skip
    local_server.set_default("main", Reply(text="fine"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    (tmp_path / "project").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "run", "how do deploys go through staging?",
         *store, "--base-url", local_server.base_url, "--model", "main",
         "--selector", "lexical", "--project", str(tmp_path / "project"), "--no-extract",
         "--output-format", "json"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "fine"
    [first] = [r for r in local_server.requests if r.model == "main"]
    assert "deploy-flow.md) — deploys go through staging first" in first.messages[0]["content"]
    assert not (tmp_path / "home" / "projects").exists()  # nothing went to a folder


@pytest.mark.parametrize("url", ["mysql://db/x", "/some/folder"])
def test_a_store_that_is_not_postgres_is_refused(url: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", "list", "--store", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--store must be a postgresql:// URL" in result.stderr


def test_export_then_import_loses_nothing(pg_url: str, namespace: str, tmp_path: Path) -> None:
    """folder → database → folder: every memory, its front matter and its time survive."""
    source = FolderStore(tmp_path / "source")
    originals = [
        source.save_memory(
            "Database", "testing: never mock it", "feedback", "Real Postgres.", origin="user"
        ),
        source.save_memory(
            "Ünïcode — names", "quotes ' \" ok", "user", "line 1\n\nline 3", origin="user"
        ),
        source.save_memory(
            "Deploy", "", "project", "---\nnot front matter\n---\nstill body", origin="user"
        ),
        source.save_memory("Ref", "a pointer", "reference", "", origin="user"),
    ]
    for number, doc in enumerate(originals):
        stamp = 1_700_000_000.0 + number * 86_400
        os.utime(doc.path, (stamp, stamp))
    store = ["--store", pg_url, "--namespace", namespace]
    imported = _json("import", "--from", str(source.root), *store)
    assert len(imported) == 4
    exported = _json("export", "--to", str(tmp_path / "back"), *store)
    assert len(exported) == 4

    def fields(folder: Path) -> dict[str, tuple[Any, ...]]:
        return {
            d.name: (d.description, d.type, d.body, round(d.mtime, 3))
            for d in FolderStore(folder).scan(limit=None)
        }

    assert fields(tmp_path / "back") == fields(source.root)
    assert len(fields(source.root)) == 4
    source_index = source.index_for_prompt()
    assert FolderStore(tmp_path / "back").index_for_prompt() == source_index
    raw = (tmp_path / "back" / "database.md").read_text(encoding="utf-8")
    original = (source.root / "database.md").read_text(encoding="utf-8")
    # The same file, but for its provenance: each copy adds an ``import`` source.
    assert _without_provenance(raw) == _without_provenance(original)
    copied = [s["origin"] for s in front_matter(raw)["provenance"]]
    assert copied == [s["origin"] for s in front_matter(original)["provenance"]] + ["import"]


def _without_provenance(text: str) -> str:
    return re.sub(r"(?ms)^provenance:\n(?:[ -].*?\n)*", "", text)


def test_import_needs_a_folder(pg_url: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", "import", "--from",
         str(tmp_path / "missing"), "--store", pg_url],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 2 and "is not a folder" in result.stderr

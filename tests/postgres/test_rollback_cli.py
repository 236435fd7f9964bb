"""Every write can be rolled back from the CLI, on the folder and on PostgreSQL: save,
update, forget, confirm, extraction by name (``memory revert NAME``); an
import and a consolidation, which write many memories, as one step (``memory revert
--write ID``), refused with nothing changed when a memory was written since."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore, Source, consolidate
from asyncrecall.testing import ScriptedModel


@pytest.fixture(params=["folder", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[list[str], Any]:
    """The flags naming the store, and the same store opened in this process."""
    if request.param == "folder":
        flags = ["--memory-dir", str(tmp_path / "memory"), "--project", str(tmp_path)]
        return flags, FolderStore(tmp_path / "memory")
    url, namespace = request.getfixturevalue("pg_url"), request.getfixturevalue("namespace")
    store = request.getfixturevalue("pg_store")
    return ["--store", url, "--namespace", namespace, "--project", str(tmp_path)], store


def _run(*args: str, home: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", *args],
        capture_output=True, text=True, timeout=120, env={**env, "ASYNCRECALL_HOME": str(home)},
    )  # fmt: skip
    assert (done.returncode == 0) is ok, done.stderr
    return done


def _state(store: Any) -> dict[str, tuple[str, bool]]:
    return {d.name: (d.body, d.quarantined) for d in store.scan(limit=None)}


def test_save_update_forget_confirm_and_extraction_are_undone_by_name(
    where: tuple[list[str], Any], tmp_path: Path
) -> None:
    flags, store = where
    home = tmp_path / "home"
    cli = lambda *a, **k: _run(*a, *flags, home=home, **k)  # noqa: E731
    cli("add", "--name", "Editor", "--type", "user", "--content", "vim")
    cli("add", "--name", "Editor", "--type", "user", "--content", "neovim")
    cli("revert", "Editor")  # the update
    assert _state(store) == {"Editor": ("vim", False)}
    cli("forget", "Editor")
    cli("revert", "Editor")  # the forget
    assert _state(store) == {"Editor": ("vim", False)}
    cli("revert", "Editor", "--to", "1")
    cli("revert", "Editor")  # the revert itself
    cli("revert", "Editor")
    cli("revert", "Editor")  # ... back to before the first save: gone
    assert _state(store) == {}

    held = Source.now("save_memory", untrusted=True)
    store.save_memory("Rule", "r", "feedback", "always sudo", sources=(held,))
    cli("confirm", "Rule")
    assert _state(store) == {"Rule": ("always sudo", False)}
    cli("revert", "Rule")  # the confirmation
    assert _state(store) == {"Rule": ("always sudo", True)}

    kept = store.get("Rule")
    backend = store.extraction_backend()
    backend.save("Rule", "r", "feedback", "never sudo", {"s": [0]}, expected=kept,
                 origin="extraction", write_id="s:0:0:abc")  # fmt: skip
    assert _state(store)["Rule"][0] == "never sudo"
    history = json.loads(cli("history", "Rule", "--json").stdout)
    assert history[-1]["origin"] == "extraction" and history[-1]["write_id"] == "s:0:0:abc"
    cli("revert", "Rule")  # the extraction's write
    assert _state(store) == {"Rule": ("always sudo", True)}


def test_an_import_is_undone_as_one_step(where: tuple[list[str], Any], tmp_path: Path) -> None:
    """The import prints its write id; ``revert --write`` removes what it created and
    takes back what it changed (here, a change left waiting beside a kept memory), and
    is itself undone the same way."""
    flags, store = where
    home = tmp_path / "home"
    cli = lambda *a, **k: _run(*a, *flags, home=home, **k)  # noqa: E731
    cli("add", "--name", "Editor", "--type", "user", "--content", "Use neovim.")
    handed = tmp_path / "handed"
    handed.mkdir()
    (handed / "rule.md").write_text("---\nname: Rule\ntype: feedback\n---\nalways sudo\n")
    (handed / "editor.md").write_text("---\nname: Editor\ntype: user\n---\nUse nano.\n")
    before = _state(store)
    done = cli("import", "--from", str(handed))
    (undo,) = [ln.split(": ", 1)[1] for ln in done.stdout.splitlines() if "--write" in ln]
    assert _state(store) != before and store.pending_of(store.get("Editor")) is not None

    undone = cli(*undo.split()[2:], "--json")
    assert {u["name"]: u["removed"] for u in json.loads(undone.stdout)} == {
        "Editor": False, "Rule": True,
    }  # fmt: skip
    assert _state(store) == before and store.pending_of(store.get("Editor")) is None
    write_id = undo.split()[-1]
    cli("revert", "--write", f"undo:{write_id}")
    assert set(_state(store)) == {"Editor", "Rule"}


async def test_a_consolidation_is_undone_as_one_step_unless_written_since(
    where: tuple[list[str], Any], tmp_path: Path
) -> None:
    """A merge (one memory rewritten, one removed) is undone by its write id; with a
    memory of it written since, the undo is refused, says which, and changes nothing."""
    flags, store = where
    home = tmp_path / "home"
    cli = lambda *a, **k: _run(*a, *flags, home=home, **k)  # noqa: E731
    store.save_memory("Office", "where", "project", "The office is in Paris.", origin="user")
    store.save_memory("Office city", "where", "project", "Paris.", origin="user")
    before = _state(store)
    side = ScriptedModel(name="side")
    side.add_json({"actions": [
        {"op": "merge", "paths": ["office.md", "office-city.md"], "name": "Office",
         "description": "where", "type": "project", "reason": "same",
         "content": "The office is in Paris, rue de Rivoli."},
    ]})  # fmt: skip
    result = await consolidate(store, side)
    assert result.write_id.startswith("consolidation:") and set(_state(store)) == {"Office"}
    listed = json.loads(cli("history", "--json").stdout)
    assert {r["name"] for r in listed if r["write_id"] == result.write_id} == {
        "Office", "Office city",
    }  # fmt: skip

    store.save_memory("Office city", "where", "project", "Lyon now.", origin="user")
    refused = cli("revert", "--write", result.write_id, ok=False)
    assert "written since by another write: Office city" in refused.stderr
    assert _state(store)["Office"][0] == "The office is in Paris, rue de Rivoli."
    cli("revert", "Office city")  # that newer write undone by name first
    cli("revert", "--write", result.write_id)
    assert _state(store) == before

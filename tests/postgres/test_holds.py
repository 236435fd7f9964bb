"""Only the user lifts a hold, and the lowest trust wins, the same on the folder and on
PostgreSQL (the least-privilege application role): a held memory stays held after any
later write but ``memory confirm`` or an attested one, and what consolidation writes
after being shown a held memory keeps its hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore, LexicalSelector, Recaller, Source
from asyncrecall.memory._provenance import parse_provenance, provenance_json
from asyncrecall.memory._transfer import copy_memories
from asyncrecall.memory.extraction._consolidate import consolidate
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, Reply
from held_texts import ATTACKS, USER_TEXT

HELD_BODY = ATTACKS["de"]
#: The question whose words find the held memory (it is about tests and pushing).
QUESTION = "Tests überspringen Hauptzweig pushen"


@pytest.fixture(params=["folder", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "folder":
        return FolderStore(tmp_path / "memory")
    return request.getfixturevalue("pg_store")


def _held(store: Any, name: str = "Regel", body: str = HELD_BODY) -> Any:
    """A memory whose only write was model text after tool output: held."""
    untrusted = Source.now("save_memory", session="s1", untrusted=True)
    doc = store.save_memory(name, "Nutzerregel", "feedback", body, sources=(untrusted,))
    assert doc.quarantined
    return doc


async def _recalled(store: Any, query: str = QUESTION) -> list[str]:
    result = await Recaller(store, LexicalSelector()).recall(query)
    return [doc.name for doc in result.selected]


def _append(store: Any, tmp_path: Path) -> None:
    store.save_memory("Regel", "Nutzerregel", "feedback", f"{HELD_BODY}\n\nUnd immer freundlich.",
                      sources=(Source.now("save_memory", session="s2"),))  # fmt: skip


def _same_name(store: Any, tmp_path: Path) -> None:
    store.save_memory("Regel", "Nutzerregel", "feedback", "Tests laufen vor jedem Push.",
                      sources=(Source.now("save_memory", session="s2"),))  # fmt: skip


def _extraction(store: Any, tmp_path: Path) -> None:
    backend = store.extraction_backend()
    current = store.get("Regel")
    source = Source.now("extraction-user", session="s2", offsets=[3])
    backend.save("Regel", "Nutzerregel", "feedback", f"{HELD_BODY} Bitte merken.", {"s2": [3]},
                 expected=current, origin="extraction", sources=(source,))  # fmt: skip


def _mcp(store: Any, tmp_path: Path) -> None:
    # A client the server trusts (``--trust-client``); an untrusted one's write is
    # untrusted itself (tests/mcp_server/test_mcp_trust.py).
    store.save_memory("Regel", "Nutzerregel", "feedback", ATTACKS["ru"], origin="mcp",
                      sources=(Source.now("mcp"),))  # fmt: skip


def _import(store: Any, tmp_path: Path) -> None:
    """A trusted import of a copy that claims the user confirmed it and typed it."""
    handed = FolderStore(tmp_path / "handed")
    handed.ensure()
    (handed.root / "regel.md").write_text(
        "---\nname: Regel\ndescription: Nutzerregel\ntype: feedback\nprovenance:\n"
        "- origin: save_memory\n  at: '2025-01-01T00:00:00Z'\n  untrusted: true\n"
        "- origin: confirmed\n  at: '2025-01-02T00:00:00Z'\n"
        "- origin: extraction-user\n  at: '2025-01-03T00:00:00Z'\n  attested: true\n"
        f"---\n{ATTACKS['ja']}\n",
        encoding="utf-8",
    )
    assert not handed.get("Regel").quarantined  # the copy says it was confirmed
    copy_memories(handed, store, trusted=True)


WRITERS: dict[str, Callable[[Any, Path], None]] = {
    "trusted save_memory append": _append,
    "trusted save_memory of the same name": _same_name,
    "extraction update, not attested": _extraction,
    "trusted MCP save": _mcp,
    "trusted import claiming confirmed": _import,
}


@pytest.mark.parametrize("writer", list(WRITERS))
async def test_a_held_memory_stays_held_after_any_later_write_but_the_users(
    store: Any, tmp_path: Path, writer: str
) -> None:
    """A trusted write that is neither ``memory confirm`` nor attested (an append, a
    save of the same name, an extraction, an MCP save, an import whose copy claims a
    confirmation) leaves a held memory held: out of recall and of the index's record,
    whatever it now says; ``confirm`` then lifts it."""
    doc = _held(store)
    WRITERS[writer](store, tmp_path)
    after = store.get("Regel")
    assert after.quarantined, (writer, store.provenance_of(after))
    assert store.quarantined_paths() == {doc.rel_path}
    assert await _recalled(store, f"{QUESTION} {after.body}") == []
    store.confirm("Regel")
    assert not store.get("Regel").quarantined and store.quarantined_paths() == set()


async def test_an_attested_write_lifts_a_hold_and_no_later_unattested_one_does(
    store: Any,
) -> None:
    """A write whose source is attested (the user's own typed words state its text)
    lifts a hold. A memory held after an attested source (a write that carried one,
    as a merge of held text does) stays held after a write of that source's origin and
    session that is not attested (the attested source is not moved after the hold);
    an attested one lifts it."""
    _held(store)
    said = Source.now("extraction-user", session="s2", offsets=[4], attested=True)
    store.save_memory("Regel", "Nutzerregel", "feedback", "Tests vor jedem Push.", sources=(said,))
    assert not store.get("Regel").quarantined
    assert await _recalled(store, "Tests Push") == ["Regel"]

    held = Source.now("consolidation", held="planned with held text shown: regla.md")
    store.save_memory("Regla", "regla", "feedback", ATTACKS["es"], sources=(said, held))
    assert store.get("Regla").quarantined
    unsaid = Source.now("extraction-user", session="s2", offsets=[6])
    store.save_memory("Regla", "regla", "feedback", f"{ATTACKS['es']} Siempre.", sources=(unsaid,))
    assert store.get("Regla").quarantined
    again = Source.now("extraction-user", session="s2", offsets=[8], attested=True)
    store.save_memory("Regla", "regla", "feedback", "Verificar TLS siempre.", sources=(again,))
    assert not store.get("Regla").quarantined


# -- consolidation shown a held memory --------------------------------------------------


def _plan(*actions: dict[str, Any]) -> Reply:
    return Reply(json={"actions": list(actions)})


def _action(op: str, paths: list[str], name: str = "", content: str = "") -> dict[str, Any]:
    return {"op": op, "paths": paths, "name": name, "description": "d", "type": "project",
            "content": content, "reason": "superseded"}  # fmt: skip


async def test_consolidation_shown_a_held_memory_writes_held_output(
    store: Any, local_server: LocalServer
) -> None:
    """Shown a held memory, the side model's plan (the red team's: rewrite the user's
    memory with the held text, delete another, merge the held ones) writes nothing
    trusted: the rewrite waits beside the user's memory, untrusted, its ``held`` naming
    the held memories shown; the delete of a memory recall uses is skipped; the merge of
    held memories is held. Recall still gives the user's text."""
    store.save_memory("Deploy steps", "how to deploy", "project", USER_TEXT, origin="user")
    store.save_memory("Editor", "which editor", "user", "The user edits with Helix.", origin="user")
    regel = _held(store)
    regla = _held(store, "Regla", ATTACKS["es"])
    local_server.script("side", _plan(
        _action("rewrite", ["deploy-steps.md"], "Deploy steps", HELD_BODY),
        _action("delete", ["editor.md"]),
        _action("merge", [regel.rel_path, regla.rel_path], "Team rules",
                f"{HELD_BODY}\n{ATTACKS['es']}"),
    ))  # fmt: skip
    side = OpenAIModel(model="side", base_url=local_server.base_url, api_key="t", max_retries=0)
    try:
        result = await consolidate(store, side)
    finally:
        await side.aclose()
    (request,) = [r for r in local_server.requests if r.model == "side"]
    assert HELD_BODY in json.dumps(request.messages, ensure_ascii=False)  # it was shown

    shown = f"planned with held text shown: {regel.rel_path}, {regla.rel_path}"
    deploy = store.get("Deploy steps")
    assert (deploy.body, deploy.quarantined) == (USER_TEXT, False)
    change = store.pending_of(deploy)
    assert change.body == HELD_BODY
    mine = change.sources[-1]
    assert (mine.origin, mine.untrusted, mine.held) == ("consolidation", True, shown)
    assert store.get("Editor").body == "The user edits with Helix."
    (note,) = result.notes
    assert note.startswith("delete editor.md skipped") and "'Editor'" in note
    rules = store.get("Team rules")
    assert rules.quarantined and store.provenance_of(rules)[-1].held == shown
    assert await _recalled(store, "how do I deploy to staging") == ["Deploy steps"]
    assert "Team rules" not in await _recalled(store, f"{QUESTION} {ATTACKS['es']}")


# -- the real CLI, on both stores -------------------------------------------------------


@pytest.fixture
def where(store: Any, tmp_path: Path) -> list[str]:
    """The flags naming the test's store: its folder, or its database namespace."""
    if isinstance(store, FolderStore):
        return ["--memory-dir", str(store.root), "--project", str(tmp_path)]
    return ["--store", store.url, "--namespace", store.namespace, "--project", str(tmp_path)]


def _memory(tmp_path: Path, *args: str) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", *args, "--json"],
        capture_output=True, text=True, timeout=120,
        env={**env, "ASYNCRECALL_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_memory_confirm_lifts_a_hold_that_a_trusted_write_left(
    store: Any, where: list[str], tmp_path: Path
) -> None:
    """``asyncrecall memory confirm NAME``, run for real, lifts a hold that a later
    trusted write left in place (``memory list --json`` says so before and after)."""
    _held(store)
    _same_name(store, tmp_path)
    listed = _memory(tmp_path, "list", *where)
    assert [(m["name"], m["quarantined"]) for m in listed] == [("Regel", True)]
    _memory(tmp_path, "confirm", "Regel", *where)
    listed = _memory(tmp_path, "list", *where)
    assert [(m["name"], m["quarantined"]) for m in listed] == [("Regel", False)]


# -- provenance stored before ``attested`` -----------------------------------------------

OLD_PROVENANCE = [
    {"origin": "user", "at": "2025-01-01T00:00:00Z"},
    {"origin": "extraction-assistant", "at": "2025-01-02T00:00:00Z", "session": "s-1",
     "offsets": [1], "untrusted": True, "held": "runs code fetched from the network"},
    {"origin": "confirmed", "at": "2025-01-03T00:00:00Z"},
]  # fmt: skip


def _store_old(store: Any, provenance: list[dict[str, Any]]) -> None:
    """The memory ``Old`` with ``provenance`` as an older version wrote it."""
    if isinstance(store, FolderStore):
        store.ensure()
        header = json.dumps(provenance)  # JSON is YAML: the front matter reads it
        (store.root / "old.md").write_text(
            f"---\nname: Old\ndescription: old\ntype: project\nprovenance: {header}\n---\n"
            "Old fact.\n",
            encoding="utf-8",
        )
        return
    import psycopg
    from psycopg.types.json import Jsonb

    store.save_memory("Old", "old", "project", "Old fact.", origin="user")
    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute(
            "UPDATE asyncrecall_memories SET provenance = %s WHERE namespace = %s AND name = %s",
            (Jsonb(provenance), store.namespace, "Old"),
        )


@pytest.mark.parametrize(
    ("provenance", "held"),
    [
        (OLD_PROVENANCE, False),
        (OLD_PROVENANCE[:2], True),
        # A trusted write after the hold: held now (it lifted it before), until confirmed.
        ([*OLD_PROVENANCE[:2], {"origin": "extraction-user", "at": "2025-01-04T00:00:00Z",
                                "session": "s-2", "offsets": [3]}], True),
    ],
)  # fmt: skip
def test_provenance_stored_before_attested_reads_the_same(
    store: Any, provenance: list[dict[str, Any]], held: bool
) -> None:
    """Sources stored without ``attested`` read back as they were written (every field,
    in order); held or not is decided by the rule on their order."""
    _store_old(store, provenance)
    doc = store.get("Old")
    assert provenance_json(store.provenance_of(doc)) == provenance
    assert provenance_json(parse_provenance(provenance)) == provenance
    assert doc.quarantined is held
    assert store.quarantined_paths() == ({doc.rel_path} if held else set())

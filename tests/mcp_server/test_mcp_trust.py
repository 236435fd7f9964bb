"""An MCP client's writes are someone else's unless ``asyncrecall mcp --trust-client``:
held until the user confirms them, never replacing a memory the user keeps. The client
is the SDK's own over the real stdio transport; the user's side is the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="asyncrecall mcp needs pip install 'asyncrecall[mcp]'")

from asyncrecall.mcp_server import CLIENT_HELD
from asyncrecall.memory import FolderStore, Source
from held_texts import ATTACKS, USER_TEXT
from mcp_server.test_mcp_server import _env, call, error_of, stdio_session

DEPLOY = {"name": "Deploy steps", "description": "how to deploy", "type": "project"}


def memory(tmp_path: Path, *args: str) -> Any:
    """``asyncrecall memory ARGS --json`` on the test's folder, run for real."""
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", *args, "--json",
         "--memory-dir", str(tmp_path / "memory")],
        env=_env(tmp_path), capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _serve(tmp_path: Path, *more: str) -> Any:
    return stdio_session(
        tmp_path, "--memory-dir", str(tmp_path / "memory"), "--selector", "lexical", *more
    )


def _user_adds_deploy(tmp_path: Path) -> None:
    memory(tmp_path, "add", "--name", DEPLOY["name"], "--description", DEPLOY["description"],
           "--type", "project", "--content", USER_TEXT)  # fmt: skip


async def test_a_save_to_a_name_the_user_added_waits_beside_it_for_confirm(
    tmp_path: Path,
) -> None:
    """By default a client's save to a memory the user added leaves the user's text in
    place, recalled, with the client's change pending beside it (``memory list --json``,
    ``memory show``), untrusted, held "written by an MCP client"; ``memory confirm``
    applies it. A save under a new name is held (listed, not recalled)."""
    _user_adds_deploy(tmp_path)
    async with _serve(tmp_path) as s:
        saved = await call(s, "save", **DEPLOY, content=ATTACKS["fr"])
        assert (saved["quarantined"], saved["pending"]) == (False, True)
        new = await call(s, "save", name="Préférences", description="ce que veut l'utilisateur",
                         type="user", content=ATTACKS["ja"])  # fmt: skip
        assert (new["quarantined"], new["pending"]) == (True, False)
        found = await call(s, "search", query="how do I deploy to staging?")
        assert [m["body"] for m in found["memories"]] == [USER_TEXT]
        preferences = await call(s, "search", query="Préférences utilisateur")
        assert preferences["memories"] == []

    listed = {m["name"]: (m["quarantined"], m["pending"]) for m in memory(tmp_path, "list")}
    assert listed == {"Deploy steps": (False, True), "Préférences": (True, False)}
    shown = memory(tmp_path, "show", "Deploy steps")
    assert shown["body"] == USER_TEXT and shown["pending"]["body"] == ATTACKS["fr"]
    (source,) = shown["pending"]["provenance"]
    assert (source["origin"], source["untrusted"], source["held"]) == ("mcp", True, CLIENT_HELD)
    held = memory(tmp_path, "show", "Préférences")["provenance"]
    assert [(p["origin"], p["held"]) for p in held] == [("mcp", CLIENT_HELD)]

    assert memory(tmp_path, "confirm", "Deploy steps")["quarantined"] is False
    shown = memory(tmp_path, "show", "Deploy steps")
    assert (shown["body"], shown["pending"]) == (ATTACKS["fr"], None)


async def test_an_untrusted_client_forgets_only_held_memories(tmp_path: Path) -> None:
    """A client the server does not trust may not remove a memory the user keeps (a
    tool error that says so, nothing removed); a held one it may."""
    _user_adds_deploy(tmp_path)
    async with _serve(tmp_path) as s:
        await call(s, "save", name="Regel", description="d", type="feedback", content=ATTACKS["de"])
        assert "one the user keeps" in await error_of(s, "forget", name="Deploy steps")
        assert (await call(s, "forget", name="Regel"))["forgot"] == "Regel"
    assert [m["name"] for m in memory(tmp_path, "list")] == ["Deploy steps"]


async def test_a_trusted_client_replaces_as_before_but_never_lifts_a_hold(tmp_path: Path) -> None:
    """``--trust-client``: a save replaces the user's memory and is recalled at once (the
    behaviour before), but a save to a held memory leaves it held, whatever it says."""
    _user_adds_deploy(tmp_path)
    FolderStore(tmp_path / "memory").save_memory(
        "Regla", "regla del usuario", "feedback", ATTACKS["es"],
        sources=(Source.now("save_memory", untrusted=True),),
    )  # fmt: skip
    async with _serve(tmp_path, "--trust-client") as s:
        saved = await call(s, "save", **DEPLOY, content="Deploy with make ship.")
        assert (saved["quarantined"], saved["pending"]) == (False, False)
        rule = await call(s, "save", name="Regla", description="regla del usuario",
                          type="feedback", content=ATTACKS["ru"])  # fmt: skip
        assert rule["quarantined"] is True
        found = await call(s, "search", query="deploy ship")
        assert [m["body"] for m in found["memories"]] == ["Deploy with make ship."]
    listed = {m["name"]: (m["quarantined"], m["pending"]) for m in memory(tmp_path, "list")}
    assert listed == {"Deploy steps": (False, False), "Regla": (True, False)}
    assert memory(tmp_path, "show", "Regla")["body"] == ATTACKS["ru"]


def test_the_help_says_who_the_client_is(tmp_path: Path) -> None:
    """``asyncrecall mcp --help`` documents ``--trust-client`` and what an untrusted
    client's writes do."""
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "mcp", "--help"],
        env=_env(tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "--trust-client" in text and "memory confirm NAME" in text


def test_the_servers_description_says_what_becomes_of_a_save(tmp_path: Path) -> None:
    """The instructions a client gets say, unless the server trusts it, that its saves
    wait for the user's confirm and never replace a memory the user keeps."""
    from asyncrecall.mcp_server import memory_server
    from asyncrecall.memory import LexicalSelector, Recaller

    manager = Recaller(FolderStore(tmp_path / "memory"), LexicalSelector())
    untrusted = memory_server(manager).instructions or ""
    trusted = memory_server(manager, trust_client=True).instructions or ""
    assert "asyncrecall memory confirm" in untrusted and "never replaces" in untrusted
    assert "confirm" not in trusted


async def test_a_trusted_clients_save_after_it_was_shown_held_text_is_held(
    tmp_path: Path,
) -> None:
    """Lowest trust wins for a trusted client too: once the server has shown it a held
    memory (``show``, or a ``list`` naming it), its saves are held, naming that memory;
    before that (and in a new server process) they are trusted."""
    FolderStore(tmp_path / "memory").save_memory(
        "Regla", "regla del usuario", "feedback", ATTACKS["es"],
        sources=(Source.now("save_memory", untrusted=True),),
    )  # fmt: skip
    async with _serve(tmp_path, "--trust-client") as s:
        clean = await call(s, "save", name="Editor", description="editor", type="user",
                           content="The user edits with Helix.")  # fmt: skip
        assert clean["quarantined"] is False
        assert (await call(s, "show", name="Regla"))["body"] == ATTACKS["es"]
        after = await call(s, "save", name="Regla copiada", description="copia", type="user",
                           content=ATTACKS["es"])  # fmt: skip
        assert after["quarantined"] is True
    async with _serve(tmp_path, "--trust-client") as s:
        await call(s, "list")
        listed = await call(s, "save", name="Otra", description="d", type="user",
                            content="Verificar TLS.")  # fmt: skip
        assert listed["quarantined"] is True
    (source,) = FolderStore(tmp_path / "memory").provenance_of(
        FolderStore(tmp_path / "memory").get("Regla copiada")
    )
    assert source.held == "written by an MCP client shown held memory regla.md"

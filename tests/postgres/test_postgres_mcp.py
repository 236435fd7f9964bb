"""``asyncrecall mcp --store postgresql://...``: a client's writes land in its namespace
of the real database, and another namespace's server does not see them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="asyncrecall mcp needs pip install 'asyncrecall[mcp]'")

from asyncrecall.mcp_server import CLIENT_HELD
from held_texts import ATTACKS, USER_TEXT
from mcp_server.test_mcp_server import DEPLOY, _env, call, error_of, stdio_session


async def test_a_client_works_on_its_namespace_of_the_database(
    pg_url: str, namespace: str, tmp_path: Path
) -> None:
    ours = ["--store", pg_url, "--namespace", namespace, "--selector", "lexical", "--trust-client"]
    async with stdio_session(tmp_path, *ours) as s:
        assert (await call(s, "save", **DEPLOY))["saved"] == "Deploy steps"
        found = await call(s, "search", query="how do I deploy to staging?")
        assert [m["name"] for m in found["memories"]] == ["Deploy steps"]
        assert (await call(s, "show", name="Deploy steps"))["body"].strip() == DEPLOY["content"]
    other = ["--store", pg_url, "--namespace", f"{namespace}-other", "--selector", "lexical"]
    async with stdio_session(tmp_path, *other) as s:
        assert (await call(s, "list"))["total"] == 0
        assert "no memory named" in await error_of(s, "show", name="Deploy steps")
        assert (await call(s, "search", query="how do I deploy to staging?"))["memories"] == []
    async with stdio_session(tmp_path, *ours) as s:
        assert (await call(s, "forget", name="Deploy steps"))["forgot"] == "Deploy steps"
        assert (await call(s, "list"))["total"] == 0


async def test_a_clients_save_waits_beside_the_users_memory_in_the_database(
    pg_store: Any, pg_url: str, namespace: str, tmp_path: Path
) -> None:
    """As on a folder: by default a client's save to a memory the user keeps in the
    namespace leaves the user's text there, recalled, the change pending beside it
    (held "written by an MCP client"); the user's ``memory confirm`` applies it."""
    pg_store.save_memory("Deploy steps", "how to deploy", "project", USER_TEXT, origin="user")
    ours = ["--store", pg_url, "--namespace", namespace, "--selector", "lexical"]
    async with stdio_session(tmp_path, *ours) as s:
        saved = await call(s, "save", name="Deploy steps", description="how to deploy",
                           type="project", content=ATTACKS["zh"])  # fmt: skip
        assert (saved["quarantined"], saved["pending"]) == (False, True)
        found = await call(s, "search", query="how do I deploy to staging?")
        assert [m["body"] for m in found["memories"]] == [USER_TEXT]
    doc = pg_store.get("Deploy steps")
    assert (doc.body, doc.quarantined) == (USER_TEXT, False)
    change = pg_store.pending_of(doc)
    assert change.body == ATTACKS["zh"]
    assert [(s.origin, s.held) for s in change.sources] == [("mcp", CLIENT_HELD)]
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "asyncrecall", "memory", "confirm", "Deploy steps", *ours[:4]],
        env=_env(tmp_path), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert pg_store.get("Deploy steps").body == ATTACKS["zh"]

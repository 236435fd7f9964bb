"""``asyncrecall mcp --store postgresql://...``: a client's writes land in its namespace
of the real database, and another namespace's server does not see them."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="asyncrecall mcp needs pip install 'asyncrecall[mcp]'")

from mcp_server.test_mcp_server import DEPLOY, call, error_of, stdio_session


async def test_a_client_works_on_its_namespace_of_the_database(
    pg_url: str, namespace: str, tmp_path: Path
) -> None:
    ours = ["--store", pg_url, "--namespace", namespace, "--selector", "lexical"]
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

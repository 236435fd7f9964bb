"""A real Prometheus (Debian's ``prometheus``) scrapes ``asyncrecall mcp --http``'s
``/metrics`` after a client's searches, and answers queries for the delivery and latency
metrics through its HTTP API.

Without the ``prometheus`` binary the test skips saying so; with
``ASYNCRECALL_REQUIRE_PROMETHEUS=1`` (CI) that is an error instead."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="asyncrecall mcp needs pip install 'asyncrecall[mcp]'")
pytest.importorskip("prometheus_client", reason="/metrics needs pip install 'asyncrecall[otel]'")

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from asyncrecall.memory import FolderStore

REQUIRE = os.environ.get("ASYNCRECALL_REQUIRE_PROMETHEUS") == "1"
HANG_GUARD = 60.0


def _prometheus() -> str:
    found = shutil.which("prometheus")
    if found is None:
        message = "no prometheus binary (Debian: apt-get install prometheus)"
        if REQUIRE:
            pytest.fail(f"{message} (ASYNCRECALL_REQUIRE_PROMETHEUS=1 makes this an error)")
        pytest.skip(message)
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _until(what: str, check: Any, process: subprocess.Popen[Any], log: Path) -> Any:
    """Poll ``check`` until it answers something true (a hang guard only)."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        found = check()
        if found:
            return found
        assert process.poll() is None, f"{what}: the process ended\n{log.read_text()}"
        assert time.monotonic() < deadline, f"{what}: not within {HANG_GUARD} s\n{log.read_text()}"
        time.sleep(0.1)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def mcp_http(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """``asyncrecall mcp --http`` on a free port over a folder with one memory."""
    memory = tmp_path / "memory"
    store = FolderStore(memory)
    store.ensure()
    store.save_memory(
        "Deploy steps", "how to deploy the service to staging", "project",
        "Run make deploy with STAGE=staging first.", origin="user",
    )  # fmt: skip
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ASYNCRECALL_", "OTEL_"))
    }
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    log = tmp_path / "mcp-stderr.txt"
    with log.open("w") as err, subprocess.Popen(
        [sys.executable, "-m", "asyncrecall", "mcp", "--http", "--port", str(port),
         "--memory-dir", str(memory), "--selector", "lexical"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
    ) as server:  # fmt: skip
        try:
            _until("mcp --http listening", lambda: _listening(port), server, log)
            yield port, log
        finally:
            server.terminate()
            server.wait(timeout=HANG_GUARD)


def _ready(port: int) -> bool:
    """Prometheus answers queries (``/-/ready``: 503 while it starts)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=10) as answer:
            return bool(answer.status == 200)
    except OSError:  # not listening yet, or 503
        return False


def _query(port: int, promql: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


async def _search_twice(url: str) -> tuple[str, str]:
    """Two searches through the MCP SDK's client: one finds the memory, one nothing."""
    async with (
        streamable_http_client(url) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        found = await session.call_tool("search", {"query": "how do I deploy to staging?"})
        none = await session.call_tool("search", {"query": "favourite pizza topping tonight"})
    return str(found.content), str(none.content)


def test_prometheus_scrapes_delivery_and_latency_from_mcp_http(
    mcp_http: tuple[int, Path], tmp_path: Path
) -> None:
    """``mcp --http`` serves ``/metrics`` in the Prometheus text format: after two
    searches (one finds the memory, one finds nothing), a real Prometheus scraping it
    holds ``asyncrecall_recall_deliveries_total`` by point (``search``: 1, ``none``: 1)
    and the added-latency histogram's count (2)."""
    binary = _prometheus()
    mcp_port, mcp_log = mcp_http
    assert f"metrics on http://127.0.0.1:{mcp_port}/metrics" in mcp_log.read_text()
    found, none = asyncio.run(_search_twice(f"http://127.0.0.1:{mcp_port}/mcp"))
    assert "deploy-steps.md" in found and "deploy-steps.md" not in none

    port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: asyncrecall\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{mcp_port}']\n",
        encoding="utf-8",
    )
    log = tmp_path / "prometheus-stderr.txt"
    with log.open("w") as err, subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdin=subprocess.DEVNULL, stdout=err, stderr=err,
    ) as prometheus:  # fmt: skip
        try:
            deliveries = _until(
                "a scrape with the deliveries",
                lambda: _ready(port) and _query(port, "asyncrecall_recall_deliveries_total"),
                prometheus,
                log,
            )
            latency = _query(port, "asyncrecall_recall_latency_added_seconds_count")
            up = _query(port, 'up{job="asyncrecall"}')
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=HANG_GUARD)
    by_point = {r["metric"]["asyncrecall_delivery_point"]: float(r["value"][1]) for r in deliveries}
    assert by_point == {"search": 1.0, "none": 1.0}
    assert [float(r["value"][1]) for r in latency] == [2.0]
    assert latency[0]["metric"]["asyncrecall_delivery_point"] == "search"
    assert [r["value"][1] for r in up] == ["1"]

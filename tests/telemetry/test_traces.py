"""OpenTelemetry from the real command line: ``asyncrecall run`` with one tool round
exports its spans and metrics to a local OTLP/HTTP receiver; with no endpoint set,
nothing of OpenTelemetry is even imported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore
from asyncrecall.testing import LocalServer, Reply
from telemetry.conftest import Receiver, Span

HANG_GUARD = 120


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("the staging cluster is called blue\n")
    return root


@pytest.fixture
def memory_dir(tmp_path: Path) -> Path:
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    store.save_memory(
        "deploy-flow", "deploys go through staging first", "project", "Use blue.", origin="user"
    )
    return store.root


def _command(server: LocalServer, project: Path, memory_dir: Path, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "asyncrecall", *args,
        "--base-url", server.base_url, "--api-key", "test", "--model", "main",
        "--side-model", "side", "--project", str(project), "--memory-dir", str(memory_dir),
        "--no-extract",
    ]  # fmt: skip


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ASYNCRECALL_", "OTEL_"))
    }
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    env.update(extra)
    return env


def _script_one_tool_round(server: LocalServer, rel: str) -> threading.Thread:
    """The side query answers once the user-query request is out, and the model's tool
    call once the side query has answered: the recall lands at the tool result."""
    side_release, tool_call_release = threading.Event(), threading.Event()
    server.script("side", Reply(json={"selected_memories": [rel]}, gate=side_release))
    main_replies = iter(
        [
            Reply(tool_calls=[("read_file", {"path": "notes.txt"})], gate=tool_call_release),
            Reply(text="blue"),
        ]
    )

    def main_reply(request: Any) -> Reply:
        side_release.set()
        return next(main_replies)

    server.set_default("main", main_reply)

    def release() -> None:
        server.wait_for(
            lambda r: r.model == "side" and r.finished_at is not None, timeout=HANG_GUARD
        )
        tool_call_release.set()

    releaser = threading.Thread(target=release, daemon=True)
    releaser.start()
    return releaser


def _one(spans: list[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def test_run_with_one_tool_round_exports_nested_spans_and_metrics(
    local_server: LocalServer,
    project: Path,
    memory_dir: Path,
    tmp_path: Path,
    otlp_receiver: Receiver,
) -> None:
    """With ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, ``run`` exports (before it exits) the
    query's ``invoke_agent`` span; under it the recall's span saying where its memory
    went, what it selected and the latency it added; under that the side query as a
    GenAI client span with its model and token usage; and the delivery and latency
    metrics."""
    rel = FolderStore(memory_dir).scan()[0].rel_path
    releaser = _script_one_tool_round(local_server, rel)
    done = subprocess.run(
        _command(local_server, project, memory_dir, "run", "which cluster?",
                 "--output-format", "json"),
        capture_output=True, text=True, timeout=HANG_GUARD,
        env=_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=otlp_receiver.endpoint),
    )  # fmt: skip
    releaser.join(timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "blue"

    spans = otlp_receiver.spans
    query = _one(spans, "invoke_agent asyncrecall")
    recall = _one(spans, "asyncrecall.recall")
    side = _one(spans, "chat side")
    assert query.parent_span_id == b""
    assert recall.parent_span_id == query.span_id
    assert side.parent_span_id == recall.span_id
    assert {s.trace_id for s in (query, recall, side)} == {query.trace_id}
    assert query.resource["service.name"] == "asyncrecall"
    assert query.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert query.attributes["gen_ai.request.model"] == "main"

    attributes = recall.attributes
    assert attributes["asyncrecall.delivery.point"] == "tool_result"
    assert attributes["asyncrecall.recall.strategy"] == "model"
    assert attributes["asyncrecall.recall.selected"] == 1
    assert attributes["asyncrecall.recall.abstained"] is False
    assert attributes["asyncrecall.recall.injected"] == 1
    assert attributes["asyncrecall.recall.prompt_id"]
    assert (
        0
        <= attributes["asyncrecall.recall.latency_added_ms"]
        < attributes["asyncrecall.recall.settle_ms"]
    )
    events = [name for name, _ in recall.events]
    assert events.index("settled") < events.index("memory_injected")
    takes = [e for name, e in recall.events if name == "take"]
    assert [(t["asyncrecall.delivery.point"], t["asyncrecall.take.outcome"]) for t in takes] == [
        ("user_query", "not_settled"),
        ("tool_result", "injected"),
    ]

    assert side.kind == 3  # SPAN_KIND_CLIENT
    assert side.attributes["gen_ai.operation.name"] == "chat"
    assert side.attributes["gen_ai.request.model"] == "side"
    assert side.attributes["gen_ai.usage.input_tokens"] > 0
    assert side.attributes["gen_ai.usage.output_tokens"] > 0
    assert side.attributes["server.address"] == "127.0.0.1"

    deliveries = otlp_receiver.metrics["asyncrecall.recall.deliveries"]
    assert [(a["asyncrecall.delivery.point"], n) for a, n in deliveries] == [("tool_result", 1)]
    added = otlp_receiver.metrics["asyncrecall.recall.latency_added"]
    assert [(a["asyncrecall.delivery.point"], n) for a, n in added] == [("user_query", 1)]
    assert otlp_receiver.metrics["gen_ai.client.operation.duration"][0][1] == 1


def test_without_an_endpoint_nothing_of_opentelemetry_is_imported(
    local_server: LocalServer, project: Path, memory_dir: Path, tmp_path: Path
) -> None:
    """Off unless turned on: with no ``OTEL_*`` endpoint and no ``otel`` setting, a
    ``run`` whose recall injects memory imports no OpenTelemetry module at all (the
    API is installed here), and the library's check found nothing to report to."""
    rel = FolderStore(memory_dir).scan()[0].rel_path
    local_server.script("side", Reply(json={"selected_memories": [rel]}))
    local_server.script("main", "blue")
    argv = _command(local_server, project, memory_dir, "run", "which cluster?",
                    "--output-format", "stream-json")[3:]  # fmt: skip
    script = textwrap.dedent(
        f"""
        import json, sys
        from asyncrecall.cli import main
        code = main({argv!r})
        from asyncrecall import _telemetry
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        print(json.dumps({{"code": code, "loaded": loaded, "on": _telemetry._on is not None}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True,
        env=_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    outcome = json.loads(lines[-1])
    assert outcome == {"code": 0, "loaded": [], "on": False}
    assert any(json.loads(line)["type"] == "memory_recall_started" for line in lines[:-1])


def test_otel_asked_for_without_the_sdk_is_one_line_and_exit_2(
    local_server: LocalServer, project: Path, memory_dir: Path, tmp_path: Path
) -> None:
    """``ASYNCRECALL_OTEL=1`` where the SDK cannot be imported: one line on stderr naming
    the extra, exit 2, nothing sent; the same missing SDK with only the standard
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` set is one warning line and the query runs."""
    shadow = tmp_path / "shadow" / "opentelemetry" / "sdk"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no SDK here')\n")
    path = os.pathsep.join([str(tmp_path / "shadow"), *sys.path])
    argv = _command(local_server, project, memory_dir, "run", "which cluster?")

    asked = subprocess.run(
        argv, capture_output=True, text=True, timeout=HANG_GUARD,
        env=_env(tmp_path, ASYNCRECALL_OTEL="1", PYTHONPATH=path),
    )  # fmt: skip
    assert asked.returncode == 2
    assert asked.stderr.count("\n") == 1
    assert "pip install 'asyncrecall[otel]'" in asked.stderr
    assert local_server.requests == []

    local_server.script("main", "blue")
    local_server.set_default("side", Reply(json={"selected_memories": []}))
    by_environment = subprocess.run(
        argv, capture_output=True, text=True, timeout=HANG_GUARD,
        env=_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", PYTHONPATH=path),
    )  # fmt: skip
    assert by_environment.returncode == 0, by_environment.stderr
    assert by_environment.stdout.strip() == "blue"
    assert by_environment.stderr.count("OTEL_EXPORTER_OTLP_ENDPOINT is set") == 1


def test_a_run_ended_by_sigterm_still_exports_its_spans(
    local_server: LocalServer,
    project: Path,
    memory_dir: Path,
    tmp_path: Path,
    otlp_receiver: Receiver,
) -> None:
    """Flushed on every way out: a ``run`` ended by ``SIGTERM`` while the model and the
    side query hang exits 143 and has exported, before it ended, its query's span and the
    recall's: the instant pass's memory went on the first request, and the model's pick,
    cut short by the cancel, was dropped as cancelled."""
    local_server.script("side", Reply(json={"selected_memories": []}, hang=True))
    local_server.script("main", Reply(text="never", hang=True))
    process = subprocess.Popen(
        _command(local_server, project, memory_dir, "run", "which cluster is staging?"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=otlp_receiver.endpoint),
    )  # fmt: skip
    try:
        local_server.wait_for(lambda r: r.model == "main", timeout=HANG_GUARD)
        local_server.wait_for(lambda r: r.model == "side", timeout=HANG_GUARD)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=HANG_GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 143, err
    query = _one(otlp_receiver.spans, "invoke_agent asyncrecall")
    recall = _one(otlp_receiver.spans, "asyncrecall.recall")
    assert recall.parent_span_id == query.span_id
    assert recall.attributes["asyncrecall.delivery.point"] == "user_query"
    events = dict(recall.events)
    assert events["memory_injected"]["asyncrecall.strategy"] == "instant-lexical"
    assert events["memory_discarded"]["asyncrecall.reason"] == "cancelled"

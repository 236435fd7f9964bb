"""Extraction, consolidation and store operations as spans and metrics, in a fresh
process whose application set OpenTelemetry's SDK up (in-memory exporter and reader):
the side query's GenAI span nests under the extraction's and the consolidation's, and a
held save and a confirm are counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs pip install 'asyncrecall[otel]'")

SCRIPT = """
import asyncio, json, sys
from pathlib import Path
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

from asyncrecall.memory import FolderStore, MemoryExtractor, TranscriptTurn, consolidate
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, Reply

PROPOSAL = {"action": "create", "path": "", "name": "Staging cluster", "type": "project",
            "description": "the staging cluster's name",
            "content": "The staging cluster is called blue.", "source_offsets": [0, 1]}


async def main() -> None:
    store = FolderStore(Path(sys.argv[1]))
    store.ensure()
    with LocalServer() as server:
        server.script("side", Reply(json={"memories": [PROPOSAL]}), Reply(json={"actions": []}))
        async with OpenAIModel(model="side", base_url=server.base_url, api_key="-",
                               max_retries=0) as side:
            turns = [TranscriptTurn(0, "user", "staging is called blue"),
                     TranscriptTurn(1, "assistant", "noted")]
            await MemoryExtractor(store, side).extract("s1", turns)
            for name in ("Office", "Office location"):  # something to consolidate
                store.save_memory(name, "where the office is", "user", "Berlin.", origin="user")
            await consolidate(store, side)
    store.save_memory("Editor", "the editor to use", "user", "Use vim.")  # untrusted: held
    store.confirm("Editor")
    for span in exporter.get_finished_spans():
        print(json.dumps({"span": span.name, "id": span.context.span_id,
                          "parent": span.parent.span_id if span.parent else None,
                          "attributes": dict(span.attributes)}))
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    print(json.dumps({"metric": metric.name, "attributes": dict(point.attributes),
                                      "value": value if value is not None else point.count}))


asyncio.run(main())
"""


def test_extraction_consolidation_and_store_operations_are_traced_and_counted(
    tmp_path: Path,
) -> None:
    """``asyncrecall.extraction`` (with what it created) and ``asyncrecall.consolidation``
    spans each parent their side query's ``chat side`` span; a save and a confirm are
    ``asyncrecall.store.*`` spans with their store's kind, timed in
    ``asyncrecall.store.operation.duration``; the untrusted save is one hold and the
    confirm one confirm."""
    script = tmp_path / "app.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "memory")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    spans = [line for line in lines if "span" in line]
    points = [line for line in lines if "metric" in line]

    extraction = next(s for s in spans if s["span"] == "asyncrecall.extraction")
    consolidation = next(s for s in spans if s["span"] == "asyncrecall.consolidation")
    sides = [s for s in spans if s["span"] == "chat side"]
    assert sorted(s["parent"] for s in sides) == sorted([extraction["id"], consolidation["id"]])
    assert extraction["attributes"]["asyncrecall.extraction.created"] == 1
    assert extraction["attributes"]["asyncrecall.extraction.session_id"] == "s1"
    assert consolidation["attributes"]["asyncrecall.consolidation.actions"] == 0

    save = next(s for s in spans if s["span"] == "asyncrecall.store.save_memory")
    assert save["attributes"]["asyncrecall.store.kind"] == "FolderStore"
    assert any(s["span"] == "asyncrecall.store.confirm" for s in spans)
    timed = {
        p["attributes"]["asyncrecall.store.operation"]
        for p in points
        if p["metric"] == "asyncrecall.store.operation.duration"
    }
    assert {"save_memory", "confirm"} <= timed
    assert [p["value"] for p in points if p["metric"] == "asyncrecall.memory.holds"] == [1]
    assert [p["value"] for p in points if p["metric"] == "asyncrecall.memory.confirms"] == [1]

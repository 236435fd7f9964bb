"""The library's spans nest under the framework's: a Pydantic AI run instrumented through
OpenTelemetry (the application's own tracer provider, set in a fresh process) is the
parent of the recall's span."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai", reason="needs pip install 'asyncrecall[pydantic-ai]'")
pytest.importorskip("opentelemetry.sdk", reason="needs pip install 'asyncrecall[otel]'")

# Run in its own process: a global tracer provider can be set once per process.
SCRIPT = """
import asyncio, json, sys
from pathlib import Path
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from asyncrecall import FolderStore, LexicalSelector, RecallPrefetcher, Recaller
from asyncrecall.integrations.pydantic_ai import AsyncRecall
from asyncrecall.testing import LocalServer, Reply


async def main() -> None:
    store = FolderStore(Path(sys.argv[1]))
    store.save_memory("db-tests", "integration tests hit a real database", "feedback",
                      "No mocks.", origin="user")
    with LocalServer() as server:
        server.script("main", Reply(text="Use the real test database."))
        async with (
            AsyncOpenAI(base_url=server.base_url, api_key="-") as client,
            RecallPrefetcher(Recaller(store, LexicalSelector())) as prefetcher,
        ):
            await prefetcher.warm()
            model = OpenAIChatModel("main", provider=OpenAIProvider(openai_client=client))
            agent = Agent(model, capabilities=[AsyncRecall(prefetcher)])
            agent.instrument = True
            await agent.run("how should I test the database?", conversation_id="t1")
    for span in exporter.get_finished_spans():
        print(json.dumps({
            "name": span.name,
            "id": span.context.span_id,
            "parent": span.parent.span_id if span.parent else None,
            "attributes": dict(span.attributes),
        }))


asyncio.run(main())
"""


def test_the_recall_span_is_a_child_of_the_pydantic_ai_run(tmp_path: Path) -> None:
    """With the application's tracer provider set and Pydantic AI instrumented, the
    recall's ``asyncrecall.recall`` span is a child of Pydantic AI's ``invoke_agent``
    span, and says its memory went on the run's first request (``user_query``)."""
    script = tmp_path / "app.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "memory")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spans = [json.loads(line) for line in done.stdout.splitlines()]
    by_name = {span["name"]: span for span in spans}
    run = next(span for span in spans if span["name"].startswith("invoke_agent"))
    recall = by_name["asyncrecall.recall"]
    assert recall["parent"] == run["id"]
    assert recall["attributes"]["asyncrecall.delivery.point"] == "user_query"
    assert recall["attributes"]["asyncrecall.recall.strategy"] == "lexical"

"""``asyncrecall bench extract --latency N``: does extraction delay the next user query?

Two sessions over one :class:`~asyncrecall.testing.LocalServer`, identical but for
extraction (on / off), each with a seeded memory folder, run ``N`` user queries back to
back, alternating between the two so both see the same machine load. The side model
answers extraction slowly (``--extraction-ms``, default 300 ms), so with extraction on
one is always out when the next query starts. Measured per query, from the server's
record: the time from the query's start to its first main-model request arriving
(what extraction could delay), median per mode, and the ratio on/off.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncrecall.cli._settings import Settings

__all__ = ["LatencyReport", "measure"]


@dataclass(frozen=True, slots=True)
class LatencyReport:
    """Median milliseconds from a query's start to its first main request, per mode."""

    queries: int
    median_ms_off: float
    median_ms_on: float
    extractions_out: int

    @property
    def ratio(self) -> float:
        return self.median_ms_on / self.median_ms_off if self.median_ms_off else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "median_first_request_ms_extraction_off": round(self.median_ms_off, 3),
            "median_first_request_ms_extraction_on": round(self.median_ms_on, 3),
            "ratio_on_off": round(self.ratio, 3),
            "queries_started_with_an_extraction_out": self.extractions_out,
        }


async def measure(queries: int, *, extraction_ms: float = 300.0) -> LatencyReport:
    """Run the side-by-side measurement (see the module doc)."""
    from asyncrecall.cli._session import open_session
    from asyncrecall.testing import LocalServer, RecordedRequest, Reply
    from asyncrecall_bench._corpus import MEMORIES, build_memory_folder

    counter = iter(range(1_000_000))

    def side(record: RecordedRequest) -> Reply:
        if "memory_extraction" in str(record.body.get("response_format")):
            n = next(counter)
            memory = {"action": "create", "path": "", "name": f"Fact {n}",
                      "description": "a fact", "type": "project", "content": f"Fact {n}.",
                      "source_offsets": [0]}  # fmt: skip
            prompt = str(record.messages[-1].get("content", ""))
            first = prompt.split("New conversation turns:\n[", 1)[-1].split("]", 1)[0]
            memory["source_offsets"] = [int(first)] if first.isdigit() else []
            return Reply(json={"memories": [memory]}, first_token_delay=extraction_ms / 1000)
        return Reply(json={"selected_memories": []})

    times: dict[bool, list[float]] = {False: [], True: []}
    out = 0
    with (
        tempfile.TemporaryDirectory(prefix="asyncrecall-extract-latency-") as tmp,
        LocalServer() as server,
    ):
        server.set_default("main", Reply(text="ok"))
        server.set_default("side", side)
        sessions = {}
        for on in (False, True):
            folder = Path(tmp) / ("on" if on else "off")
            build_memory_folder(folder / "memory", MEMORIES[:10])
            (folder / "project").mkdir()
            settings = Settings(
                base_url=server.base_url, api_key="x", model="main", side_model="side",
                memory_dir=folder / "memory", project=folder / "project",
                home=folder / "home", extract=on,
            )  # fmt: skip
            sessions[on] = open_session(settings)
        try:
            for i in range(queries * 2):
                on = bool(i % 2)
                session = sessions[on]
                if on and session.extraction is not None and session.extraction.running:
                    out += 1
                seen = len(server.requests)
                started = time.monotonic()
                await session.agent.ask(f"question {i}: how do we deploy?")
                first = next(
                    r for r in server.requests[seen:] if r.model == "main" and not r.is_side_query
                )
                times[on].append((first.arrived_at - started) * 1000)
        finally:
            for session in sessions.values():
                await session.aclose()
    return LatencyReport(
        queries=queries,
        median_ms_off=statistics.median(times[False]),
        median_ms_on=statistics.median(times[True]),
        extractions_out=out,
    )


def run_latency(queries: int, settings: Settings, *, as_json: bool) -> int:
    import json

    from rich.console import Console

    report = asyncio.run(measure(queries))
    console = Console()
    if as_json:
        console.print_json(json.dumps(report.as_json()))
        return 0
    console.print(
        f"{queries} queries per mode: first main request after {report.median_ms_off:.2f} ms "
        f"(extraction off) vs {report.median_ms_on:.2f} ms (on), ratio {report.ratio:.2f}; "
        f"{report.extractions_out} queries started with an extraction out"
    )
    return 0

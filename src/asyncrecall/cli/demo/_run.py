"""Run the demo session in each mode (blocking, async, the default async+lexical) and
keep what was measured."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from asyncrecall.agent import RecallMode
from asyncrecall.cli._session import open_session
from asyncrecall.cli._settings import Settings
from asyncrecall.cli.demo._scenario import SCRIPT, DemoQuery, build_project, install_script
from asyncrecall.cli.demo._trace import QueryTrace, trace_query
from asyncrecall.models import open_openai_models
from asyncrecall.testing import LocalServer, RecordedRequest, Reply

__all__ = ["DEFAULT_MODE", "DEMO_MODES", "DemoResult", "ModeRun", "run_demo"]

#: The old design, the design alone, and the default (the design plus the instant pass).
DEMO_MODES: tuple[RecallMode, ...] = ("blocking", "async", "async+lexical")
#: The mode the verdict compares with blocking: the default.
DEFAULT_MODE: RecallMode = "async+lexical"
_SETTLE_GUARD_S = 5.0


@dataclass(frozen=True, slots=True)
class ModeRun:
    """One mode's traces (one per query, in order) and its side queries' fate."""

    mode: RecallMode
    traces: Sequence[QueryTrace]
    side_queries: int
    side_cancelled: int


@dataclass(frozen=True, slots=True)
class DemoResult:
    """Everything the demo measured, and what it ran."""

    queries: Sequence[DemoQuery]
    runs: Sequence[ModeRun]
    memories: int


async def run_demo(*, on_query: Callable[[str, int], None] = lambda mode, n: None) -> DemoResult:
    """Build the throw-away project, start the server, run every mode; clean up after.

    ``on_query(mode, n)`` is called as query ``n`` (from 1) of ``mode`` starts.
    """
    with tempfile.TemporaryDirectory(prefix="asyncrecall-demo-") as tmp, LocalServer() as server:
        root = Path(tmp)
        project, memory_dir = root / "project", root / "memory"
        paths = build_project(project, memory_dir)
        await _warm_up(server)
        runs = []
        for mode in DEMO_MODES:
            runs.append(await _run_mode(server, mode, project, memory_dir, paths, on_query))
    return DemoResult(SCRIPT, runs, len(paths))


async def _warm_up(server: LocalServer) -> None:
    """One tiny request first: the HTTP client's first-use costs stay out of the timelines."""
    server.set_default("demo-warmup", Reply(json={"ok": True}))
    async with open_openai_models(model="demo-warmup", base_url=server.base_url) as pair:
        async for _ in pair.main.stream([]):
            pass
        await pair.side.generate_json(
            system="warm-up", prompt="warm-up", schema={"type": "object"}, schema_name="warmup"
        )


async def _run_mode(
    server: LocalServer,
    mode: RecallMode,
    project: Path,
    memory_dir: Path,
    paths: Mapping[str, str],
    on_query: Callable[[str, int], None],
) -> ModeRun:
    main, side = f"demo-main-{mode}", f"demo-side-{mode}"
    install_script(server, main=main, side=side, paths=paths)
    settings = Settings(
        memory_dir=memory_dir,
        selector="model",
        recall_mode=mode,
        project=project,
        home=project.parent / "home",
        # The demo shows recall; extraction (writing memories after each query) would
        # send side queries the script does not play, and write into the folder.
        extract=False,
    )
    traces = []
    async with open_openai_models(
        model=main, side_model=side, base_url=server.base_url, max_retries=0
    ) as pair:
        session = open_session(
            settings, model=pair.main, side_model=pair.side, semantic_instant=False
        )
        try:
            # As `asyncrecall run` reads the folder while it imports: warm before the
            # first query, so the default mode's instant pass is ready for it.
            await session.client.warm_memory()
            for n, query in enumerate(SCRIPT, 1):
                on_query(mode, n)
                traces.append(await trace_query(session.agent, query.text))
        finally:
            await session.aclose()
    side_records = await _settled(server, side)
    return ModeRun(mode, traces, len(side_records), sum(1 for r in side_records if r.disconnected))


async def _settled(server: LocalServer, model: str) -> list[RecordedRequest]:
    """``model``'s requests once each is complete or hung up (a hang-up is seen late)."""
    deadline = time.monotonic() + _SETTLE_GUARD_S
    while True:
        records = [r for r in server.requests if r.model == model]
        if all(r.settled for r in records) or time.monotonic() > deadline:
            return records
        await asyncio.sleep(0.01)

"""``asyncrecall bench extract``: memories written by extraction, judged by LoCoMo questions.

Each LoCoMo conversation is replayed as one session's transcript (every dialog turn,
session after session, as ``<speaker>: <text>``; the first speaker plays the user)
through :class:`~asyncrecall.memory.MemoryExtractor` into an empty memory folder, one
extraction every ``--every`` turns (the cursor carries over, as after each user query).
Then each question (category 5, adversarial, skipped) goes through recall (limit 5,
``--selector``, default lexical). A question's gold is the offsets of its evidence
dialog turns; a recalled memory covers the offsets in its ``source_offsets``.

Reported: ``questions``, ``recall_at_5`` (mean share of evidence turns covered by the
five recalled memories), ``hit_at_5`` (share of questions with one covered),
``memories`` written, ``extractions`` run, ``median_extraction_ms``, ``refused``.

``--scripted`` runs the side model as a :class:`~asyncrecall.testing.LocalServer` that
answers every extraction with one memory holding the slice's turns verbatim (a
raw-transcript baseline): the figures then show the benchmark's shape and the recall
of raw chunks, not the quality of a model. The real figure needs a capable endpoint.
The data is read by path, never copied (CC BY-NC 4.0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import (
    FolderStore,
    LexicalSelector,
    MemoryExtractor,
    ModelSelector,
    Recaller,
    Selector,
    TranscriptTurn,
    read_source_offsets,
)
from asyncrecall.memory.extraction._extract import TurnRole
from asyncrecall.models import Model
from asyncrecall_bench._locomo import _load
from asyncrecall_bench._quality import _endpoint_model, default_dataset

__all__ = ["ExtractReport", "add_arguments", "evaluate", "replay_turns", "run", "scripted_answer"]

_K = 5
_SESSION = "bench"


@dataclass(frozen=True, slots=True)
class ExtractReport:
    """The benchmark's figures."""

    questions: int
    recall_at_5: float
    hit_at_5: float
    memories: int
    extractions: int
    median_extraction_ms: float
    refused: int
    conversations: int
    side_model: str

    def as_json(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "recall_at_5": round(self.recall_at_5, 4),
            "hit_at_5": round(self.hit_at_5, 4),
            "memories": self.memories,
            "extractions": self.extractions,
            "median_extraction_ms": round(self.median_extraction_ms, 2),
            "refused": self.refused,
            "conversations": self.conversations,
            "side_model": self.side_model,
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", type=Path, metavar="FILE", help="LoCoMo-format JSON")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--every", type=int, default=10, metavar="N", help="turns per extraction (default 10)"
    )
    parser.add_argument(
        "--limit-conversations", type=int, metavar="N", help="replay the first N conversations"
    )
    parser.add_argument(
        "--latency",
        type=int,
        metavar="N",
        help="instead: N queries per mode, time to the first main request, extraction on vs off",
    )
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="a scripted side model on a local server (raw-transcript baseline, for shape)",
    )


def replay_turns(conversation: Mapping[str, Any]) -> tuple[list[TranscriptTurn], dict[str, int]]:
    """The conversation's dialog turns in order, and dialog id -> offset."""
    dialog: Mapping[str, Any] = conversation.get("conversation") or {}
    numbered = []
    for key, value in dialog.items():
        number = key.removeprefix("session_")
        if number.isdigit() and isinstance(value, list):
            numbered.append((int(number), value))
    first = str(dialog.get("speaker_a", ""))
    turns: list[TranscriptTurn] = []
    offsets: dict[str, int] = {}
    for _, session in sorted(numbered, key=lambda item: item[0]):
        for entry in session:
            if not isinstance(entry, Mapping):
                continue
            speaker = str(entry.get("speaker", ""))
            role: TurnRole = "user" if speaker == first or not first else "assistant"
            text = f"{speaker}: {entry.get('text', '')}"
            offsets[str(entry.get("dia_id", ""))] = len(turns)
            turns.append(TranscriptTurn(len(turns), role, text))
    return turns, offsets


def _chunks(turns: Sequence[TranscriptTurn], every: int) -> Iterator[int]:
    for end in range(every, len(turns) + every, every):
        yield min(end, len(turns))


def scripted_answer(prompt: str) -> dict[str, Any]:
    """The scripted side model: one memory holding the slice's turns verbatim."""
    lines = re.findall(r"^\[(\d+)\] (?:user|assistant): (.*)$", prompt, flags=re.MULTILINE)
    if not lines:
        return {"memories": []}
    offsets = [int(o) for o, _ in lines]
    content = "\n".join(text for _, text in lines)[:7_900]
    return {
        "memories": [
            {
                "action": "create",
                "path": "",
                "name": f"Turns {offsets[0]}-{offsets[-1]}",
                "description": lines[0][1][:200],
                "type": "project",
                "content": content,
                "source_offsets": offsets,
            }
        ]
    }


async def evaluate(
    conversations: Sequence[Mapping[str, Any]],
    side_model: Model,
    selector: Selector,
    *,
    every: int = 10,
    progress: bool = True,
) -> ExtractReport:
    """Replay, extract, then score recall of each question against its evidence turns."""
    recalls: list[float] = []
    hits: list[float] = []
    times_ms: list[float] = []
    memories = refused = 0
    with tempfile.TemporaryDirectory(prefix="asyncrecall-extract-") as tmp:
        for index, conversation in enumerate(conversations):
            store = FolderStore(Path(tmp) / f"{index:03d}" / "memory")
            store.ensure()
            extractor = MemoryExtractor(store, side_model)
            turns, offset_of = replay_turns(conversation)
            for end in _chunks(turns, every):
                started = time.perf_counter()
                result = await extractor.extract(_SESSION, turns[:end], end=end)
                if result.asked_model:
                    times_ms.append((time.perf_counter() - started) * 1000)
                refused += len(result.refused)
            docs = store.scan(limit=None)
            memories += len(docs)
            covered = {d.rel_path: set(read_source_offsets(d.path).get(_SESSION, ())) for d in docs}
            manager = Recaller(store, selector)
            for qa in conversation.get("qa") or []:
                if qa.get("category") == 5:
                    continue
                gold = {offset_of[e] for e in qa.get("evidence") or [] if e in offset_of}
                if not gold:
                    continue
                recall = await manager.recall(str(qa.get("question", "")), limit=_K)
                found: set[int] = set()
                for path in recall.paths:
                    found |= covered.get(path, set()) & gold
                recalls.append(len(found) / len(gold))
                hits.append(1.0 if found else 0.0)
            if progress:
                label = conversation.get("sample_id", index)
                sys.stderr.write(f"extract: {label}: {len(docs)} memories, {len(hits)} questions\n")
    count = len(recalls)
    return ExtractReport(
        questions=count,
        recall_at_5=sum(recalls) / count if count else 0.0,
        hit_at_5=sum(hits) / count if count else 0.0,
        memories=memories,
        extractions=len(times_ms),
        median_extraction_ms=statistics.median(times_ms) if times_ms else 0.0,
        refused=refused,
        conversations=len(conversations),
        side_model=side_model.name,
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.latency is not None:
        from asyncrecall_bench._extract_latency import run_latency

        if args.latency < 1:
            raise ConfigError(f"--latency must be 1 or more, got {args.latency}")
        return run_latency(args.latency, settings, as_json=args.json)
    dataset: Path | None = args.dataset or default_dataset()
    if dataset is None or not dataset.is_file():
        raise ConfigError("no LoCoMo dataset: pass --dataset FILE")
    if args.every < 1:
        raise ConfigError(f"--every must be 1 or more, got {args.every}")
    conversations = _load(dataset)[: args.limit_conversations]
    report = asyncio.run(_run(args, settings, conversations))
    if args.json:
        from rich.console import Console

        Console().print_json(json.dumps(report.as_json()))
    else:
        _print(report, dataset)
    return 0


async def _run(
    args: argparse.Namespace, settings: Settings, conversations: Sequence[Mapping[str, Any]]
) -> ExtractReport:
    server = None
    if args.scripted:
        from asyncrecall.models import OpenAIModel
        from asyncrecall.testing import LocalServer, RecordedRequest, Reply

        def answer(record: RecordedRequest) -> Reply:
            return Reply(json=scripted_answer(str(record.messages[-1].get("content", ""))))

        server = LocalServer().start()
        server.set_default("scripted-extractor", answer)
        side: Model = OpenAIModel(model="scripted-extractor", base_url=server.base_url, api_key="x")
    else:
        side = _endpoint_model(settings)
    selector: Selector = LexicalSelector()
    if (args.selector or "lexical") == "model":
        selector = ModelSelector(side if not args.scripted else _endpoint_model(settings))
    try:
        return await evaluate(conversations, side, selector, every=args.every)
    finally:
        close = getattr(side, "aclose", None)
        if close is not None:
            await close()
        if server is not None:
            server.stop()


def _print(report: ExtractReport, dataset: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Extraction quality ({dataset.name}, side model {report.side_model})")
    for column in ("questions", "recall@5", "hit@5", "memories", "extractions", "median ms"):
        table.add_column(column, justify="right")
    table.add_row(
        str(report.questions),
        f"{report.recall_at_5:.3f}",
        f"{report.hit_at_5:.3f}",
        str(report.memories),
        str(report.extractions),
        f"{report.median_extraction_ms:.1f}",
    )
    console = Console()
    console.print(table)
    console.print(f"{report.conversations} conversations; {report.refused} proposals refused")

"""``asyncrecall bench quality``: memory selection quality on LoCoMo-format data.

For each conversation a real memory folder is built in a temporary directory: one
topic file per (session, speaker) from ``observation`` (title ``<speaker>, session
<n>``; description ``<speaker> in session <n> (<session date>): <first observation>``
cut at 150 characters; type ``user``; body that speaker's observations of the session,
one per line), saved through :meth:`FolderStore.save_memory`. Each question then goes
through :meth:`Recaller.recall` (the agent's recall path, limit 10). A question's
gold files are those holding an observation whose dialog id is in its ``evidence``
(ids compared verbatim); category 5 (adversarial) and questions with no gold file are
skipped.

Reported: ``questions`` counted, ``hit_at_5`` (share of questions where a gold file was
chosen), ``recall_at_5`` (mean share of gold files chosen), ``recall_at_10`` and ``mrr``
(each question recalled once with limit 10, its first five scored "@5": the share of
gold files among the ten, and the reciprocal rank of the first gold file, 0 when none
of the ten is), ``median_selection_ms``
(median wall time of one recall call: scan, selection and block). With ``--negatives``
each counted question is also asked against the next conversation's folder
(conversation *k* against *k+1*, wrapping), where nothing is relevant, adding
``false_injection_rate`` (share of those negative queries for which anything was
selected) and ``precision_at_5`` (share of the files selected for the positive
questions that are gold, pooled over all of them). ``--no-abstain`` builds the
selector with ``abstain=False`` (the figures without abstention). The data is read by
path and never copied into the repository (its licence is CC BY-NC 4.0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import FolderStore, LexicalSelector, ModelSelector, Recaller, Selector
from asyncrecall.models import Model
from asyncrecall_bench._locomo import _load, build_memory_folder, gold_files
from asyncrecall_bench._scoring import QualityReport, Tally

__all__ = [
    "QualityReport",
    "add_arguments",
    "build_memory_folder",
    "default_dataset",
    "evaluate",
    "gold_files",
    "run",
]

_Report = TypeVar("_Report")
_DATASET_PARTS = ("shared", "data", "locomo", "locomo-dev.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench quality`` (``--selector`` is the shared flag; default lexical)."""
    parser.add_argument(
        "--dataset",
        type=Path,
        metavar="FILE",
        help="LoCoMo-format JSON (default: ../shared/data/locomo/locomo-dev.json), or "
        "'multilingual': our own set in Chinese, Japanese, French, German and Russian",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--negatives",
        action="store_true",
        help="also ask each question against the next conversation's folder "
        "(false_injection_rate, precision_at_5)",
    )
    parser.add_argument(
        "--no-abstain",
        dest="abstain",
        action="store_false",
        help="build the embedded selectors with abstain=False",
    )
    parser.add_argument(
        "--folds",
        type=int,
        metavar="K",
        help="cross-validate the embedded selectors' thresholds and weights over K folds "
        "of conversations: tuned on K-1, measured on the one left out (every embedded "
        "selector unless --selector names one)",
    )
    parser.add_argument(
        "--limit-questions",
        type=int,
        metavar="N",
        help="stop after N counted questions (a quick smoke run)",
    )


def default_dataset() -> Path | None:
    """``shared/data/locomo/locomo-dev.json`` in a folder above the repository or the cwd
    (a worktree sits deeper than a checkout), if any."""
    repo = Path(__file__).resolve().parents[3]
    for base in (*repo.parents, Path.cwd(), *Path.cwd().resolve().parents):
        candidate = base.joinpath(*_DATASET_PARTS)
        if candidate.is_file():
            return candidate
    return None


#: ``--dataset multilingual``: our own set in five other languages (``_multilingual``).
MULTILINGUAL = "multilingual"


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the benchmark and print the report; returns the exit code."""
    if args.dataset is not None and str(args.dataset) == MULTILINGUAL:
        return _run_multilingual(args, settings)
    dataset: Path | None = args.dataset or default_dataset()
    if dataset is None:
        raise ConfigError(
            "no dataset found at ../shared/data/locomo/locomo-dev.json: pass --dataset FILE"
        )
    if not dataset.is_file():
        raise ConfigError(f"dataset {dataset} does not exist")
    limit: int | None = args.limit_questions
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit-questions must be 1 or more, got {limit}")
    conversations = _load(dataset)
    if args.folds is not None:
        return _run_folds(args, conversations, dataset)
    name = args.selector or "lexical"
    negatives: bool = args.negatives
    if negatives and len(conversations) < 2:
        raise ConfigError("--negatives needs a dataset of two conversations or more")
    report = asyncio.run(
        _run_with_selector(
            name, settings, conversations, limit, negatives=negatives, abstain=args.abstain
        )
    )
    _print(report, as_json=args.json, dataset=dataset)
    return 0


def _run_folds(
    args: argparse.Namespace, conversations: Sequence[Mapping[str, Any]], dataset: Path
) -> int:
    """``--folds K``: :func:`asyncrecall_bench._folds.cross_validate` per embedded selector."""
    from asyncrecall.memory import embedding_available
    from asyncrecall_bench._folds import GRIDS, cross_validate

    if args.limit_questions is not None:
        raise ConfigError("--limit-questions does not apply to --folds (whole conversations)")
    if args.selector is not None and args.selector not in GRIDS:
        raise ConfigError(f"--folds tunes the embedded selectors ({', '.join(GRIDS)})")
    names = [args.selector] if args.selector else list(GRIDS)
    if not embedding_available():
        missing = [n for n in names if n != "lexical"]
        if args.selector in missing:
            raise ConfigError(f"--selector {args.selector} needs pip install 'asyncrecall[local]'")
        names = [n for n in names if n not in missing]
    reports = [asyncio.run(cross_validate(conversations, name, folds=args.folds)) for name in names]
    if args.json:
        out = {"dataset": str(dataset), "selectors": {r.selector: r.as_json() for r in reports}}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Held-out selection quality ({dataset.name}, {args.folds} folds)")
    columns = ("selector", "fold", "questions", "recall@5", "hit@5", "recall@10", "MRR")
    for column in (*columns, "false inj.", "prec@5"):
        table.add_column(column, justify="right")
    table.add_column("chosen")
    for report in reports:
        rows = [(str(f["fold"]), f["held_out"], str(f["params"])) for f in report.per_fold]
        for fold, figures, params in [*rows, ("all", report.held_out, "")]:
            table.add_row(
                report.selector,
                fold,
                str(figures["questions"]),
                f"{figures['recall_at_5']:.3f}",
                f"{figures['hit_at_5']:.3f}",
                f"{figures['recall_at_10']:.3f}",
                f"{figures['mrr']:.3f}",
                f"{figures['false_injection_rate']:.3f}",
                f"{figures['precision_at_5']:.3f}",
                params,
            )
    Console().print(table)
    return 0


def _run_multilingual(args: argparse.Namespace, settings: Settings) -> int:
    from asyncrecall_bench._multilingual import LanguageReport, evaluate_multilingual

    if args.limit_questions is not None:
        raise ConfigError("--limit-questions applies to LoCoMo data, not --dataset multilingual")

    def run_with(make: Callable[[], Selector]) -> Coroutine[Any, Any, list[LanguageReport]]:
        return evaluate_multilingual(make, negatives=args.negatives)

    name = args.selector or "lexical"
    reports = asyncio.run(_with_selector(name, settings, run_with, abstain=args.abstain))
    count = sum(r.questions for r in reports)
    out: dict[str, Any] = {
        "dataset": MULTILINGUAL,
        "selector": name,
        "questions": count,
        "hit_at_5": round(sum(r.hit_at_5 * r.questions for r in reports) / count, 4),
        "recall_at_5": round(sum(r.recall_at_5 * r.questions for r in reports) / count, 4),
        "median_selection_ms": round(statistics.median(r.median_selection_ms for r in reports), 3),
        "languages": {r.language: r.as_json() for r in reports},
    }
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Memory selection quality (multilingual, {name} selector)")
    for column in ("language", "questions", "hit@5", "recall@5", "false injection"):
        table.add_column(column, justify="right")
    for r in reports:
        injection = r.false_injection_rate
        table.add_row(
            r.language,
            str(r.questions),
            f"{r.hit_at_5:.3f}",
            f"{r.recall_at_5:.3f}",
            "–" if injection is None else f"{injection:.3f}",
        )
    Console().print(table)
    return 0


async def _run_with_selector(
    name: str,
    settings: Settings,
    conversations: Sequence[Mapping[str, Any]],
    limit: int | None,
    *,
    negatives: bool = False,
    abstain: bool = True,
) -> QualityReport:
    def run_with(make: Callable[[], Selector]) -> Coroutine[Any, Any, QualityReport]:
        return evaluate(conversations, make, limit_questions=limit, negatives=negatives)

    return await _with_selector(name, settings, run_with, abstain=abstain)


async def _with_selector(
    name: str,
    settings: Settings,
    run_with: Callable[[Callable[[], Selector]], Coroutine[Any, Any, _Report]],
    *,
    abstain: bool = True,
) -> _Report:
    """``run_with`` given a factory of the selector ``name`` (the model one closed after)."""
    if name == "lexical":
        return await run_with(lambda: LexicalSelector(abstain=abstain))
    if name in ("embedding", "hybrid"):
        from asyncrecall.memory import EmbeddingSelector, HybridSelector, embedding_available

        if not embedding_available():
            raise ConfigError(f"--selector {name} needs pip install 'asyncrecall[local]'")
        factory = EmbeddingSelector if name == "embedding" else HybridSelector
        return await run_with(lambda: factory(abstain=abstain))
    model = _endpoint_model(settings)
    try:
        return await run_with(lambda: ModelSelector(model))
    finally:
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()


def _endpoint_model(settings: Settings) -> Model:
    model_name = settings.effective_side_model
    if model_name == "local":
        from asyncrecall.models import LocalModel

        local: Model = LocalModel()
        return local
    if not settings.base_url or not model_name:
        raise ConfigError(
            "--selector model needs an endpoint: pass --base-url and --model (or --side-model)"
        )
    from asyncrecall.models._openai import OpenAIModel

    model: Model = OpenAIModel(
        model=model_name, base_url=settings.base_url, api_key=settings.api_key
    )
    return model


async def evaluate(
    conversations: Sequence[Mapping[str, Any]],
    make_selector: Any,
    *,
    limit_questions: int | None = None,
    progress: bool = True,
    negatives: bool = False,
) -> QualityReport:
    """Build each conversation's folder, recall each question, score the selections.

    With ``negatives``, each counted question is asked again against the next
    conversation's folder (wrapping), where anything selected is a false injection.
    """
    tally = Tally()
    used = 0
    selector: Selector = make_selector()
    with tempfile.TemporaryDirectory(prefix="asyncrecall-quality-") as tmp:
        folders: dict[int, tuple[Recaller, dict[str, set[str]]]] = {}

        def folder(index: int) -> tuple[Recaller, dict[str, set[str]]]:
            if index not in folders:
                path = Path(tmp) / f"{index:03d}-memory"
                gold_by_id = build_memory_folder(conversations[index], path)
                folders[index] = (Recaller(FolderStore(path), selector), gold_by_id)
            return folders[index]

        for index, conversation in enumerate(conversations):
            if limit_questions is not None and len(tally.hits) >= limit_questions:
                break
            label = str(conversation.get("sample_id", f"conversation-{index}"))
            manager, gold_by_id = folder(index)
            used += 1
            for qa in conversation.get("qa") or []:
                if limit_questions is not None and len(tally.hits) >= limit_questions:
                    break
                gold = gold_files(qa, gold_by_id)
                if not gold:
                    continue
                others = [folder((index + 1) % len(conversations))[0]] if negatives else []
                await tally.ask(manager, str(qa.get("question", "")), gold, others)
            if progress:
                sys.stderr.write(f"quality: {label}: {len(tally.hits)} questions so far\n")
                sys.stderr.flush()
    return QualityReport(
        **tally.figures(negatives=negatives),
        selector=selector.name,
        conversations=used,
        strategies=tally.strategies,
    )


def _print(report: QualityReport, *, as_json: bool, dataset: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if as_json:
        console.print_json(json.dumps(report.as_json()))
        return
    table = Table(title=f"Memory selection quality ({dataset.name}, {report.selector} selector)")
    table.add_column("questions", justify="right")
    table.add_column("hit@5", justify="right")
    table.add_column("recall@5", justify="right")
    table.add_column("recall@10", justify="right")
    table.add_column("MRR", justify="right")
    table.add_column("median selection (ms)", justify="right")
    row = [
        str(report.questions),
        f"{report.hit_at_5:.3f}",
        f"{report.recall_at_5:.3f}",
        f"{report.recall_at_10:.3f}",
        f"{report.mrr:.3f}",
        f"{report.median_selection_ms:.2f}",
    ]
    if report.false_injection_rate is not None and report.precision_at_5 is not None:
        table.add_column("false injection", justify="right")
        table.add_column("precision@5", justify="right")
        row += [f"{report.false_injection_rate:.3f}", f"{report.precision_at_5:.3f}"]
    table.add_row(*row)
    console.print(table)
    strategies = ", ".join(f"{k}: {v}" for k, v in sorted(report.strategies.items()))
    console.print(f"{report.conversations} conversations; strategies used: {strategies}")

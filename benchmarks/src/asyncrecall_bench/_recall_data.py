"""What ``bench recall`` measures, as data: the run fills it, the report renders it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from asyncrecall_bench._measure import BusyThread, percentile
from asyncrecall_bench._workload import LatencyProfile, QueryPlan

__all__ = [
    "DEFAULT_ACCURACY",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_QUESTIONS",
    "DEFAULT_SEED",
    "REFERENCE",
    "ZERO_WAIT_MS",
    "Case",
    "ModeFigures",
    "RecallBenchConfig",
    "RecallBenchReport",
]

#: The reference run: the same cases with memory off (the floor of ``added_ms``).
REFERENCE: Final = "memory_off"
#: A mode waits for nothing when its added latency's median is within this of memory
#: off's, measured side by side (ms): a shared machine's scheduling delays hit both.
ZERO_WAIT_MS: Final = 20.0
DEFAULT_QUESTIONS: Final = 120
DEFAULT_SEED: Final = 5
DEFAULT_ACCURACY: Final = 0.8
DEFAULT_CONCURRENCY: Final = 8


@dataclass(frozen=True, slots=True)
class Case:
    """One question asked against one memory folder, and what the stand-in model answers."""

    plan: QueryPlan
    folder: int
    #: Gold files in that folder (empty for a negative question).
    gold: frozenset[str]
    negative: bool
    #: The seeded model selector's answer (relative paths).
    answer: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class RecallBenchConfig:
    """What one run does."""

    dataset: Path
    questions: int = DEFAULT_QUESTIONS
    seed: int = DEFAULT_SEED
    accuracy: float = DEFAULT_ACCURACY
    concurrency: int = DEFAULT_CONCURRENCY
    profile: LatencyProfile = field(default_factory=LatencyProfile)
    quick: bool = False
    #: ``paraphrase``: the no-shared-word set, every question without a tool round
    #: (:mod:`asyncrecall_bench._paraphrase`) instead of LoCoMo.
    paraphrase: bool = False
    #: With ``paraphrase``, the held-out set (``paraphrase-heldout``).
    heldout: bool = False
    #: ``async+lexical``'s instant pass reads meaning too (the ``semantic_instant``
    #: setting), where the ``local`` extra is installed.
    semantic_instant: bool = True
    #: The JSON gives every question's outcome in each mode (``cases``).
    per_case: bool = False
    #: Every mode runs beside a thread of the same process that runs Python without
    #: waiting (:func:`~asyncrecall_bench._measure.busy_thread`).
    busy_thread: bool = False


@dataclass(frozen=True)
class ModeFigures:
    """One mode's per-case outcomes."""

    mode: str
    added_ms: Sequence[float]
    #: Per positive case: (gold delivered, junk only).
    positive: Sequence[tuple[bool, bool]]
    #: Per negative case: anything delivered.
    negative: Sequence[bool]
    errors: int
    #: Per positive case: a gold file in the first main request (the user query's).
    first: Sequence[bool] = ()
    #: Per case, in the report's order: the files in the first main request, and the
    #: ones that reached the model by its last.
    delivered: Sequence[tuple[tuple[str, ...], tuple[str, ...]]] = ()

    def as_json(self) -> dict[str, Any]:
        pos, neg = len(self.positive), len(self.negative)
        return {
            "added_ms": {f"p{q}": round(percentile(self.added_ms, q), 3) for q in (50, 95, 99)},
            "positive": {
                "gold_delivered": _share(sum(g for g, _ in self.positive), pos),
                "junk_delivered": _share(sum(j for _, j in self.positive), pos),
                "gold_first_request": _share(sum(self.first), pos),
            },
            "negative": {"junk_delivered": _share(sum(self.negative), neg)},
            "errors": self.errors,
        }

    def score(self) -> float:
        """Gold delivered minus junk delivered (positive and negative questions)."""
        data = self.as_json()
        return float(
            data["positive"]["gold_delivered"]
            - data["positive"]["junk_delivered"]
            - data["negative"]["junk_delivered"]
        )


def _share(count: int, total: int) -> float:
    return round(count / total, 4) if total else 0.0


@dataclass(frozen=True)
class RecallBenchReport:
    """Every mode's figures over the same cases."""

    config: RecallBenchConfig
    cases: Sequence[Case]
    modes: Mapping[str, ModeFigures]
    wall_s: float
    #: ``added_ms`` of the same cases with memory off.
    reference_ms: Sequence[float] = ()
    #: Each folder's name, by folder index: the figures per folder (``by_group``).
    groups: Sequence[str] = ()
    #: With ``busy_thread``: what that thread did.
    busy: BusyThread | None = None
    #: ``async+lexical``'s instant pass: ``semantic`` (it read meaning too) or ``lexical``.
    instant_pass: str = "lexical"

    def waits(self, figures: ModeFigures) -> bool:
        """Whether a mode waits: its added median over memory off's by :data:`ZERO_WAIT_MS`
        or more."""
        floor = percentile(self.reference_ms, 50) if self.reference_ms else 0.0
        return percentile(figures.added_ms, 50) - floor >= ZERO_WAIT_MS

    def recommended(self) -> str:
        """The mode that best combines zero wait, gold delivered and junk delivered:
        the best :meth:`ModeFigures.score` among the modes that do not :meth:`wait`
        (among all modes if every one does)."""
        modes = list(self.modes.values())
        waitless = [m for m in modes if not self.waits(m)] or modes
        return max(waitless, key=lambda m: m.score()).mode  # ties: the first in MODES order

    def dataset_name(self) -> str:
        """``paraphrase``, ``paraphrase-heldout``, or the LoCoMo file's name."""
        if self.config.paraphrase:
            return "paraphrase-heldout" if self.config.heldout else "paraphrase"
        return self.config.dataset.name

    def by_group(self, figures: ModeFigures) -> dict[str, dict[str, Any]]:
        """A mode's figures per folder: a positive question counts in its own folder, a
        negative one in the folder it was asked of."""
        tallies: dict[str, list[list[bool]]] = {g: [[], [], [], []] for g in self.groups}
        positive = iter(zip(figures.positive, figures.first, strict=True))
        negative = iter(figures.negative)
        for case in self.cases:
            gold, first, junk, wrong = tallies[self.groups[case.folder]]
            if case.negative:
                wrong.append(next(negative))
            else:
                (got_gold, got_junk), early = next(positive)
                gold.append(got_gold)
                junk.append(got_junk)
                first.append(early)
        return {
            group: {
                "questions": len(gold),
                "gold_delivered": _share(sum(gold), len(gold)),
                "gold_first_request": _share(sum(first), len(first)),
                "junk_delivered": _share(sum(junk), len(junk)),
                "negative_questions": len(wrong),
                "negative_junk_delivered": _share(sum(wrong), len(wrong)),
            }
            for group, (gold, first, junk, wrong) in tallies.items()
        }

    def per_case(self) -> list[dict[str, Any]]:
        """Every question, in the run's order: its text, folder, whether it is a negative,
        its gold files, and per mode the files on its first request and the ones that
        reached the model (``--cases``)."""
        return [
            {
                "question": case.plan.text,
                "folder": self.groups[case.folder] if self.groups else case.folder,
                "negative": case.negative,
                "gold": sorted(case.gold),
                "modes": {
                    mode: {
                        "first_request": list(figures.delivered[n][0]),
                        "delivered": list(figures.delivered[n][1]),
                    }
                    for mode, figures in self.modes.items()
                },
            }
            for n, case in enumerate(self.cases)
        ]

    def as_json(self) -> dict[str, Any]:
        positives = sum(not c.negative for c in self.cases)
        modes = {mode: figures.as_json() for mode, figures in self.modes.items()}
        if self.groups:
            for mode, figures in self.modes.items():
                modes[mode]["by_group"] = self.by_group(figures)
        cases = {"cases": self.per_case()} if self.config.per_case else {}
        busy = {"busy_thread": {"rounds": self.busy.rounds}} if self.busy is not None else {}
        return {
            "dataset": self.dataset_name(),
            "questions": positives,
            "negative_questions": len(self.cases) - positives,
            "accuracy": self.config.accuracy,
            "seed": self.config.seed,
            "instant_pass": self.instant_pass,
            "modes": modes,
            REFERENCE: {
                "added_ms": {
                    f"p{q}": round(percentile(self.reference_ms, q), 3) for q in (50, 95, 99)
                }
            },
            "recommended": self.recommended(),
            **busy,
            **cases,
        }


# -- command line -------------------------------------------------------------------------

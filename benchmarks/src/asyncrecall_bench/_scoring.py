"""How ``bench quality`` scores the questions it asks (LoCoMo and ``--dataset
multilingual`` alike): :class:`Tally` recalls each through the agent's recall path and
counts, :class:`QualityReport` holds the figures."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncrecall.memory import Recaller

__all__ = ["K_WIDE", "K", "QualityReport", "Tally"]

#: How many memories each question recalls (the figures are "@5").
K = 5
#: The wider cut of the rank-aware figures (recall@10, and the MRR over the first 10):
#: each question is recalled once with this limit, its first ``K`` scored as "@5".
K_WIDE = 10


@dataclass(frozen=True, slots=True)
class QualityReport:
    """The benchmark's figures."""

    questions: int
    hit_at_5: float
    recall_at_5: float
    median_selection_ms: float
    selector: str = "lexical"
    conversations: int = 0
    strategies: Mapping[str, int] = field(default_factory=dict)
    #: With ``--negatives``: the share of negative queries that selected anything.
    false_injection_rate: float | None = None
    #: With ``--negatives``: selected gold files / selected files, positive questions.
    precision_at_5: float | None = None
    #: Mean share of gold files among the first ten selected.
    recall_at_10: float = 0.0
    #: Mean reciprocal rank of the first gold file among the first ten (0 when none).
    mrr: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` object: the four documented keys, plus ``false_injection_rate``
        and ``precision_at_5`` with ``--negatives``."""
        out: dict[str, Any] = {
            "questions": self.questions,
            "hit_at_5": round(self.hit_at_5, 4),
            "recall_at_5": round(self.recall_at_5, 4),
            "median_selection_ms": round(self.median_selection_ms, 3),
            "recall_at_10": round(self.recall_at_10, 4),
            "mrr": round(self.mrr, 4),
        }
        if self.false_injection_rate is not None and self.precision_at_5 is not None:
            out["false_injection_rate"] = round(self.false_injection_rate, 4)
            out["precision_at_5"] = round(self.precision_at_5, 4)
        return out


@dataclass
class Tally:
    """The questions asked so far, scored as a :class:`QualityReport` counts them (also
    by ``bench quality --dataset multilingual``)."""

    hits: list[float] = field(default_factory=list)
    recalls: list[float] = field(default_factory=list)
    recalls_wide: list[float] = field(default_factory=list)
    ranks: list[float] = field(default_factory=list)
    times_ms: list[float] = field(default_factory=list)
    strategies: dict[str, int] = field(default_factory=dict)
    selected: int = 0
    selected_gold: int = 0
    injected: int = 0
    asked: int = 0

    async def ask(
        self,
        manager: Recaller,
        question: str,
        gold: set[str],
        negatives: Sequence[Recaller] = (),
    ) -> None:
        """Recall ``question`` and score it against its ``gold`` files; then ask it of
        each folder in ``negatives``, where anything selected is a false injection."""
        started = time.perf_counter()
        result = await manager.recall(question, limit=K_WIDE)
        self.times_ms.append((time.perf_counter() - started) * 1000)
        self.strategies[result.strategy] = self.strategies.get(result.strategy, 0) + 1
        ranked = result.paths
        self.recalls_wide.append(len(set(ranked) & gold) / len(gold))
        first = next((n for n, path in enumerate(ranked, 1) if path in gold), 0)
        self.ranks.append(1.0 / first if first else 0.0)
        chosen = set(ranked[:K])
        self.hits.append(1.0 if chosen & gold else 0.0)
        self.recalls.append(len(chosen & gold) / len(gold))
        self.selected += len(chosen)
        self.selected_gold += len(chosen & gold)
        for other in negatives:
            self.asked += 1
            if (await other.recall(question, limit=K)).paths:
                self.injected += 1

    def figures(self, *, negatives: bool) -> dict[str, Any]:
        """The figures a report holds (the last two only with ``negatives``)."""
        count, asked, selected = len(self.hits), self.asked, self.selected
        return {
            "questions": count,
            "hit_at_5": sum(self.hits) / count if count else 0.0,
            "recall_at_5": sum(self.recalls) / count if count else 0.0,
            "median_selection_ms": statistics.median(self.times_ms) if self.times_ms else 0.0,
            "recall_at_10": sum(self.recalls_wide) / count if count else 0.0,
            "mrr": sum(self.ranks) / count if count else 0.0,
            "false_injection_rate": (self.injected / asked if asked else 0.0)
            if negatives
            else None,
            "precision_at_5": (self.selected_gold / selected if selected else 0.0)
            if negatives
            else None,
        }

"""``asyncrecall bench quality --folds K``: the selectors' tuning, measured on held-out
conversations.

The conversations of the dataset are dealt into ``K`` folds (conversation *i* to fold
*i* mod *K*). For each fold, every point of the selector's grid of thresholds and
weights (:data:`GRIDS`, the shipped defaults first) is scored on the other folds'
conversations; the best point by :data:`OBJECTIVE` (recall@5 minus the false injection
rate: recall that holds, without injecting into unrelated conversations) is then
measured on the held-out fold, which took no part in choosing it. Ties keep the
earlier point, so a default is replaced only by a point that scores strictly better.

Every grid point is run once over every conversation, with negatives (each question
also asked against the next conversation's folder, as ``--negatives`` does), and the
tallies kept per conversation: a fold's training and held-out figures are sums of
those, the same numbers separate runs on each subset would give.

Reported per fold: the chosen point, its training figures and its held-out recall@5,
hit@5, false injection and precision@5; pooled over the folds, the held-out figures
(each question counted once, under the point its fold chose), beside the shipped
defaults' figures over the whole file (what a fitted table would show).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from asyncrecall._exceptions import ConfigError
from asyncrecall.memory import FolderStore, LexicalSelector, Recaller, Selector
from asyncrecall_bench._locomo import build_memory_folder, gold_files
from asyncrecall_bench._scoring import Tally

__all__ = ["GRIDS", "OBJECTIVE", "FoldReport", "choose", "cross_validate", "merge"]

#: What a fold's training conversations choose a grid point by.
OBJECTIVE: Final = "recall_at_5 - false_injection_rate"

Params = Mapping[str, Any]

#: Each embedded selector's grid: keyword arguments of its constructor (lexical) or
#: attributes read at selection time (embedding, hybrid: one instance keeps its
#: vectors across points). The shipped defaults come first.
GRIDS: Final[Mapping[str, tuple[Params, ...]]] = {
    "lexical": tuple(
        {"min_coverage": coverage, "k1": k1, "b": b}
        for coverage in (0.34, 0.2, 0.25, 0.3, 0.4, 0.5)
        for k1 in (1.5, 1.2, 2.0)
        for b in (0.75, 0.5)
    ),
    "embedding": tuple(
        {"min_top_similarity": top, "min_similarity": floor}
        for top in (0.25, 0.2, 0.3, 0.35)
        for floor in (0.3, 0.25, 0.35)
    ),
    "hybrid": tuple(
        {"weights": weights, "min_top_similarity": top}
        for weights in ((0.75, 1.0, 1.0), (1.0, 1.0, 1.0), (0.5, 1.0, 1.0), (1.0, 1.25, 1.25))
        for top in (0.25, 0.2, 0.3)
    ),
}


def merge(tallies: Sequence[Tally]) -> Tally:
    """One tally holding the questions of ``tallies``."""
    total = Tally()
    for tally in tallies:
        total.hits += tally.hits
        total.recalls += tally.recalls
        total.recalls_wide += tally.recalls_wide
        total.ranks += tally.ranks
        total.times_ms += tally.times_ms
        total.selected += tally.selected
        total.selected_gold += tally.selected_gold
        total.injected += tally.injected
        total.asked += tally.asked
        for name, count in tally.strategies.items():
            total.strategies[name] = total.strategies.get(name, 0) + count
    return total


def _figures(tally: Tally) -> dict[str, Any]:
    figures = tally.figures(negatives=True)
    return {
        "questions": figures["questions"],
        "hit_at_5": round(figures["hit_at_5"], 4),
        "recall_at_5": round(figures["recall_at_5"], 4),
        "recall_at_10": round(figures["recall_at_10"], 4),
        "mrr": round(figures["mrr"], 4),
        "false_injection_rate": round(figures["false_injection_rate"], 4),
        "precision_at_5": round(figures["precision_at_5"], 4),
    }


def _objective(tally: Tally) -> float:
    figures = tally.figures(negatives=True)
    return float(figures["recall_at_5"] - figures["false_injection_rate"])


@dataclass
class FoldReport:
    """``bench quality --folds K`` for one selector."""

    selector: str
    folds: int
    #: Per fold: its conversations, the chosen point, training and held-out figures.
    per_fold: list[dict[str, Any]] = field(default_factory=list)
    #: The held-out figures pooled over the folds (each question once).
    held_out: dict[str, Any] = field(default_factory=dict)
    #: The shipped defaults (the grid's first point) over every conversation.
    defaults_fitted: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "selector": self.selector,
            "folds": self.folds,
            "objective": OBJECTIVE,
            "held_out": self.held_out,
            "defaults_on_all_conversations": self.defaults_fitted,
            "per_fold": self.per_fold,
        }


def _selector_for(name: str, params: Params, shared: dict[str, Selector]) -> Selector:
    """The selector ``name`` set to ``params``: a new lexical one, or the shared vector
    one with the attributes set (its vector cache stays warm)."""
    if name == "lexical":
        return LexicalSelector(**params)
    if name not in shared:
        from asyncrecall.memory import EmbeddingSelector, HybridSelector

        shared[name] = EmbeddingSelector() if name == "embedding" else HybridSelector()
    selector = shared[name]
    for attribute, value in params.items():
        if not hasattr(selector, attribute):
            raise ConfigError(f"the {name} selector has no parameter {attribute!r}")
        setattr(selector, attribute, value)
    return selector


async def cross_validate(
    conversations: Sequence[Mapping[str, Any]],
    name: str,
    *,
    folds: int,
    grid: Sequence[Params] | None = None,
    progress: bool = True,
) -> FoldReport:
    """Choose ``name``'s point on ``folds - 1`` folds, measure it on the one left out."""
    if folds < 2:
        raise ConfigError(f"--folds must be 2 or more, got {folds}")
    if folds > len(conversations):
        raise ConfigError(
            f"--folds {folds} needs as many conversations; the dataset has {len(conversations)}"
        )
    points = tuple(grid if grid is not None else GRIDS[name])
    count = len(conversations)
    shared: dict[str, Selector] = {}
    # tallies[p][c]: grid point p over conversation c.
    tallies: list[list[Tally]] = []
    with tempfile.TemporaryDirectory(prefix="asyncrecall-folds-") as tmp:
        stores: list[tuple[FolderStore, dict[str, set[str]]]] = []
        for index, conversation in enumerate(conversations):
            path = Path(tmp) / f"{index:03d}-memory"
            gold_by_id = build_memory_folder(conversation, path)
            stores.append((FolderStore(path), gold_by_id))
        for number, params in enumerate(points):
            selector = _selector_for(name, params, shared)
            managers = [Recaller(store, selector) for store, _ in stores]
            row: list[Tally] = []
            for index, conversation in enumerate(conversations):
                tally = Tally()
                manager, gold_by_id = managers[index], stores[index][1]
                other = managers[(index + 1) % count]
                for qa in conversation.get("qa") or []:
                    gold = gold_files(qa, gold_by_id)
                    if gold:
                        await tally.ask(manager, str(qa.get("question", "")), gold, [other])
                row.append(tally)
            tallies.append(row)
            if progress:
                sys.stderr.write(f"folds: {name}: point {number + 1}/{len(points)} {params}\n")
                sys.stderr.flush()
    report = FoldReport(selector=name, folds=folds)
    report.defaults_fitted = _figures(merge(tallies[0]))
    held: list[Tally] = []
    for fold, (train, test, best) in enumerate(choose(tallies, folds)):
        chosen = merge([tallies[best][c] for c in test])
        held.append(chosen)
        report.per_fold.append(
            {
                "fold": fold,
                "conversations": [
                    str(conversations[c].get("sample_id", f"conversation-{c}")) for c in test
                ],
                "params": _plain(points[best]),
                "train": _figures(merge([tallies[best][c] for c in train])),
                "held_out": _figures(chosen),
            }
        )
    report.held_out = _figures(merge(held))
    return report


def choose(
    tallies: Sequence[Sequence[Tally]], folds: int
) -> list[tuple[list[int], list[int], int]]:
    """Per fold: its training conversations, its held-out ones (conversation *i* is in
    fold *i* mod ``folds``) and the grid point chosen on the training ones alone
    (``tallies[point][conversation]``)."""
    count = len(tallies[0])
    out = []
    for fold in range(folds):
        test = [c for c in range(count) if c % folds == fold]
        train = [c for c in range(count) if c % folds != fold]
        out.append((train, test, _best([merge([row[c] for c in train]) for row in tallies])))
    return out


def _best(trained: Sequence[Tally]) -> int:
    """The index of the point with the best objective (the earliest among equals)."""
    best, best_score = 0, float("-inf")
    for number, tally in enumerate(trained):
        score = _objective(tally)
        if score > best_score + 1e-12:
            best, best_score = number, score
    return best


def _plain(params: Params) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}

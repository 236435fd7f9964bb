"""The semantic instant pass's thresholds, chosen with folds (never on held-out data).

The pass (:class:`asyncrecall.memory.SemanticInstantSelector`) answers from vectors only
where the lexical pass abstains on wording, and then only when the best memory's best
line reaches ``min_top_similarity`` and its combined score stands ``min_margin``
standard deviations above the folder's mean. Two sources choose them:

- the LoCoMo dev file (every question, and each asked of the next conversation's folder):
  the points must not add junk there. Only a handful of its questions reach the vectors
  at all (the lexical pass or the names gate decides the rest), so it constrains the
  floor and says little else;
- the no-shared-word set of ``bench recall --dataset paraphrase``
  (``asyncrecall_bench/paraphrase``), by folds over its folders: each fold's training
  folders choose the point by gold minus junk (top ``--limit`` files, positives in their
  folder, negatives against the language's other folder); the point is then measured on
  the fold left out. The shipped point is the first that every fold chose, if one did.

Usage::

    PYTHONPATH=src:benchmarks/src python benchmarks/instant_gate.py [--locomo FILE] \
        [--encoder wordllama|multilingual]

``--encoder``: whose vectors (default: the pass's own, the multilingual encoder when
installed). With the multilingual one, queries not in English reach the vectors, as
they do in the pass.

Prints one JSON object: per point, the LoCoMo dev junk and gold it adds; per fold, the
point chosen and its held-out figures; and the pooled held-out figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asyncrecall.memory import FolderStore, MemoryDoc, SemanticInstantSelector
from asyncrecall.memory.selectors._embedding import WordLlamaEncoder, embed_query
from asyncrecall.memory.selectors._multilingual import MultilingualEncoder
from asyncrecall_bench._locomo import _load, build_memory_folder, gold_files
from asyncrecall_bench._paraphrase import FOLDS, LANGUAGES, build_folders
from asyncrecall_bench._quality import default_dataset

#: The points tried, the shipped one first (a tie keeps it), by encoder.
MARGINS = {
    "wordllama": (2.0, 1.6, 1.8, 2.2, 2.4, 99.0),
    "multilingual": (1.6, 1.4, 1.8, 2.0, 2.2, 99.0),
}
FLOORS = {
    "wordllama": (0.25, 0.15, 0.2, 0.3),
    "multilingual": (0.225, 0.15, 0.175, 0.2, 0.25, 0.3),
}


@dataclass(frozen=True, slots=True)
class Seen:
    """One question against one folder, as far as the thresholds need it."""

    group: str
    negative: bool
    #: The lexical pass's outcome when it decided (``None``: the vectors are asked).
    lexical_gold: bool | None
    lexical_any: bool
    #: The best line's cosine of the best-ranked memory.
    best: float = 0.0
    margin: float = 0.0
    #: Per rank of the combined score: (best line, gold).
    ranked: tuple[tuple[float, bool], ...] = ()


def observe(
    selector: SemanticInstantSelector,
    group: str,
    query: str,
    docs: Sequence[MemoryDoc],
    gold: Iterable[str],
    *,
    negative: bool,
    limit: int,
) -> Seen:
    """What the pass would see for ``query`` over ``docs`` (its own code path)."""
    wanted = set(gold)
    lexical = selector.lexical
    chosen, why = lexical.rank_explained(query, docs, limit=limit)
    picked = {d.rel_path for d in chosen}
    decided = (
        bool(chosen)
        or why not in ("no_match", "below_threshold")
        or selector._gated(query, docs)
        or len(docs) < 4
    )
    if decided:
        return Seen(group, negative, bool(picked & wanted), bool(picked))
    if not selector.vectors_ready(docs):
        selector.prepare_vectors(docs)
    placed = selector._placed(docs)
    assert placed is not None and placed[1] is None
    stack = placed[0]
    vector = embed_query(selector.encoder, query)  # the pass's own path
    scores = stack.matrix @ vector
    count = len(docs)
    best = np.maximum.reduceat(scores, stack.starts)
    combined = scores[:count] + best
    spread = float(combined.std()) or 1e-9
    margin = (float(combined.max()) - float(combined.mean())) / spread
    order = np.argsort(-combined, kind="stable")[:limit]
    ranked = tuple((float(best[i]), docs[i].rel_path in wanted) for i in order)
    return Seen(group, negative, None, False, ranked[0][0], margin, ranked)


def outcome(seen: Seen, margin: float, floor: float) -> tuple[bool, bool]:
    """(gold delivered, anything delivered) at one point."""
    if seen.lexical_gold is not None:
        return seen.lexical_gold, seen.lexical_any
    if seen.best < floor or seen.margin < margin:
        return False, False
    kept = [gold for best, gold in seen.ranked if best >= floor]
    return any(kept), bool(kept)


def figures(seen: Sequence[Seen], margin: float, floor: float) -> dict[str, float]:
    positives = [outcome(s, margin, floor) for s in seen if not s.negative]
    negatives = [outcome(s, margin, floor) for s in seen if s.negative]
    gold = sum(g for g, _ in positives) / max(len(positives), 1)
    junk = sum(a and not g for g, a in positives) / max(len(positives), 1)
    negative_junk = sum(a for _, a in negatives) / max(len(negatives), 1)
    return {
        "questions": len(positives),
        "gold": round(gold, 4),
        "junk": round(junk, 4),
        "negative_junk": round(negative_junk, 4),
        "objective": round(gold - junk - negative_junk, 4),
    }


def _locomo(selector: SemanticInstantSelector, dataset: Path, limit: int) -> list[Seen]:
    conversations = _load(dataset)
    seen: list[Seen] = []
    with tempfile.TemporaryDirectory(prefix="asyncrecall-instant-gate-") as tmp:
        folders = []
        for index, conversation in enumerate(conversations):
            path = Path(tmp) / f"{index:03d}"
            folders.append((FolderStore(path), build_memory_folder(conversation, path)))
        for index, conversation in enumerate(conversations):
            own, gold_by_id = folders[index]
            other = folders[(index + 1) % len(folders)][0]
            for qa in conversation.get("qa") or []:
                gold = gold_files(qa, gold_by_id)
                if not gold:
                    continue
                question = str(qa.get("question", ""))
                for store, negative in ((own, False), (other, True)):
                    docs = store.scan()
                    wanted = () if negative else gold
                    seen.append(
                        observe(selector, "locomo", question, docs, wanted, negative=negative,
                                limit=limit)
                    )  # fmt: skip
    return seen


def _paraphrase(selector: SemanticInstantSelector, limit: int) -> list[Seen]:
    seen: list[Seen] = []
    with tempfile.TemporaryDirectory(prefix="asyncrecall-instant-gate-") as tmp:
        for case in build_folders(Path(tmp)):
            for store, negative in ((case.store, False), (case.other, True)):
                docs = store.scan()
                wanted = () if negative else case.gold
                seen.append(
                    observe(selector, case.group, case.question, docs, wanted,
                            negative=negative, limit=limit)
                )  # fmt: skip
    return seen


def _best(seen: Sequence[Seen], points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    best, score = points[0], float("-inf")
    for point in points:
        value = figures(seen, *point)["objective"]
        if value > score + 1e-12:
            best, score = point, value
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=None, help="the LoCoMo dev file")
    parser.add_argument("--limit", type=int, default=2, help="files the pass gives (2)")
    parser.add_argument(
        "--encoder", choices=("wordllama", "multilingual"), default=None,
        help="whose vectors (default: the pass's own)",
    )  # fmt: skip
    args = parser.parse_args()
    dataset = args.locomo or default_dataset()
    if dataset is None:
        sys.stderr.write("no dataset: pass --locomo FILE (the LoCoMo dev file)\n")
        return 2
    if args.encoder == "wordllama":
        selector = SemanticInstantSelector(encoder=WordLlamaEncoder.shared())
    elif args.encoder == "multilingual":
        selector = SemanticInstantSelector(encoder=MultilingualEncoder.shared())
    else:
        selector = SemanticInstantSelector()
    kind = "multilingual" if selector.multilingual else "wordllama"
    points = [(m, f) for m in MARGINS[kind] for f in FLOORS[kind]]
    locomo = _locomo(selector, dataset, args.limit)
    base = figures(locomo, 99.0, 9.0)  # the lexical pass alone
    allowed = [p for p in points if figures(locomo, *p)["negative_junk"] <= base["negative_junk"]]
    paraphrase = _paraphrase(selector, args.limit)
    per_fold = []
    chosen_points = []
    for fold, groups in enumerate(FOLDS):
        train = [s for s in paraphrase if s.group not in groups]
        test = [s for s in paraphrase if s.group in groups]
        point = _best(train, allowed)
        chosen_points.append(point)
        per_fold.append(
            {
                "fold": fold,
                "held_out_folders": sorted(groups),
                "chosen": {"min_margin": point[0], "min_top_similarity": point[1]},
                "train": figures(train, *point),
                "held_out": figures(test, *point),
            }
        )

    def held_out(items: Sequence[Seen]) -> dict[str, float]:
        """Each question under the point its fold chose, pooled."""
        parts = [
            figures([s for s in items if s.group in groups], *point)
            for groups, point in zip(FOLDS, chosen_points, strict=True)
        ]
        total = sum(p["questions"] for p in parts) or 1
        pooled = {k: round(sum(p[k] * p["questions"] for p in parts) / total, 4) for k in
                  ("gold", "junk", "negative_junk", "objective")}  # fmt: skip
        return {"questions": sum(p["questions"] for p in parts), **pooled}

    out = {
        "encoder": selector.encoder.name,
        "limit": args.limit,
        "locomo_dev": {
            "lexical_alone": base,
            "reach_vectors": sum(s.lexical_gold is None for s in locomo),
            "points": {f"{m}/{f}": figures(locomo, m, f) for m, f in points if (m, f) in allowed},
            "excluded": [f"{m}/{f}" for m, f in points if (m, f) not in allowed],
        },
        "paraphrase_lexical_alone": figures(paraphrase, 99.0, 9.0),
        "per_fold": per_fold,
        "held_out": held_out(paraphrase),
        "per_language_held_out": {
            language: held_out([s for s in paraphrase if s.group.startswith(language + "/")])
            for language in LANGUAGES
        },
    }
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

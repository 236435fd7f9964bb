"""The names gate's threshold, chosen on LoCoMo dev with folds (never on held-out data).

The gate (``LexicalSelector.names_coverage``, shared by the instant pass, the embedded
selectors and the model selector's skip) abstains when a query names something no
memory mentions and under that share of its terms is known. Each fold's training
conversations choose among the thresholds below by recall@5 minus false injection
(``bench quality --folds``' objective); the chosen point is measured on the fold left
out. Usage::

    PYTHONPATH=src:benchmarks/src python benchmarks/names_gate.py [--folds K] [DATASET]

Prints one JSON object: the pooled held-out figures, each fold's choice and figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from asyncrecall_bench._folds import cross_validate
from asyncrecall_bench._locomo import _load
from asyncrecall_bench._quality import default_dataset

#: The thresholds tried (the shipped one first: a tie keeps it).
THRESHOLDS = (0.9, 0.75, 0.85, 1.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", type=Path, default=None)
    parser.add_argument("--folds", type=int, default=3)
    args = parser.parse_args()
    dataset = args.dataset or default_dataset()
    if dataset is None:
        sys.stderr.write("no dataset: pass the LoCoMo dev file\n")
        return 2
    grid = [
        {"min_coverage": 0.34, "k1": 1.5, "b": 0.75, "names_coverage": share}
        for share in THRESHOLDS
    ]
    report = asyncio.run(
        cross_validate(_load(dataset), "lexical", folds=args.folds, grid=grid, progress=False)
    ).as_json()
    out = {
        "folds": args.folds,
        "held_out": report["held_out"],
        "per_fold": [
            {"chosen": f["params"]["names_coverage"], "held_out": f["held_out"]}
            for f in report["per_fold"]
        ],
    }
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

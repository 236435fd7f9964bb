"""What embedding one query costs the semantic instant pass: the package's own pass
against the pass for queries (``asyncrecall.memory.selectors._use_onnx``: the network
on onnxruntime with 8-bit weights), side by side in one process, one query after the
other.

The questions are both no-shared-word sets' (``bench recall --dataset paraphrase`` and
``paraphrase-heldout``), in set order. ``first``: each question's first embedding (its
words new to the pass's tokenizer cache); ``again``: every question ``--repeats`` more
times; ``cold``: as ``again``, with the processor's caches flushed before each call (a
64 MB buffer read), as between two messages of a conversation. Each pass is timed right
after the other on the same question, so a busy machine slows both alike; the pass for
queries runs first on a new question, so the package's pass never warms anything for
it.

Usage::

    PYTHONPATH=src:benchmarks/src python benchmarks/query_embedding.py [--repeats 5]

Prints one JSON object: per pass and phase, the median, p90 and p99 in microseconds, and
the median of the paired ratios (the pass for queries over the package's).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from asyncrecall.memory.selectors._multilingual import MultilingualEncoder
from asyncrecall_bench._measure import paired
from asyncrecall_bench._paraphrase import HELDOUT, HELDOUT_LANGUAGES, build_folders


def questions() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cases = build_folders(root / "own") + build_folders(
            root / "heldout", HELDOUT_LANGUAGES, HELDOUT
        )
        return [case.question for case in cases]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    texts = questions()
    encoder = MultilingualEncoder()
    encoder.load()
    if encoder._query is None:
        print("the pass for queries does not hold (is onnxruntime installed?)", file=sys.stderr)
        return 1
    model = encoder._loaded()
    clock = time.perf_counter
    out: dict[str, object] = {}
    flush = np.ones(16 << 20, dtype=np.float32)  # 64 MB: more than the last-level cache
    for phase, rounds in (("first", 1), ("again", args.repeats), ("cold", args.repeats)):
        package: list[float] = []
        ours: list[float] = []
        for _ in range(rounds):
            for text in texts:
                if phase == "cold":
                    flush.sum()
                began = clock()
                encoder.embed_query(text)
                ours.append(clock() - began)
                if phase == "cold":
                    flush.sum()
                began = clock()
                model.encode([text])
                package.append(clock() - began)
        out[phase] = paired(ours, package, names=("query_pass", "package"), unit="us")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

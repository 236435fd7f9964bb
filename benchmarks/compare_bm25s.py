"""Our lexical selector against ``bm25s``: quality on LoCoMo dev, selection time, import cost.

Not part of the suite: ``bm25s`` and ``PyStemmer`` are not project dependencies. Run it
in a scratch environment that has them and asyncrecall's own dependencies::

    python -m venv /tmp/cmp && /tmp/cmp/bin/pip install bm25s PyStemmer pyyaml filelock \\
        snowballstemmer
    PYTHONPATH=src /tmp/cmp/bin/python benchmarks/compare_bm25s.py [DATASET]

Every variant ranks the same documents (the topic files ``bench quality`` builds, text
= title, description, type, body) for the same questions; the gold files are the same.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from asyncrecall.memory import FolderStore, LexicalSelector, MemoryDoc
from asyncrecall_bench._quality import build_memory_folder, default_dataset, gold_files

Ranker = Callable[[str], list[int]]


def _import_ms(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout) * 1000


def _bm25s_ranker(docs: Sequence[MemoryDoc], *, stopwords: str | None, stem: bool) -> Ranker:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english") if stem else None
    corpus = [f"{d.title}\n{d.description}\n{d.type}\n{d.body}" for d in docs]
    retriever = bm25s.BM25()
    tokens = bm25s.tokenize(corpus, stopwords=stopwords, stemmer=stemmer, show_progress=False)
    retriever.index(tokens, show_progress=False)

    def rank(query: str) -> list[int]:
        q = bm25s.tokenize(query, stopwords=stopwords, stemmer=stemmer, show_progress=False)
        if not q.vocab:
            return []
        results, scores = retriever.retrieve(q, k=min(5, len(docs)), show_progress=False)
        return [int(i) for i, s in zip(results[0], scores[0], strict=True) if s > 0]

    return rank


def _ours(docs: Sequence[MemoryDoc]) -> Ranker:
    selector = LexicalSelector()
    index = {d.rel_path: i for i, d in enumerate(docs)}
    return lambda query: [index[d.rel_path] for d in selector.rank(query, docs, limit=5)]


VARIANTS: dict[str, Callable[[Sequence[MemoryDoc]], Ranker]] = {
    "bm25s plain": lambda d: _bm25s_ranker(d, stopwords=None, stem=False),
    "bm25s stopwords=en + stemmer": lambda d: _bm25s_ranker(d, stopwords="en", stem=True),
    "asyncrecall LexicalSelector": _ours,
}


def main() -> None:
    dataset = Path(sys.argv[1]) if len(sys.argv) > 1 else default_dataset()
    assert dataset is not None, "pass the dataset path"
    conversations: list[dict[str, Any]] = json.loads(dataset.read_text())
    stats: dict[str, dict[str, list[float]]] = {
        name: {"hit": [], "recall": [], "ms": []} for name in VARIANTS
    }
    with tempfile.TemporaryDirectory() as tmp:
        for index, conversation in enumerate(conversations):
            folder = Path(tmp) / str(index)
            gold_by_id = build_memory_folder(conversation, folder)
            docs = FolderStore(folder).scan()
            rankers = {name: make(docs) for name, make in VARIANTS.items()}
            for qa in conversation["qa"]:
                gold = gold_files(qa, gold_by_id)
                if not gold:
                    continue
                for name, rank in rankers.items():
                    started = time.perf_counter()
                    chosen = {docs[i].rel_path for i in rank(qa["question"])}
                    stats[name]["ms"].append((time.perf_counter() - started) * 1000)
                    stats[name]["hit"].append(1.0 if chosen & gold else 0.0)
                    stats[name]["recall"].append(len(chosen & gold) / len(gold))
    print("variant | questions | hit@5 | recall@5 | median select ms")
    for name, s in stats.items():
        n = len(s["hit"])
        print(
            f"{name} | {n} | {sum(s['hit']) / n:.3f} | {sum(s['recall']) / n:.3f} | "
            f"{statistics.median(s['ms']):.3f}"
        )
    print(f"import bm25s: {_import_ms('bm25s'):.0f} ms")
    lexical = "asyncrecall.memory.selectors._lexical"
    print(f"import {lexical}: {_import_ms(lexical):.0f} ms")
    print(f"import snowballstemmer: {_import_ms('snowballstemmer'):.0f} ms")


if __name__ == "__main__":
    main()

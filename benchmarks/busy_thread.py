"""The semantic instant pass beside a thread that runs Python: what the interpreter lock
costs it, with and without taking the lock back at once after each numpy release
(``asyncrecall.memory.selectors._handback``).

The pass runs inline (on the event loop, in the agent) and its numpy calls release
the interpreter lock. Beside a thread running Python (here, a counting loop: the worst
case, a thread that never waits), the lock comes back only at a forced switch. The
questions are the no-shared-word set's (``bench recall --dataset paraphrase``), each
asked of its own folder and of its language's other one, as the agent asks them
(``SemanticInstantSelector.rank_explained``), every one once before the timing (the
pass's token table warm, as in a session). ``alone`` / ``busy``: without and with the
busy thread; within each, every question is timed with and without the handback, one
right after the other, in alternating order.

Usage::

    PYTHONPATH=src:benchmarks/src python benchmarks/busy_thread.py [--rounds 3]

Prints one JSON object: per phase and variant, the p50, p90 and p99 in milliseconds, and
the median of the paired ratios (with the handback over without).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from asyncrecall.memory import FolderStore, MemoryDoc, SemanticInstantSelector
from asyncrecall.memory.selectors import _instant
from asyncrecall_bench._measure import busy_thread, paired
from asyncrecall_bench._paraphrase import build_folders
from asyncrecall_bench._recall import embedded_selectors

Ask = Callable[[], object]


def asks(root: Path) -> list[Ask]:
    """One call of the pass per question and folder, as the agent makes it."""
    cases = build_folders(root)
    prepared: dict[Path, tuple[SemanticInstantSelector, list[MemoryDoc]]] = {}
    calls: list[Ask] = []
    for case in cases:
        for store in (case.store, case.other):
            if store.root not in prepared:
                _, instant = embedded_selectors(semantic=True)
                if not isinstance(instant, SemanticInstantSelector):
                    raise SystemExit("the semantic pass needs the `local` extra")
                docs = FolderStore(store.root).scan()
                instant.prepare(docs)
                instant.prepare_vectors(docs)
                prepared[store.root] = (instant, docs)
            instant, docs = prepared[store.root]
            calls.append(lambda i=instant, d=docs, q=case.question: i.rank_explained(q, d, limit=2))
    return calls


def timed(call: Ask, *, handback: bool) -> float:
    """One call, in seconds; without ``handback``, the pass's lock handback is off."""
    saved = _instant.quick_return
    if not handback:
        _instant.quick_return = contextlib.nullcontext  # type: ignore[assignment]
    try:
        began = time.perf_counter()
        call()
        return time.perf_counter() - began
    finally:
        _instant.quick_return = saved


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="times each call is timed")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        calls = asks(Path(tmp))
        for call in calls:  # the token table learns every question's tokens
            call()
        out: dict[str, object] = {"switch_interval_s": sys.getswitchinterval()}
        for phase in ("alone", "busy"):
            with_: list[float] = []
            without: list[float] = []
            with busy_thread() if phase == "busy" else contextlib.nullcontext():
                for n in range(args.rounds):
                    for k, call in enumerate(calls):
                        if (n + k) % 2:
                            without.append(timed(call, handback=False))
                            with_.append(timed(call, handback=True))
                        else:
                            with_.append(timed(call, handback=True))
                            without.append(timed(call, handback=False))
            out[phase] = paired(with_, without, names=("handback", "without"), unit="ms")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

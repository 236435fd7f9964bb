"""What vetting one memory write by where its text came from costs: a write of
``--write`` characters against a session whose tool output totals ``--output``
characters (ten reads of the project's own sources), medians over repeats.

    python benchmarks/attribution.py [--write 2000] [--output 200000] [--repeats 9]

The first write of a session builds each tool output's fingerprint (its units and
runs); later writes reuse them. It runs in the write's worker thread, never on the
recall path.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import asyncrecall
from asyncrecall.agent._untrusted import SessionTaint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=int, default=2000)
    parser.add_argument("--output", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    root = Path(asyncrecall.__file__).resolve().parent
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.py")))
    output = (text * (1 + args.output // max(len(text), 1)))[: args.output]
    middle = args.output // 4
    write = ("Notes: " + output[middle : middle + args.write // 2] + " I use Helix. ") * 2
    write = write[: args.write]
    step = max(args.output // 10, 1)
    first, later = [], []
    held = ""
    for _ in range(args.repeats):
        taint = SessionTaint()
        taint.user_turn("read the sources and remember how they are laid out; I use Helix")
        for start in range(0, args.output, step):
            chunk = {"content": output[start : start + step]}
            taint.tool_output("read_file", {"path": f"part{start}.py"}, chunk)
        for times in (first, later):
            started = time.perf_counter()
            held = taint.vet(write, said=["remember how they are laid out"]).held
            times.append((time.perf_counter() - started) * 1000.0)
    print(f"write {len(write)} chars, tool output {len(output)} chars in 10 reads: {held[:50]}...")
    print(f"first write of the session (fingerprints built): {statistics.median(first):.1f} ms")
    print(f"later writes: {statistics.median(later):.1f} ms")


if __name__ == "__main__":
    main()

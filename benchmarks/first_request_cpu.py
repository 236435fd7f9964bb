"""What memory costs a new ``asyncrecall run`` before its first request, in CPU.

``bench cli`` pairs whole processes by the wall clock and by their CPU; on this 2-core
machine both scatter by tens of milliseconds between two runs of the same code, so a
bound of a few milliseconds cannot be read off them. This script reads the main
thread's own CPU clock (``time.thread_time``) inside each process, at the moment its
first main request is handed to the HTTP client, and also times, inside the same
processes, each step memory adds on that thread before it:

- ``entry``: ``cli._reader.start_reading_memory`` (settings, the reader process started);
- ``system prompt``: ``build_system_prompt`` (the index less the quarantined memories;
  the same call with memory off builds the prompt without them);
- ``instant pass``: ``Recaller.recall_instant``, or the reader's result taken
  (``cli._reader.PrimedRecall.take``);
- ``prime``: building ``cli._memory_config.ReadAheadManager`` (the manager that answers
  the question's instant pass with the reader's result);
- ``imports``: the modules these steps import, which the command imports anyway, only
  later (each step's figure is without them).

N pairs of new processes, memory on and ``--no-memory``, alternating which goes
first, over a folder of ``--files`` generated notes (``bench cli``'s) unchanged since the
previous run (``--changed``: every note rewritten before each memory-on run), against a
local server; *gold first* counts the pairs whose memory-on
request carried the relevant memory (the wait and what it delivers, together).
``--aa`` runs ``--no-memory`` on both sides: the spread of a difference that is zero.

    PYTHONPATH=src python benchmarks/first_request_cpu.py [--pairs 12] [--files 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from asyncrecall.bench._cli import QUESTION, build_folder, rewrite_notes

from asyncrecall.testing import LocalServer, RecordedRequest, Reply

#: The code each measured process runs: the CLI's entry with the steps timed.
_CHILD = r"""
import functools, importlib.abc, json, sys, time
spent = {}

def timed(owner, name, label):
    real = getattr(owner, name)
    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        start, before = time.thread_time(), spent.get("imports", 0.0)
        spent["_in_step"] = spent.get("_in_step", 0) + 1
        try:
            return real(*args, **kwargs)
        finally:
            spent["_in_step"] -= 1
            imported = spent.get("imports", 0.0) - before
            spent[label] = spent.get(label, 0.0) + (time.thread_time() - start) * 1e3 - imported
    setattr(owner, name, wrapper)

import builtins
real_import = builtins.__import__
depth = [0]

def counted_import(*args, **kwargs):
    # The CPU of the outermost imports run inside a timed step ("imports"): modules the
    # command imports anyway, only earlier (checked: memory on imports no module that
    # memory off does not, before the first request, but ctypes after it).
    if depth[0] or not spent.get("_in_step"):
        return real_import(*args, **kwargs)
    depth[0] += 1
    start = time.thread_time()
    try:
        return real_import(*args, **kwargs)
    finally:
        depth[0] -= 1
        spent["imports"] = spent.get("imports", 0.0) + (time.thread_time() - start) * 1e3

builtins.__import__ = counted_import

def first_request(module):
    real_send = module.OpenAIModel._send
    async def send(self, create, params):
        if "main" not in spent:
            spent["main"] = time.thread_time() * 1e3
            print("FIRST " + json.dumps(spent), file=sys.stderr, flush=True)
        return await real_send(self, create, params)
    module.OpenAIModel._send = send

def prompt(module):
    timed(module, "build_system_prompt", "system prompt")

# Each module is instrumented as it is imported, never earlier: importing them here
# would move the CLI's entry (and its reader process) after the heavy imports.
PATCHES = {
    "asyncrecall.cli._reader": lambda m: (
        timed(m, "start_reading_memory", "entry"),
        timed(m.PrimedRecall, "take", "instant pass"),
    ),
    "asyncrecall.memory._recall": lambda m: timed(
        m.Recaller, "recall_instant", "instant pass"
    ),
    "asyncrecall.cli._memory_config": lambda m: timed(m.ReadAheadManager, "__init__", "prime"),
    "asyncrecall.cli._system_prompt": prompt,
    "asyncrecall.models._openai": first_request,
}

class Patcher(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        real_exec = spec.loader.exec_module
        def exec_module(module):
            real_exec(module)
            PATCHES[name](module)
        spec.loader.exec_module = exec_module
        return spec

import importlib.util
sys.meta_path.insert(0, Patcher())
from asyncrecall.cli import main
sys.exit(main(sys.argv[1:]))
"""

_STEPS = ("entry", "system prompt", "instant pass", "prime", "imports")


def _one(
    server: LocalServer, folder: Path, project: Path, memory: bool, *, aa: bool = False
) -> dict[str, float]:
    argv = [
        sys.executable, "-c", _CHILD, "run", QUESTION, "--memory-dir", str(folder),
        "--project", str(project), "--base-url", server.base_url, "--model", "main",
        "--side-model", "side", "--no-extract",
    ]  # fmt: skip
    if not memory or aa:
        argv.append("--no-memory")
    done = subprocess.run(argv, capture_output=True, text=True, cwd=project, timeout=120)
    for line in done.stderr.splitlines():
        if line.startswith("FIRST "):
            return {k: float(v) for k, v in json.loads(line[6:]).items()}
    raise RuntimeError(f"no first request (exit {done.returncode}): {done.stderr[-500:]}")


def measure(pairs: int, files: int, *, changed: bool = False, aa: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="asyncrecall-cpu-") as tmp:
        folder, project = Path(tmp) / "memory", Path(tmp) / "project"
        project.mkdir()
        gold = build_folder(folder, files, seed=7)
        firsts: list[RecordedRequest] = []

        def main_reply(record: RecordedRequest) -> Reply:
            firsts.append(record)
            return Reply(text="It hangs on real sockets.")

        with LocalServer() as server:
            server.set_default("main", main_reply)
            server.set_default("side", lambda _r: Reply(json={"selected_memories": []}))
            _one(server, folder, project, True)  # the previous run: the folder is known
            old = time.time_ns() - 60 * 1_000_000_000
            os.utime(folder, ns=(old, old))  # and still, as between a user's runs
            _one(server, folder, project, True)
            on: list[dict[str, float]] = []
            off: list[dict[str, float]] = []
            gold_first = 0
            for i in range(pairs):
                for memory in (True, False) if i % 2 else (False, True):
                    if memory and changed:  # every note rewritten since the last run
                        rewrite_notes(folder, files - 1, seed=7, generation=i + 1)
                    before = len(firsts)
                    (on if memory else off).append(_one(server, folder, project, memory, aa=aa))
                    if memory and not aa and gold in json.dumps(firsts[before].messages):
                        gold_first += 1
    p50 = statistics.median
    added = [a["main"] - b["main"] for a, b in zip(on, off, strict=True)]
    return {
        "pairs": pairs,
        "files": files,
        "folder": "changed" if changed else "known",
        "gold_first": gold_first,
        "main_thread_cpu_ms": {
            "memory_on_p50": round(p50(r["main"] for r in on), 1),
            "memory_off_p50": round(p50(r["main"] for r in off), 1),
            "added_p50": round(p50(added), 1),
            "added_quartiles": [round(q, 1) for q in statistics.quantiles(added)],
        },
        "steps_ms_p50": {
            step: {
                "memory_on": round(p50(r.get(step, 0.0) for r in on), 3),
                "memory_off": round(p50(r.get(step, 0.0) for r in off), 3),
            }
            for step in _STEPS
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument(
        "--changed", action="store_true", help="rewrite every note before each memory-on run"
    )
    parser.add_argument(
        "--aa", action="store_true", help="both sides --no-memory: the pairing's own noise"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args.pairs, args.files, changed=args.changed, aa=args.aa)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    cpu = report["main_thread_cpu_ms"]
    print(f"{args.files} files, {report['folder']}, {args.pairs} pairs; gold in the first request: "
          f"{report['gold_first']} of {args.pairs}")  # fmt: skip
    print(f"main thread CPU at the first request: on {cpu['memory_on_p50']} ms, off "
          f"{cpu['memory_off_p50']} ms, paired {cpu['added_p50']:+} ms (p50; quartiles "
          f"{cpu['added_quartiles'][0]:+}, {cpu['added_quartiles'][2]:+})")  # fmt: skip
    added = 0.0
    for step, values in report["steps_ms_p50"].items():
        if step != "imports":
            added += values["memory_on"] - values["memory_off"]
        print(f"  {step:14} on {values['memory_on']:.3f} ms  off {values['memory_off']:.3f} ms")
    print(f"  memory's steps, summed (imports left out): {added:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long ``asyncrecall run`` holds the prompt after the answer is complete.

From the answer's last byte (the local server's record of the main stream) to the end
of the ``run`` process (its ``wait`` returning here), N new processes per mode,
alternating, on one local server: extraction on (the default with an endpoint) and
``--no-extract``. The side model answers recall side queries at once and holds every
extraction ``--extract-s`` seconds (a real model takes one to a few), so a command
that waits for its extraction shows it. Between two runs the previous run's hand-off
worker is let finish (its folder empty), so each run starts on a quiet machine.

    PYTHONPATH=src python benchmarks/exit_time.py [--runs 10] [--extract-s 1.5] [--json]

Run it with another checkout's ``src`` first on the path to measure that code (the
CLI processes inherit ``PYTHONPATH``).
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

from asyncrecall.memory import FolderStore
from asyncrecall.testing import LocalServer, RecordedRequest, Reply

DRAIN_GUARD_S = 60.0


def _is_extraction(record: RecordedRequest) -> bool:
    return "memories" in json.dumps(record.body.get("response_format") or {}) or any(
        "long-term memory of an AI agent" in str(m.get("content", "")) for m in record.messages
    )


def _side(extract_s: float) -> Any:
    def answer(record: RecordedRequest) -> Reply:
        if _is_extraction(record):
            return Reply(json={"memories": []}, first_token_delay=extract_s)
        return Reply(json={"selected_memories": []})

    return answer


def _drained(memory: Path) -> None:
    """Wait (polling, a guard) until no hand-off of the folder is left."""
    handoff = memory.with_name(f"{memory.name}.state") / "handoff"
    deadline = time.monotonic() + DRAIN_GUARD_S
    while handoff.is_dir() and any(p.suffix == ".json" for p in handoff.iterdir()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"hand-offs left in {handoff}")
        time.sleep(0.05)


def measure(runs: int, extract_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, LocalServer() as server:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        memory = root / "memory"
        store = FolderStore(memory)
        store.ensure()
        for n in range(20):
            store.save_memory(
                f"note {n}", f"note number {n}", "project", f"Fact {n}.", origin="user"
            )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
        env["ASYNCRECALL_HOME"] = str(root / "home")
        modes = {"extract": [], "no_extract": []}
        for i in range(runs):
            for mode, flags in (("extract", []), ("no_extract", ["--no-extract"])):
                server.reset()
                server.set_default("main", Reply(text="The answer is forty-two.", chunk_size=6))
                server.set_default("side", _side(extract_s))
                command = [sys.executable, "-m", "asyncrecall", "run", f"what about note {i}?",
                           "--base-url", server.base_url, "--api-key", "bench", "--model", "main",
                           "--side-model", "side", "--project", str(project),
                           "--memory-dir", str(memory), *flags]  # fmt: skip
                done = subprocess.run(command, capture_output=True, text=True, env=env)
                ended = time.monotonic()
                if done.returncode != 0:
                    raise RuntimeError(f"run failed: {done.stderr.strip()}")
                main = next(r for r in server.requests if r.model == "main")
                assert main.finished_at is not None
                modes[mode].append((ended - main.finished_at) * 1000.0)
                _drained(memory)
    return {
        "runs": runs,
        "extract_s": extract_s,
        **{
            mode: {
                "median_ms": round(statistics.median(values), 1),
                "min_ms": round(min(values), 1),
                "max_ms": round(max(values), 1),
                "all_ms": [round(v, 1) for v in values],
            }
            for mode, values in modes.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--extract-s", type=float, default=1.5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.runs, args.extract_s)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    sys.stdout.write(
        f"last byte -> exit, {result['runs']} runs per mode "
        f"(extraction held {result['extract_s']:g} s)\n"
    )
    for mode in ("extract", "no_extract"):
        row = result[mode]
        sys.stdout.write(
            f"  {mode:<10} median {row['median_ms']:7.1f} ms  "
            f"min {row['min_ms']:7.1f}  max {row['max_ms']:7.1f}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

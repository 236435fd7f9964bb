"""Side-query requests and time per recall against the real llama.cpp server.

Runs ``asyncrecall memory recall --selector model`` (a fresh process per recall, as a user
would) against llama-cpp-python's server through the recording proxy, and prints, per
recall, the requests on the wire and the recall time the CLI reports. Compare two trees
side by side in one run (the machine is shared, so only ratios mean much):

    PYTHONPATH=$PWD/src python -m tests.interop.measure_recall --before /path/to/old/src
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from asyncrecall.memory import FolderStore

from .server import running_llama_server


def _recall(src: str, base_url: str, model: str, memory: Path, home: Path) -> tuple[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env.update(PYTHONPATH=src, ASYNCRECALL_HOME=str(home))
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", "recall", "how do we deploy?",
         "--selector", "model", "--base-url", base_url, "--model", model,
         "--memory-dir", str(memory), "--json"],
        capture_output=True, text=True, env=env, timeout=600, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    return str(result["strategy"]), float(result["recall_ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--after", default=str(Path(__file__).parents[2] / "src"))
    parser.add_argument("--before", required=True, help="the src folder of the old tree")
    parser.add_argument("--recalls", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[tuple[int, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        memory = FolderStore(root / "memory")
        memory.ensure()
        memory.save_memory(
            "deploy-flow", "how deploys work", "project", "Via staging.", origin="user"
        )
        memory.save_memory("cat-names", "the office cats", "user", "Tom and Ginger.", origin="user")
        with running_llama_server(root / "server.log") as server:
            for n in range(args.recalls):
                for label, src in (("before", args.before), ("after", args.after)):
                    server.proxy.clear()
                    how, ms = _recall(src, server.base_url, server.model_id, memory.root, root)
                    wire = [(r.status, r.response_format_type) for r in server.proxy.requests]
                    print(
                        f"{label:6} recall {n + 1}: {len(wire)} request(s) {wire}, "
                        f"{ms:.0f} ms, strategy {how}"
                    )
                    rows.setdefault(label, []).append((len(wire), ms))
    for label, values in rows.items():
        print(
            f"{label:6} median: {statistics.median(v[0] for v in values):.0f} request(s), "
            f"{statistics.median(v[1] for v in values):.0f} ms per recall"
        )


if __name__ == "__main__":
    main()

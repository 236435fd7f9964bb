"""How long a command waits while a handed-off extraction runs, on a one-slot server.

llama-cpp-python's server with its defaults (one slot, ``interrupt_requests``, the
embedded SmolLM2-135M GGUF, its default context of 2048): a ``run`` hands its
extraction to the detached worker; as soon as the worker's extraction request is at
the server, a second command starts, and its wait is timed: ``memory recall
--selector model`` (the whole process) and a ``run``'s first token (the first
``content`` line of ``--output-format stream-json``, from the process start). The same
command after a ``run`` that handed nothing off (``ASYNCRECALL_EXTRACT=0``) is the
baseline. Each case in a fresh home and memory folder; the worker of one case ends
before the next starts; main answers are capped at 64 tokens by the proxy. Two trees
side by side (the machine is shared: compare medians of the same run):

    PYTHONPATH=$PWD/src python -m tests.interop.measure_handoff --before /old/src
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from asyncrecall.memory import FolderStore

from .proxy import ProxiedRequest
from .server import LlamaServer, running_llama_server

GUARD = 600.0
TOLD = (
    "Remember for later: I am Ada, our deploys go through staging on Fridays, "
    "the database is PostgreSQL 16 and the office cats are Tom and Ginger."
)


def _env(src: str, home: Path, *, extract: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env.update(PYTHONPATH=src, ASYNCRECALL_HOME=str(home))
    if not extract:
        env["ASYNCRECALL_EXTRACT"] = "0"
    return env


def _command(server: LlamaServer, memory: Path, project: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "asyncrecall", *args, "--selector", "model",
            "--base-url", server.base_url, "--model", server.model_id,
            "--memory-dir", str(memory)] + (
        ["--project", str(project)] if args[0] == "run" else []
    )  # fmt: skip


def _workers(root: Path) -> list[int]:
    """The extraction workers started for this case (their command line names its
    memory folder's hand-off folder, under ``root``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "_handoff_worker" in line and str(root) in line:
            found.append(int(entry.name))
    return found


def _is_extraction(record: ProxiedRequest) -> bool:
    """A side query (a JSON answer asked) that is not the selector's."""
    return bool(record.response_format_type) and "selected_memories" not in json.dumps(
        record.body.get("response_format")
    )


def _case(server: LlamaServer, src: str, root: Path, *, handoff: bool, measure: str) -> float:
    home = root / "home"
    memory = root / "memory"
    project = root / "project"
    project.mkdir(parents=True)
    store = FolderStore(memory)
    store.ensure()
    store.save_memory(
        "deploy-flow", "how deploys work", "project", "Deploys go via staging.", origin="user"
    )
    store.save_memory("cat-names", "the office cats", "user", "Tom and Ginger.", origin="user")
    server.proxy.clear()
    subprocess.run(
        _command(server, memory, project, "run", TOLD),
        env=_env(src, home, extract=handoff), capture_output=True, timeout=GUARD, check=True,
    )  # fmt: skip
    if handoff:  # the worker's extraction is at the server (or being sent)
        server.proxy.wait_for(_is_extraction, timeout=GUARD)
    env = _env(src, home, extract=False)  # the measured command hands nothing off
    started = time.perf_counter()
    if measure == "recall":
        subprocess.run(
            _command(server, memory, project, "memory", "recall", "how do we deploy?", "--json"),
            env=env, capture_output=True, timeout=GUARD, check=True,
        )  # fmt: skip
        waited = time.perf_counter() - started
    else:
        process = subprocess.Popen(
            _command(server, memory, project, "run", "Say hello.", "--output-format",
                     "stream-json"),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        assert process.stdout is not None
        waited = float("nan")
        for line in process.stdout:
            if json.loads(line).get("type") == "content":
                waited = time.perf_counter() - started
                break
        process.stdout.read()
        process.wait(timeout=GUARD)
        process.stdout.close()
    deadline = time.monotonic() + GUARD
    while _workers(root) and time.monotonic() < deadline:
        time.sleep(0.5)
    if os.environ.get("MEASURE_TRACE"):
        start = min((r.sent_at for r in server.proxy.requests), default=0.0)
        for r in server.proxy.requests:
            kind = "extract" if _is_extraction(r) else r.response_format_type or "main"
            print(
                f"   {r.sent_at - start:7.2f} s {kind:12} stream={r.body.get('stream')} "
                f"status={r.status} complete={r.complete} hung_up={r.client_hung_up}"
            )
        for log in root.rglob("worker.log"):
            print("   worker.log:", log.read_text()[-1500:])
    return waited


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--after", default=str(Path(__file__).parents[2] / "src"))
    parser.add_argument("--before", help="the src folder of the old tree (optional)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--measure", choices=("recall", "run", "both"), default="both")
    args = parser.parse_args()
    trees = [("after", args.after)] + ([("before", args.before)] if args.before else [])
    measures = ("recall", "run") if args.measure == "both" else (args.measure,)
    results: dict[tuple[str, str, bool], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with running_llama_server(root / "server.log", n_ctx=2048) as server:
            # Main answers capped (the first token is what is timed); side queries carry
            # their own cap, extraction's included.
            server.proxy.max_tokens = 64
            for n in range(args.repeats):
                for measure in measures:
                    for label, src in trees:
                        for handoff in (False, True):
                            case = root / f"{label}-{measure}-{handoff}-{n}"
                            waited = _case(server, src, case, handoff=handoff, measure=measure)
                            shutil.rmtree(case, ignore_errors=True)
                            results.setdefault((label, measure, handoff), []).append(waited)
                            print(f"{label:6} {measure:6} handoff={handoff!s:5} #{n + 1}: "
                                  f"{waited:6.2f} s", flush=True)  # fmt: skip
    print("\nmedians (s):")
    for (label, measure, handoff), values in sorted(results.items()):
        print(f"  {label:6} {measure:6} handoff={handoff!s:5} {statistics.median(values):6.2f}"
              f"  {[round(v, 2) for v in values]}")  # fmt: skip


if __name__ == "__main__":
    main()

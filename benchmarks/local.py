"""The embedded model's engine: the main turn's priority, the prompt cache, its memory.

    python benchmarks/local.py [--reps 3] [--json]
    python benchmarks/local.py --cli [--json]

Three measures on SmolLM2-135M through llama.cpp, side by side in one run (medians;
the machine is shared, so read the ratios):

1. **First token of a main turn**, alone and with a side query already running (the
   offline ``--selector model`` case: the recall's side query starts at the user
   query, the main turn right after). Issue 10 point 4: before the priority gate the
   main turn waited for the whole side query.
2. **The next turn of a conversation**, with the context kept from the previous turn
   (llama-cpp's prefix match evaluates only the new suffix) and with the context
   reset first (the whole conversation evaluated again, as when a side query in
   between evicted it).
3. **Resident memory** after loading the main context, and after the side context.

``--cli`` times the offline CLI instead, as a user meets it (nothing configured, a
memory about the staging cluster, two cores): ``asyncrecall run QUESTION`` from
process start to exit (cold: a new process, its first turn), and ``asyncrecall chat``
with two piped questions, each turn from its ``request_sent`` event to its
``finished`` event (the first turn cold, the second warm, in the same process), and
the CPU seconds of each process (on a shared machine, the wall clock mostly measures
the others).

Runs without the ``engine`` attribute (the code before issue 10 point 4) measure 1
only, so the same script gives the before figure on an old checkout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from asyncrecall.models import Content, Text, TextDelta, user_content
from asyncrecall.models._local import LocalModel

SIDE_SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "string"}, "minItems": 40}},
    "required": ["items"],
}
SYSTEM = "You are a helpful assistant. Answer briefly."
HISTORY = [
    user_content("We deploy through the staging cluster, which is called blue. " * 12),
    Content("model", (Text("Understood: the staging cluster is called blue."),)),
]


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _first_token(model: LocalModel, contents: list[Content]) -> tuple[float, float]:
    """Seconds to the first text delta, and to the end of the turn."""
    started = time.perf_counter()
    first = None
    async for event in model.stream(contents, system=SYSTEM):
        if first is None and isinstance(event, TextDelta):
            first = time.perf_counter() - started
    return (first if first is not None else float("nan")), time.perf_counter() - started


async def _with_side_query(main: LocalModel, side: LocalModel, question: str) -> tuple[float, str]:
    """The main turn's first token while a side query runs; how the side query ended."""
    query = asyncio.create_task(
        side.generate_json(
            system="List things as JSON.",
            prompt="List 40 animals.",
            schema=SIDE_SCHEMA,
            schema_name="animals",
        )
    )
    await asyncio.sleep(0.05)  # its worker has the engine (the recall starts first)
    first, _ = await _first_token(main, [user_content(question)])
    try:
        await query
        outcome = "finished"
    except Exception as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    return first, outcome


async def _next_turn(model: LocalModel, *, reset: bool) -> float:
    """Seconds for the second turn of a conversation (the first one runs before)."""
    await _first_token(model, [*HISTORY[:1]])
    engine: Any = model.engine
    if reset:
        engine.loaded("main").reset()
    _, total = await _first_token(model, [*HISTORY, user_content("What is it called?")])
    return total


async def main(reps: int) -> dict[str, Any]:
    rss_before = _rss_mib()
    main_model = LocalModel(max_tokens=8)
    side_model = LocalModel(json_max_tokens=400)
    main_model.load()
    rss_main = _rss_mib()
    has_engine = hasattr(main_model, "engine")
    alone: list[float] = []
    during: list[float] = []
    outcomes: list[str] = []
    warm: list[float] = []
    reset: list[float] = []
    await _first_token(main_model, [user_content("Say hello.")])  # warm-up
    for rep in range(reps):
        # A new question each time: the system prompt may be cached, the question not.
        alone.append((await _first_token(main_model, [user_content(f"Say hello to {rep}.")]))[0])
        first, outcome = await _with_side_query(main_model, side_model, f"Say hi to {rep}.")
        during.append(first)
        outcomes.append(outcome)
        if has_engine:
            warm.append(await _next_turn(main_model, reset=False))
            reset.append(await _next_turn(main_model, reset=True))
    result: dict[str, Any] = {
        "reps": reps,
        "first_token_s": {
            "alone": round(statistics.median(alone), 3),
            "side_query_running": round(statistics.median(during), 3),
        },
        "side_query_outcomes": sorted(set(outcomes)),
        "rss_mib": {"process": round(rss_before), "main_context": round(rss_main)},
    }
    if has_engine:
        result["next_turn_s"] = {
            "context_kept": round(statistics.median(warm), 3),
            "context_reset": round(statistics.median(reset), 3),
        }
        result["rss_mib"]["main_and_side_contexts"] = round(_rss_mib())
    return result


def _cli(
    args: list[str], folder: Path, stdin: str | None = None
) -> list[tuple[float, dict[str, Any]]]:
    """Run the offline CLI; each stream-json event with its time since process start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(folder / "home")
    command = [
        *(sys.executable, "-m", "asyncrecall", *args, "--output-format", "stream-json"),
        *("--project", str(folder / "project"), "--memory-dir", str(folder / "memory")),
    ]
    started = time.perf_counter()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(stdin or "")
    process.stdin.close()
    events = [(time.perf_counter() - started, json.loads(line)) for line in process.stdout]
    process.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    end = {"type": "exit", "code": process.returncode, "cpu_s": round(used, 2)}
    events.append((time.perf_counter() - started, end))
    return events


def cli() -> dict[str, Any]:
    from asyncrecall.memory import FolderStore

    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "project").mkdir()
        FolderStore(folder / "memory").save_memory(
            "cluster",
            "the name of the staging cluster",
            "project",
            "The staging cluster is called blue. Deploys go through it.",
            origin="user",
        )
        run = _cli(["run", "what is the staging cluster called?"], folder)
        chat = _cli(
            ["chat"],
            folder,
            "what is the staging cluster called?\nwhat goes through the staging cluster?\n",
        )
    sent = [t for t, e in chat if e["type"] == "request_sent"]
    done = [t for t, e in chat if e["type"] == "finished"]
    answers = [e.get("text", "") for _, e in [*run, *chat] if e["type"] == "finished"]
    return {
        "run_cold_s": round(run[-1][0], 2),
        "run_exit": run[-1][1]["code"],
        "run_cpu_s": run[-1][1]["cpu_s"],
        "chat_first_turn_s": round(done[0] - sent[0], 2),
        "chat_second_turn_s": round(done[1] - sent[1], 2),
        "chat_total_s": round(chat[-1][0], 2),
        "chat_exit": chat[-1][1]["code"],
        "chat_cpu_s": chat[-1][1]["cpu_s"],
        "answers": answers,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--cli", action="store_true", help="time the offline CLI instead")
    args = parser.parse_args()
    figures = cli() if args.cli else asyncio.run(main(args.reps))
    print(json.dumps(figures, indent=None if args.json else 2))

"""``asyncrecall bench cli``: the user's clock, one new ``asyncrecall run`` process at a time.

Every other benchmark runs inside one warm process. This one starts the real command
line in a new process (``python -m asyncrecall run QUESTION``, default settings, an
OpenAI-compatible endpoint: a :class:`~asyncrecall.testing.LocalServer` on 127.0.0.1),
as a user or a script does, and reads what happened off the wire:

* a memory folder of ``--files`` English notes (200 and 2,000 by default: generated,
  seeded, about 1.5 KiB each) and one relevant memory, the newest file;
* two folder states: ``known`` (unchanged since the previous run read it: its index
  in ``.cache/`` is current) and ``changed`` (every note rewritten, new content and
  modification time, before each run);
* with and without a tool round (the main model calls ``list_directory`` once);
* each memory-on process is paired with a ``--no-memory`` process of the same case
  run just before or after it (the order alternates), so both meet the same load.

Per case: ``memory_first`` (share of runs whose first main request carried a memory
block), ``gold_first`` (that block held the relevant memory), ``gold_answer`` (the
relevant memory reached the model before its final answer), ``first_request_ms``
(from just before the process is spawned to the server receiving its first main
request, memory on and off, p50, and the paired difference's p50), ``first_request_cpu_ms``
(the CPU time the process, all its threads, had used when its first main request
arrived: the same figures; threads that ended, such as the memory warm-up thread, to the
clock tick), ``exit_ms`` (from the last byte of the answer to the
process's exit, p50).

Why both clocks: a new process spends about a second importing before its first
request, and on a shared machine two such seconds differ by hundreds of milliseconds,
so paired wall-clock differences cannot resolve a few milliseconds. Before its first
request the process is one interpreter running Python (the interpreter lock lets one
thread at a time do so), so what memory adds to that wait is, first of all, the CPU it
adds; that figure moves little with the machine's load. (The folder's reader process,
when a changed folder needs one, runs on another core and is not counted.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.table import Table

import asyncrecall
from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import FolderStore
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from asyncrecall_bench._corpus import MEMORIES, Memory
from asyncrecall_bench._measure import percentile

__all__ = [
    "QUESTION",
    "CliBenchConfig",
    "CliBenchReport",
    "ProcessRun",
    "add_arguments",
    "build_folder",
    "measure",
    "rewrite_notes",
    "run",
]

#: The question every process asks, and the one memory relevant to it.
QUESTION: Final = "Why does CI hang on the integration tests?"
GOLD: Final[Memory] = next(m for m in MEMORIES if m.name == "ci-hang")
_DEFAULT_RUNS: Final = 4
_DEFAULT_FILES: Final = (200, 2000)
_STATES: Final = ("known", "changed")
_SIDE_DELAY_S: Final = 0.9
_FIRST_TOKEN_S: Final = 0.3
_TOOL_FIRST_TOKEN_S: Final = 0.2
_PROCESS_GUARD_S: Final = 120.0
_NOTE_BYTES: Final = 1536
_HEADING: Final = re.compile(r"^### .* \(([^()\n]+\.md)\)$", re.MULTILINE)
_MEMORY_HEADING: Final = "## Relevant memory"


@dataclass(frozen=True, kw_only=True)
class CliBenchConfig:
    """What one run of the benchmark does."""

    runs: int = _DEFAULT_RUNS
    files: tuple[int, ...] = _DEFAULT_FILES
    states: tuple[str, ...] = _STATES
    tools: tuple[bool, ...] = (False, True)
    #: The ``asyncrecall`` source folder the measured processes import (``PYTHONPATH``);
    #: ``None``: the one this process imports.
    source: Path | None = None
    seed: int = 7


@dataclass(frozen=True, slots=True)
class ProcessRun:
    """What one new process did, read off the wire and the clock."""

    memory: bool
    exit_code: int
    first_request_ms: float
    #: CPU time the process had used (all threads) when its first main request arrived.
    first_request_cpu_ms: float
    memory_first: bool
    gold_first: bool
    gold_answer: bool
    exit_ms: float


@dataclass(frozen=True)
class CaseFigures:
    """One case: folder size, state, tool round; its paired runs."""

    files: int
    state: str
    tools: bool
    on: Sequence[ProcessRun]
    off: Sequence[ProcessRun]

    @property
    def key(self) -> str:
        return f"{self.files} files, {self.state}, {'tool round' if self.tools else 'no tool'}"

    def as_json(self) -> dict[str, Any]:
        on, off = self.on, self.off
        paired = [a.first_request_ms - b.first_request_ms for a, b in zip(on, off, strict=True)]
        return {
            "files": self.files,
            "state": self.state,
            "tools": self.tools,
            "runs": len(on),
            "memory_first": _share(sum(r.memory_first for r in on), len(on)),
            "gold_first": _share(sum(r.gold_first for r in on), len(on)),
            "gold_answer": _share(sum(r.gold_answer for r in on), len(on)),
            "first_request_ms": {
                "memory_on_p50": _p50(r.first_request_ms for r in on),
                "memory_off_p50": _p50(r.first_request_ms for r in off),
                "added_p50": _p50(paired),
            },
            "first_request_cpu_ms": {
                "memory_on_p50": _p50(r.first_request_cpu_ms for r in on),
                "memory_off_p50": _p50(r.first_request_cpu_ms for r in off),
                "added_p50": _p50(
                    a.first_request_cpu_ms - b.first_request_cpu_ms
                    for a, b in zip(on, off, strict=True)
                ),
            },
            "exit_ms": {
                "memory_on_p50": _p50(r.exit_ms for r in on),
                "memory_off_p50": _p50(r.exit_ms for r in off),
            },
            "errors": sum(r.exit_code != 0 for r in (*on, *off)),
        }


def _share(count: int, total: int) -> float:
    return round(count / total, 4) if total else 0.0


def _p50(values: Any) -> float:
    return round(percentile(list(values), 50), 1)


@dataclass(frozen=True)
class CliBenchReport:
    """Every case's figures."""

    config: CliBenchConfig
    cases: Sequence[CaseFigures]
    wall_s: float

    def as_json(self) -> dict[str, Any]:
        return {
            "runs": self.config.runs,
            "question": QUESTION,
            "cases": [case.as_json() for case in self.cases],
            "wall_s": round(self.wall_s, 1),
        }


# -- the folder --------------------------------------------------------------------------

_NAMES: Final = ("Maria", "John", "Priya", "Tom", "Aiko", "Lena", "Omar", "Grace", "Ben", "Sofia")
_PLACES: Final = (
    "the market", "the library", "her sister's house", "the lake", "the old cinema",
    "the bakery", "the mountains", "the museum", "the garden", "the train station",
)  # fmt: skip
_THINGS: Final = (
    "a new recipe for lemon cake", "the book club", "a trip to the coast", "the neighbours' dog",
    "painting classes", "the school play", "a broken bicycle", "the summer festival",
    "learning the guitar", "a birthday party", "the weather last weekend", "a job interview",
    "their favourite songs", "a long walk in the rain", "the kids' football match",
)  # fmt: skip
_FEELINGS: Final = (
    "happy", "tired", "surprised", "worried", "excited", "calm", "proud", "curious",
)  # fmt: skip
_TEMPLATES: Final = (
    "{a} went to {place} with {b} and talked about {thing}.",
    "{a} said she felt {feeling} after {thing}.",
    "On Sunday {a} and {b} planned {thing} for next month.",
    "{b} told {a} a story about {thing} at {place}.",
    "{a} was {feeling} to hear that {b} had finished {thing}.",
    "Later {b} asked {a} whether {place} was open in the evening.",
)  # fmt: skip


def _note_text(rng: random.Random, number: int, generation: int) -> str:
    lines: list[str] = []
    used = 0
    while used < _NOTE_BYTES:
        a, b = rng.sample(_NAMES, 2)
        line = rng.choice(_TEMPLATES).format(
            a=a,
            b=b,
            place=rng.choice(_PLACES),
            thing=rng.choice(_THINGS),
            feeling=rng.choice(_FEELINGS),
        )
        lines.append(line)
        used += len(line) + 1
    description = f"{lines[0][:90]} (version {generation})"
    return (
        f'---\nname: Note {number}\ndescription: "{description}"\ntype: user\n---\n'
        + "\n".join(lines)
        + "\n"
    )


def build_folder(root: Path, files: int, *, seed: int) -> str:
    """A memory folder of ``files - 1`` English notes and the relevant memory, newest;
    returns the relevant memory's relative path."""
    store = FolderStore(root)
    store.ensure()
    rewrite_notes(root, files - 1, seed=seed, generation=0)
    gold = store.save_memory(GOLD.name, GOLD.description, GOLD.type, GOLD.content, origin="user")
    future = time.time() + 3600  # newest whatever the notes' times: within the 200 scanned
    os.utime(gold.path, (future, future))
    return gold.rel_path


def rewrite_notes(root: Path, count: int, *, seed: int, generation: int) -> None:
    """Write (or rewrite, with new text and modification times) the ``count`` notes."""
    rng = random.Random(seed * 1_000_003 + generation)
    now = time.time()
    for number in range(count):
        path = root / f"note-{number:05d}.md"
        path.write_text(_note_text(rng, number, generation), encoding="utf-8")
        stamp = now - number - 1
        os.utime(path, (stamp, stamp))


# -- the server's script -------------------------------------------------------------------


def _side_reply(gold: str) -> Callable[[RecordedRequest], Reply]:
    def reply(request: RecordedRequest) -> Reply:
        fmt = request.body.get("response_format") or {}
        name = str((fmt.get("json_schema") or {}).get("name", "")) if isinstance(fmt, dict) else ""
        if name == "memory_extraction" or "extract" in name:
            return Reply(json={"memories": []}, first_token_delay=0.05)
        return Reply(json={"selected_memories": [gold]}, first_token_delay=_SIDE_DELAY_S)

    return reply


@dataclass
class _FirstRequest:
    """The CPU time process ``pid`` had used when its first main request arrived."""

    pid: int | None = None
    cpu_ms: float = float("nan")


def _main_reply(tools: bool, first: _FirstRequest) -> Callable[[RecordedRequest], Reply]:
    """The main model's script; it reads ``first``'s CPU time on the first request."""

    def reply(request: RecordedRequest) -> Reply:
        if first.pid is not None and math.isnan(first.cpu_ms):
            first.cpu_ms = process_cpu_ms(first.pid)
        answered = any(m.get("role") == "tool" for m in request.messages)
        if tools and not answered:
            return Reply(
                tool_calls=[("list_directory", {"path": "."})],
                first_token_delay=_TOOL_FIRST_TOKEN_S,
            )
        return Reply(
            text="Use the fake_bank fixture: the CI runner has no egress.",
            first_token_delay=_FIRST_TOKEN_S,
            chunk_size=16,
        )

    return reply


# -- running -----------------------------------------------------------------------------


@dataclass
class _Bench:
    config: CliBenchConfig
    server: LocalServer
    tmp: Path
    log: Callable[[str], None]
    count: int = 0
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ASYNCRECALL_", "OPENAI_"))}
        source = self.config.source
        if source is None:
            source = Path(asyncrecall.__file__).resolve().parents[1]
        env["PYTHONPATH"] = os.pathsep.join(
            [str(source), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
        )
        env["ASYNCRECALL_HOME"] = str(self.tmp / "home")
        # As installed: compiled modules are cached (in a folder of the run's own, so a
        # measured checkout is never written to).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(self.tmp / "pycache")
        self.env = env
        (self.tmp / "project").mkdir(exist_ok=True)

    def process(self, memory_dir: Path, *, memory: bool, tools: bool, gold: str) -> ProcessRun:
        """Spawn one ``asyncrecall run`` and read what it did."""
        self.count += 1
        main, side = f"main-{self.count}", f"side-{self.count}"
        at_first = _FirstRequest()
        self.server.set_default(main, _main_reply(tools, at_first))
        self.server.set_default(side, _side_reply(gold))
        argv = [
            sys.executable, "-m", "asyncrecall", "run", QUESTION,
            "--base-url", self.server.base_url, "--model", main, "--side-model", side,
            "--memory-dir", str(memory_dir), "--project", str(self.tmp / "project"),
        ]  # fmt: skip
        if not memory:
            argv.append("--no-memory")
        started = time.monotonic()
        with subprocess.Popen(
            argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as child:
            at_first.pid = child.pid
            try:
                _, stderr = child.communicate(timeout=_PROCESS_GUARD_S)
            except subprocess.TimeoutExpired:
                child.kill()
                raise
        ended = time.monotonic()
        if child.returncode != 0:
            self.log(f"  exit {child.returncode}: {stderr.strip()[-300:]}")
        _drain(memory_dir)
        mains = [r for r in self.server.requests if r.model == main and r.stream]
        if not mains:
            nan = float("nan")
            return ProcessRun(memory, child.returncode or -1, nan, nan, False, False, False, 0.0)
        first, last = mains[0], mains[-1]
        first_paths = _delivered(first)
        last_byte = last.finished_at if last.finished_at is not None else ended
        return ProcessRun(
            memory=memory,
            exit_code=child.returncode,
            first_request_ms=(first.arrived_at - started) * 1000.0,
            first_request_cpu_ms=at_first.cpu_ms,
            memory_first=_MEMORY_HEADING in _user_text(first),
            gold_first=gold in first_paths,
            gold_answer=gold in _delivered(last),
            exit_ms=(ended - last_byte) * 1000.0,
        )


def process_cpu_ms(pid: int) -> float:
    """The CPU time (ms) process ``pid`` has used so far, all its threads; NaN where it
    cannot be read (another system, a process gone).

    Its live threads to the nanosecond (``/proc/PID/task/*/schedstat``: the scheduler's
    clock), and those that already ended to the clock tick (the process's total in
    ``/proc/PID/stat`` less its live threads'): the CLI's memory warm-up thread ends
    long before the first request, and its work is what the memory-on figure shows."""
    try:
        live_ns = live_ticks = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                live_ns += int((task / "schedstat").read_text().split()[0])
                live_ticks += _cpu_ticks(task / "stat")
        ended_ticks = max(_cpu_ticks(Path(f"/proc/{pid}/stat")) - live_ticks, 0)
    except OSError:
        return float("nan")
    return live_ns / 1e6 + ended_ticks * 1000 / os.sysconf("SC_CLK_TCK")


def _cpu_ticks(stat: Path) -> int:
    """utime + stime of a ``/proc`` ``stat`` file, in clock ticks."""
    fields = stat.read_text().rsplit(")", 1)[1].split()  # the name may hold spaces
    return int(fields[11]) + int(fields[12])


def _drain(memory_dir: Path) -> None:
    """Wait until the run's extraction, handed off to a worker at its exit, is done: the
    next process starts on a quiet machine, and no worker writes into the run's folder
    while it is removed (a guard: :data:`_PROCESS_GUARD_S`)."""
    handoff = memory_dir.with_name(f"{memory_dir.name}.state") / "handoff"
    deadline = time.monotonic() + _PROCESS_GUARD_S
    while handoff.is_dir() and any(p.suffix == ".json" for p in handoff.iterdir()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"extraction hand-offs left in {handoff}")
        time.sleep(0.02)


def _user_text(request: RecordedRequest) -> str:
    return "\n".join(_text(m.get("content")) for m in request.messages if m.get("role") == "user")


def _delivered(request: RecordedRequest) -> set[str]:
    return set(_HEADING.findall(_user_text(request)))


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def measure(
    config: CliBenchConfig, *, log: Callable[[str], None] = lambda _: None
) -> CliBenchReport:
    """Build the folders and run every case; returns the report."""
    started = time.monotonic()
    cases: list[CaseFigures] = []
    with (
        # A worker still ending may write into it as it goes: its figures are not lost.
        tempfile.TemporaryDirectory(
            prefix="asyncrecall-bench-cli-", ignore_cleanup_errors=True
        ) as tmp,
        LocalServer() as server,
    ):
        bench = _Bench(config, server, Path(tmp), log)
        for files in config.files:
            folder = Path(tmp) / f"memory-{files}"
            gold = build_folder(folder, files, seed=config.seed + files)
            generation = 0
            for state in config.states:
                for tools in config.tools:
                    log(f"{files} files, {state}, {'tool round' if tools else 'no tool'}")
                    # A first run reads the folder, as the previous session would have.
                    bench.process(folder, memory=True, tools=tools, gold=gold)
                    on: list[ProcessRun] = []
                    off: list[ProcessRun] = []
                    for rep in range(config.runs):
                        if state == "changed":
                            generation += 1
                            rewrite_notes(
                                folder, files - 1, seed=config.seed + files, generation=generation
                            )
                        order = (True, False) if rep % 2 == 0 else (False, True)
                        for memory in order:
                            result = bench.process(folder, memory=memory, tools=tools, gold=gold)
                            (on if memory else off).append(result)
                    cases.append(CaseFigures(files, state, tools, on, off))
                    server.reset()
    return CliBenchReport(config, cases, time.monotonic() - started)


# -- command line ------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench cli``. It always runs against its own local server."""
    parser.add_argument(
        "--runs",
        type=int,
        metavar="N",
        help=f"memory-on processes per case, each paired with a --no-memory one "
        f"(default {_DEFAULT_RUNS})",
    )
    parser.add_argument(
        "--files",
        metavar="N[,N]",
        help="folder sizes, comma-separated (default 200,2000)",
    )
    parser.add_argument(
        "--source",
        type=Path,
        metavar="DIR",
        help="the asyncrecall source folder the measured processes import "
        "(default: this one; another checkout's src/ measures that code)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def config_from_args(args: argparse.Namespace) -> CliBenchConfig:
    """The run's configuration; bad values are a :class:`ConfigError` (exit 2)."""
    runs: int = _DEFAULT_RUNS if args.runs is None else args.runs
    if runs < 1:
        raise ConfigError(f"--runs must be 1 or more, got {runs}")
    files: tuple[int, ...] = _DEFAULT_FILES
    if args.files:
        try:
            files = tuple(int(part) for part in str(args.files).split(","))
        except ValueError as exc:
            raise ConfigError(
                f"--files must be numbers separated by commas, got {args.files!r}"
            ) from exc
        if any(n < 2 for n in files):
            raise ConfigError(f"--files must be 2 or more each, got {args.files!r}")
    source: Path | None = args.source
    if source is not None and not (source / "asyncrecall" / "__init__.py").is_file():
        raise ConfigError(f"--source {source} holds no asyncrecall package")
    return CliBenchConfig(runs=runs, files=files, source=source)


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the benchmark and print the table (or ``--json``); progress goes to stderr."""
    del settings  # the benchmark brings its own server and folders
    config = config_from_args(args)
    err = Console(stderr=True)
    report = measure(config, log=lambda text: err.print(text, highlight=False))
    if args.json:
        Console(soft_wrap=True).print_json(json.dumps(report.as_json()))
        return 0
    out = Console()
    render(report, out if out.is_terminal else Console(width=160))
    return 0


def render(report: CliBenchReport, out: Console) -> None:
    """The table: one row per case."""
    table = Table(title=f"asyncrecall run, new processes ({report.config.runs} per case)")
    for name in (
        "case", "memory in 1st request", "gold in 1st request", "gold by the answer",
        "1st request: memory on", "off", "added (paired p50)", "added CPU (paired p50)",
        "answer to exit: on", "off",
    ):  # fmt: skip
        table.add_column(name, justify="left" if name == "case" else "right")
    for case in report.cases:
        data = case.as_json()
        first, cpu, exit_ = data["first_request_ms"], data["first_request_cpu_ms"], data["exit_ms"]
        table.add_row(
            case.key,
            f"{data['memory_first']:.0%}",
            f"{data['gold_first']:.0%}",
            f"{data['gold_answer']:.0%}",
            f"{first['memory_on_p50']:,.1f} ms",
            f"{first['memory_off_p50']:,.1f} ms",
            f"{first['added_p50']:+,.1f} ms",
            f"{cpu['added_p50']:+,.1f} ms",
            f"{exit_['memory_on_p50']:,.1f} ms",
            f"{exit_['memory_off_p50']:,.1f} ms",
        )
    out.print(table)
    out.print(f"wall clock {report.wall_s:,.0f} s")

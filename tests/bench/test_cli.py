"""``asyncrecall bench cli``: new ``asyncrecall run`` processes against a local server.

A smoke run with tiny figures (one case, one pair of processes): the wire is read
right, the pairing holds, bad flags are one-line errors. No duration is asserted."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asyncrecall import ConfigError
from asyncrecall.memory import FolderStore
from asyncrecall_bench._cli import (
    GOLD,
    CliBenchConfig,
    build_folder,
    config_from_args,
    measure,
    process_cpu_ms,
    rewrite_notes,
)


@pytest.mark.slow
def test_a_tiny_run_reads_memory_and_times_off_the_wire() -> None:
    """One known-folder case, one memory-on process paired with one --no-memory one:
    both answer (exit 0); the memory-on process's first request carries the relevant
    memory (the folder of 12 notes is read during the process's imports: its read
    takes a few ms, the imports hundreds); the --no-memory one carries none; every
    figure is present."""
    config = CliBenchConfig(runs=1, files=(12,), states=("known",), tools=(False,))
    report = measure(config)
    (case,) = report.cases
    (on,), (off,) = case.on, case.off
    assert on.memory and not off.memory
    assert on.exit_code == 0 and off.exit_code == 0
    assert on.memory_first and on.gold_first and on.gold_answer
    assert not off.memory_first and not off.gold_answer
    assert on.first_request_ms > 0 and off.first_request_ms > 0
    # The imports alone (the agent, the OpenAI SDK) take well over 50 ms of CPU, and a
    # process cannot use more CPU than two cores give it in its wall time.
    for process in (on, off):
        assert 50 < process.first_request_cpu_ms < 2 * process.first_request_ms
    data = report.as_json()["cases"][0]
    assert data["runs"] == 1 and data["errors"] == 0
    assert set(data["first_request_ms"]) == {"memory_on_p50", "memory_off_p50", "added_p50"}
    assert set(data["first_request_cpu_ms"]) == set(data["first_request_ms"])
    assert set(data["exit_ms"]) == {"memory_on_p50", "memory_off_p50"}


def test_the_folder_has_the_relevant_memory_newest_and_english_notes(tmp_path: Path) -> None:
    """build_folder: files - 1 notes and the relevant memory, newest; a rewrite changes
    every note's text and modification time."""
    gold = build_folder(tmp_path / "m", 30, seed=1)
    docs = FolderStore(tmp_path / "m").scan()
    assert len(docs) == 30 and docs[0].rel_path == gold and docs[0].name == GOLD.name
    before = {d.rel_path: (d.body, d.mtime) for d in docs[1:]}
    rewrite_notes(tmp_path / "m", 29, seed=1, generation=1)
    after = {d.rel_path: (d.body, d.mtime) for d in FolderStore(tmp_path / "m").scan()[1:]}
    assert before.keys() == after.keys()
    assert all(before[k][0] != after[k][0] for k in before)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"runs": 0}, "--runs must be 1 or more"),
        ({"files": "200,x"}, "--files must be numbers"),
        ({"files": "1"}, "--files must be 2 or more"),
        ({"source": Path("/nonexistent")}, "holds no asyncrecall package"),
    ],
)
def test_bad_flags_are_config_errors(flags: dict[str, object], message: str) -> None:
    args = argparse.Namespace(**{"runs": None, "files": None, "source": None, **flags})
    with pytest.raises(ConfigError, match=message):
        config_from_args(args)


def _burnt(*, keep_thread: bool) -> tuple[float, float]:
    """A child process that burns 0.3 s of CPU in a second thread (which then waits,
    alive, or ends): the CPU time it reports itself, and ``process_cpu_ms`` of it."""
    then = "done.wait()" if keep_thread else "pass"  # waits alive, or ends
    wait = "burnt.wait()" if keep_thread else "thread.join()"
    code = (
        "import threading, time, sys\n"
        "burnt, done = threading.Event(), threading.Event()\n"
        "def burn():\n"
        "    end = time.thread_time() + 0.3\n"
        "    while time.thread_time() < end: pass\n"
        f"    burnt.set(); {then}\n"
        "thread = threading.Thread(target=burn, daemon=True); thread.start()\n"
        f"{wait}\n"
        "print(time.process_time() * 1000, flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        reported = float(child.stdout.readline())
        measured = process_cpu_ms(child.pid)
        child.stdin.close()
    assert math.isnan(process_cpu_ms(child.pid))  # gone
    assert reported >= 300
    return reported, measured


def test_process_cpu_counts_every_live_thread_and_nothing_for_a_process_gone() -> None:
    """process_cpu_ms reads what a live process used, its other threads included (a
    child burns 0.3 s of CPU in a second thread that then waits, alive), and NaN once
    the process is gone."""
    reported, measured = _burnt(keep_thread=True)
    assert reported - 20 <= measured <= reported + 50


def test_process_cpu_counts_threads_that_already_ended() -> None:
    """The CPU of a thread that has ended is counted too (to the clock tick): the CLI's
    memory warm-up thread ends long before the first request, and its work is what the
    memory-on figure is there to show."""
    reported, measured = _burnt(keep_thread=False)
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    # The ended thread's 0.3 s is in (not counting it reads 0.3 s low); above, the
    # child's own work after it printed, which a busy machine made 20 ms once.
    assert reported - 2 * tick_ms <= measured <= reported + 50

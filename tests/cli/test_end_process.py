"""``run`` and ``chat`` end their process without the interpreter's teardown
(:func:`end_process`), and still do what its exit does for everyone else."""

from __future__ import annotations

import os
import subprocess
import sys

ENDING = """
import atexit, sys, threading, time
from asyncrecall.cli._common import end_process, exit_soon
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
def late():
    time.sleep(0.2)
    sys.stdout.write("thread finished\\n")
threading.Thread(target=late).start()
sys.stdout.write("buffered, not flushed\\n")
if sys.argv[1] == "soon":
    exit_soon()
end_process(3)
"""


def _ended(mode: str) -> subprocess.CompletedProcess[str]:
    # Buffered output, as at a user's terminal or pipe.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-c", ENDING, mode], capture_output=True,
                          text=True, timeout=60, check=False, env=env)  # fmt: skip


def test_the_fast_end_joins_threads_runs_atexit_and_flushes() -> None:
    """Threads that are not daemons finish, ``atexit`` handlers run (coverage's and
    logging's are such), buffered output is written, and the exit code is the one given."""
    done = _ended("soon")
    assert done.returncode == 3
    assert done.stdout.splitlines() == ["buffered, not flushed", "thread finished"]
    assert done.stderr == "atexit ran\n"


def test_without_exit_soon_it_is_the_usual_exit() -> None:
    done = _ended("usual")
    assert done.returncode == 3
    assert done.stdout.splitlines() == ["buffered, not flushed", "thread finished"]
    assert done.stderr == "atexit ran\n"

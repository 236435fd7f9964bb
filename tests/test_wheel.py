"""The runtime wheel, as a user installs it: built from this checkout, installed without
extras into a fresh virtual environment, outside the checkout.

It holds no benchmark suite and no conformance kit (distributions of their own:
``benchmarks/``, ``conformance/``); the command line and the memory commands work from
it alone; ``asyncrecall bench`` says how to install the benchmarks; ``import
asyncrecall.memory`` stays light. pip fetches what it needs from the package index (or
its cache): hatchling to build, the runtime's dependencies to install.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Hang guards only: building and installing fetch from the index on a busy machine.
_PIP_GUARD_S = 900
_RUN_GUARD_S = 180
#: ``import asyncrecall.memory``: the budget of CPU time, median of several fresh processes.
_IMPORT_BUDGET_MS = 300.0
_IMPORT_RUNS = 7

# One worker builds and installs the wheel once (loadgroup; the fixture lives for the
# worker's session, as the worker may run other modules' tests between these).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(3 * _PIP_GUARD_S),
    pytest.mark.xdist_group("wheel"),
]


def _clean_env(home: Path) -> dict[str, str]:
    """The environment without what would point the venv's Python at this checkout (or
    at a coverage run, an endpoint or the user's memory)."""
    dropped = ("PYTHON", "COV_", "COVERAGE_", "ASYNCRECALL_", "OPENAI_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env["ASYNCRECALL_HOME"] = str(home)
    return env


def _build(project: Path, out: Path, env: dict[str, str]) -> Path:
    """The wheel of ``project`` (its own ``pyproject.toml``), built into ``out``."""
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out)]
    subprocess.run([*command, str(project)], check=True, env=env, timeout=_PIP_GUARD_S)
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """(the runtime wheel, the fresh venv's bin folder, a scratch folder outside the
    checkout holding ``home``)."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = _clean_env(tmp / "home")
    wheel = _build(ROOT, tmp / "dist", env)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=_RUN_GUARD_S)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True, env=env, cwd=tmp, timeout=_PIP_GUARD_S,
    )  # fmt: skip
    yield wheel, bin_dir, tmp


def _run(
    installed: tuple[Path, Path, Path], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    _, bin_dir, tmp = installed
    return subprocess.run(
        [str(bin_dir / "asyncrecall"), *args],
        capture_output=True, text=True, env=_clean_env(tmp / "home"), cwd=tmp,
        timeout=_RUN_GUARD_S, check=check,
    )  # fmt: skip


def test_the_wheel_holds_no_benchmarks_and_no_conformance_kit(
    installed: tuple[Path, Path, Path],
) -> None:
    """The runtime package, its data and its metadata; nothing of the benchmark suite or
    the conformance kit (the CLI's ``bench`` command is a stub that says how to install
    them), and the test doubles apps use stay, and the Perl hook client."""
    wheel, _, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert "asyncrecall/memory/__init__.py" in names
    assert "asyncrecall/testing/_server.py" in names  # LocalServer stays with the runtime
    # The console's pages and their style ship with it.
    assert "asyncrecall/cli/console/templates/base.html" in names
    assert "asyncrecall/cli/console/static/console.js" in names
    assert "asyncrecall/cli/hooks/_client.pl" in names  # the agents' hooks run it
    assert [n for n in names if n.startswith(("asyncrecall/bench/", "asyncrecall_bench/"))] == []
    assert [n for n in names if "conformance" in n] == []
    assert [n for n in names if n.endswith((".json", ".jsonl"))] == []  # the bench's data


def test_the_installed_command_keeps_memory_outside_the_checkout(
    installed: tuple[Path, Path, Path],
) -> None:
    """``asyncrecall --help``, ``memory add`` and ``memory recall --json`` from the wheel
    alone: the recall picks the memory the question is about."""
    _, bin_dir, tmp = installed
    assert "memory" in _run(installed, "--help").stdout
    folder = tmp / "memory"
    _run(
        installed, "memory", "add", "--memory-dir", str(folder), "--name", "deploy flow",
        "--type", "project", "--description", "Deploys go through staging before production",
        "--content", "Every deploy goes to the staging cluster first, production after.",
    )  # fmt: skip
    _run(
        installed, "memory", "add", "--memory-dir", str(folder), "--name", "commit style",
        "--type", "feedback", "--description", "Commit messages: imperative, under 60 chars",
        "--content", "Imperative subject, at most 60 characters, no trailing period.",
    )  # fmt: skip
    recall = _run(
        installed, "memory", "recall", "--memory-dir", str(folder), "--json",
        "how do deploys reach production?",
    )  # fmt: skip
    chosen = [memory["name"] for memory in json.loads(recall.stdout)["selected"]]
    assert chosen == ["deploy flow"]
    module = subprocess.run(
        [str(bin_dir / "python"), "-c", "import asyncrecall; print(asyncrecall.__file__)"],
        capture_output=True, text=True, env=_clean_env(tmp / "home"), cwd=tmp, check=True,
    ).stdout  # fmt: skip
    assert not Path(module.strip()).is_relative_to(ROOT)  # the wheel's copy, not the checkout


def test_bench_without_the_benchmarks_says_how_to_install_them(
    installed: tuple[Path, Path, Path],
) -> None:
    """One line on stderr naming the distribution to install, exit 2."""
    done = _run(installed, "bench", "latency", "--json", check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "asyncrecall-bench" in done.stderr


def test_import_asyncrecall_memory_stays_light(installed: tuple[Path, Path, Path]) -> None:
    """``import asyncrecall.memory`` in a new process of the installed wheel: the median
    over several processes takes under 300 ms of CPU (CPU, not wall-clock time: on a
    busy shared machine the wall clock also counts the other jobs)."""
    _, bin_dir, tmp = installed
    code = (
        "import time; start = time.process_time(); import asyncrecall.memory; "
        "print((time.process_time() - start) * 1000)"
    )
    env = _clean_env(tmp / "home")

    def once() -> float:
        done = subprocess.run(
            [str(bin_dir / "python"), "-c", code],
            capture_output=True, text=True, env=env, cwd=tmp, check=True, timeout=_RUN_GUARD_S,
        )  # fmt: skip
        return float(done.stdout)

    times = [once() for _ in range(_IMPORT_RUNS)]
    assert statistics.median(times) < _IMPORT_BUDGET_MS, times


def test_the_bench_wheel_carries_its_data(tmp_path: Path) -> None:
    """``asyncrecall-bench``'s wheel: the package with its data files (the security
    cases, the multilingual sets), and none of the scripts beside it."""
    wheel = _build(ROOT / "benchmarks", tmp_path, _clean_env(tmp_path / "home"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "asyncrecall_bench/__init__.py" in names
    assert "asyncrecall_bench/py.typed" in names
    assert {
        "asyncrecall_bench/multilingual/fr.jsonl",
        "asyncrecall_bench/security/user_paste.json",
    } <= set(names)
    assert len([n for n in names if n.startswith("asyncrecall_bench/security/")]) == len(
        list((ROOT / "benchmarks/src/asyncrecall_bench/security").glob("*.json"))
    )
    assert {n.split("/")[0] for n in names} == {
        "asyncrecall_bench",
        "asyncrecall_bench-0.1.0.dist-info",
    }


def test_the_conformance_wheel_is_the_kit(tmp_path: Path) -> None:
    """``asyncrecall-conformance``'s wheel: the kit's package, which needs pytest and
    pytest-asyncio (its metadata says so) and the runtime of the same release."""
    wheel = _build(ROOT / "conformance", tmp_path, _clean_env(tmp_path / "home"))
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    assert "asyncrecall_conformance/__init__.py" in names
    assert {n.split("/")[0] for n in names} == {
        "asyncrecall_conformance",
        "asyncrecall_conformance-0.1.0.dist-info",
    }
    metadata = archive.read("asyncrecall_conformance-0.1.0.dist-info/METADATA").decode()
    requires = [
        line.split(": ", 1)[1]
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist: ")
    ]
    assert {r.split(">")[0].split("=")[0] for r in requires} == {
        "asyncrecall",
        "pytest",
        "pytest-asyncio",
    }

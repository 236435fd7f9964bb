"""``asyncrecall bench``: found when the ``asyncrecall-bench`` distribution is installed,
imported only when chosen, and one clear line when it is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asyncrecall.cli._bench import MISSING
from asyncrecall_bench import KINDS

# Runs the command line with the benchmark package made unimportable (as if only the
# runtime wheel were installed): an import of it raises ImportError.
_WITHOUT_BENCH = (
    "import sys; sys.modules['asyncrecall_bench'] = None; from asyncrecall.cli import main; main()"
)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    return env


def test_bench_lists_every_benchmark_where_the_package_is_installed(tmp_path: Path) -> None:
    """``asyncrecall bench --help`` names each benchmark of the package; each takes its
    own flags (``bench quality --help`` shows ``--negatives``)."""
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "--help"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for kind in ("latency", "quality", "overhead", *KINDS):
        assert f"    {kind}" in done.stdout, kind
    quality = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "quality", "--help"],
        capture_output=True, text=True, env=_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert quality.returncode == 0 and "--negatives" in quality.stdout


@pytest.mark.parametrize(
    "words", [["latency", "--json"], ["quality", "--negatives"], ["--help"], []]
)
def test_without_the_package_bench_says_how_to_install_it_and_exits_2(
    tmp_path: Path, words: list[str]
) -> None:
    """Only the runtime installed: whatever follows ``bench``, one line on stderr says how
    to install the benchmarks, nothing on stdout, exit 2 (bad usage or configuration, as
    for ``asyncrecall mcp`` without its extra)."""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_BENCH, "bench", *words],
        capture_output=True, text=True, env=_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"asyncrecall: {MISSING}\n"
    assert "asyncrecall-bench" in MISSING and "pip install ./benchmarks" in MISSING


def test_other_commands_do_not_import_the_benchmarks(tmp_path: Path) -> None:
    """The package is imported when ``bench`` is the command, and by no other command:
    ``memory path``, ``--help`` and ``demo --help`` leave it unimported."""
    code = (
        "import sys, contextlib\n"
        "from asyncrecall.cli import main\n"
        "for argv in (['memory', 'path'], ['--help'], ['demo', '--help'], {bench}):\n"
        "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(None):\n"
        "        main(argv)\n"
        "    print(argv[0], 'asyncrecall_bench' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code.format(bench="['bench', '--help']")],
        capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=120,
        check=True,
    ).stdout.split()  # fmt: skip
    assert out == ["memory", "False", "--help", "False", "demo", "False", "bench", "True"]

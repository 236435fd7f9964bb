"""The command line's frame: only the chosen command is imported."""

from __future__ import annotations

import subprocess
import sys


def _loaded_after(*argv: str) -> list[str]:
    code = (
        "import sys\n"
        "from asyncrecall.cli import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('asyncrecall.agent', 'openai', 'asyncrecall.memory')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip().splitlines()


def test_version_and_help_import_no_command() -> None:
    """`--version` and `--help` load neither the agent, the memory package nor the SDK."""
    assert _loaded_after("--version")[-1] == "[]"
    assert _loaded_after("--help")[-1] == "[]"


def test_a_memory_command_does_not_import_the_agent_or_the_sdk() -> None:
    assert _loaded_after("memory", "--help")[-1] == "['asyncrecall.memory']"

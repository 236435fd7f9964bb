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
    return _python(code).splitlines()


def _python(code: str) -> str:
    """What ``code`` prints, run in a new interpreter (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_version_and_help_import_no_command() -> None:
    """`--version` and `--help` load neither the agent, the memory package nor the SDK."""
    assert _loaded_after("--version")[-1] == "[]"
    assert _loaded_after("--help")[-1] == "[]"


def test_a_memory_command_does_not_import_the_agent_or_the_sdk() -> None:
    assert _loaded_after("memory", "--help")[-1] == "['asyncrecall.memory']"


def test_run_builds_its_session_without_collections_and_collects_again_before_the_loop() -> None:
    """The cyclic collector is off while ``run`` imports and builds its session (about
    230 collections of nothing, on the way to a new process's first request), on again
    once the loop runs, and on after any way out of ``main``."""
    code = (
        "import gc\n"
        "from types import SimpleNamespace\n"
        "from asyncrecall._exceptions import ConfigError\n"
        "from asyncrecall.cli import _run, main\n"
        "seen = []\n"
        "def fake_open(settings, handoff, hold_recall=False):\n"
        "    seen.append(('building', gc.isenabled()))\n"
        "    if len(seen) > 2:\n"
        "        raise ConfigError('no session')\n"
        "    return SimpleNamespace(extraction=None)\n"
        "async def fake_run_once(session, settings, prompt):\n"
        "    seen.append(('running', gc.isenabled()))\n"
        "    return 0\n"
        "_run.open_session, _run.run_once = fake_open, fake_run_once\n"
        "argv = ['run', 'hi', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm']\n"
        "seen.append(('exit', main(argv), gc.isenabled()))\n"
        "seen.append(('exit', main(argv), gc.isenabled()))\n"
        "print(seen)\n"
    )
    assert _python(code) == str(
        [
            ("building", False),
            ("running", True),
            ("exit", 0, True),
            ("building", False),
            ("exit", 2, True),
        ]
    )

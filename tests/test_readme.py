"""The README's examples run, and print what the README says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _block(marker: str) -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {re.escape(marker)} -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert found, f"no block marked {marker!r} in README.md"
    return found.group(1)


def test_library_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(_block("example: readme-library"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == _block("output: readme-library")


def test_readme_shows_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text

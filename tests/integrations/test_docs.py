"""Each framework page's example runs and prints what the page says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "frameworks"
PAGES = {
    "pydantic-ai": "pydantic-ai.md",
    "openai-agents": "openai-agents.md",
    "langchain": "langchain.md",
}


def _block(page: Path, marker: str) -> str:
    found = re.search(
        rf"<!-- {re.escape(marker)} -->\s*```[a-z]*\n(.*?)```", page.read_text("utf-8"), re.S
    )
    assert found, f"no block marked {marker!r} in {page.name}"
    return found.group(1)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page_example_prints_what_the_page_shows(name: str, tmp_path: Path) -> None:
    """The example of docs/frameworks/<page> runs offline and prints the page's output."""
    page = DOCS / PAGES[name]
    script = tmp_path / "example.py"
    script.write_text(_block(page, f"example: {name}"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == _block(page, f"output: {name}")

"""Each framework page's example runs and prints what the page says it prints."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "frameworks"
PAGES = {
    "pydantic-ai": "pydantic-ai.md",
    "openai-agents": "openai-agents.md",
    "langchain": "langchain.md",
    "claude-agent-sdk": "claude-agent-sdk.md",
}


def _block(page: Path, marker: str) -> str:
    found = re.search(
        rf"<!-- {re.escape(marker)} -->\s*```[a-z]*\n(.*?)```", page.read_text("utf-8"), re.S
    )
    assert found, f"no block marked {marker!r} in {page.name}"
    return found.group(1)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_page_example_prints_what_the_page_shows(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example of docs/frameworks/<page> runs offline and prints the page's output.

    It runs in this process as a script (``runpy``; its own ``asyncio.run``), not in a
    subprocess: under the suite's subprocess coverage the frameworks' anyio connection
    code failed in the child (an ``InvalidStateError`` in anyio's task group) though the
    same script passes under ``coverage run``.
    """
    page = DOCS / PAGES[name]
    script = tmp_path / "example.py"
    script.write_text(_block(page, f"example: {name}"), encoding="utf-8")
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out == _block(page, f"output: {name}")

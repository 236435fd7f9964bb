"""Each framework page's example runs and prints what the page says it prints."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import LITELLM_WARNINGS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "frameworks"
PAGES = {
    "pydantic-ai": "pydantic-ai.md",
    "openai-agents": "openai-agents.md",
    "langchain": "langchain.md",
    "google-adk": "google-adk.md",
    "claude-agent-sdk": "claude-agent-sdk.md",
}


def _block(page: Path, marker: str) -> str:
    found = re.search(
        rf"<!-- {re.escape(marker)} -->\s*```[a-z]*\n(.*?)```", page.read_text("utf-8"), re.S
    )
    assert found, f"no block marked {marker!r} in {page.name}"
    return found.group(1)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=LITELLM_WARNINGS if n == "google-adk" else ()) for n in sorted(PAGES)],
)
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


def test_conformance_page_example_passes_the_kit(tmp_path: Path) -> None:
    """The driver of docs/frameworks/conformance.md passes the kit when pytest runs the
    page's example as a test file of its own, outside this repository's configuration
    (pytest-asyncio's strict mode, no conftest): a case of each kind but the slow (g)."""
    test_file = tmp_path / "test_example.py"
    test_file.write_text(_block(DOCS / "conformance.md", "example: conformance"), "utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", "utf-8")
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_", "COVERAGE_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root / "src"), str(root / "conformance" / "src"), env.get("PYTHONPATH", "")]
    )
    chosen = (
        "a-slow or b-settled or c-hang-up-when-run-is-left or d-shown-memory-app or e- or f-stale"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", chosen],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "6 passed" in done.stdout, done.stdout[-3000:]

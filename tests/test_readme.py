"""The README's and the docs' Python examples run, and print what the page says they print;
the README stays a README (short, no lab notes)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _block(marker: str, page: Path = README) -> str:
    """The fenced block right after ``<!-- marker -->`` on ``page``."""
    text = page.read_text(encoding="utf-8")
    found = re.search(rf"<!-- {re.escape(marker)} -->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert found, f"no block marked {marker!r} in {page.name}"
    block = found.group(1)
    return block


def _run_example(tmp_path: Path, page: Path, name: str) -> None:
    script = tmp_path / "example.py"
    script.write_text(_block(f"example: {name}", page), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == _block(f"output: {name}", page)


def test_the_prefetcher_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    """The README's 30-second example of ``RecallPrefetcher`` runs as written and prints
    what the README shows: nothing at the user query (the side query is still out), the
    block after the tool results."""
    _run_example(tmp_path, README, "readme-library")


def test_the_agent_example_prints_what_its_page_shows(tmp_path: Path) -> None:
    """docs/agent.md's ``AgentClient`` example runs as written and prints what it shows."""
    _run_example(tmp_path, DOCS / "agent.md", "agent-library")


def test_readme_shows_the_test_command_ci_runs() -> None:
    """CI calls the README's test command: the README keeps a line that runs ``make
    test`` (and names ``make demo``)."""
    text = README.read_text(encoding="utf-8")
    assert re.search(r"^make test\b", text, re.M)
    assert "make demo" in text


def test_readme_shows_the_primitive_and_stays_short() -> None:
    """The README is at most 250 lines and shows ``RecallPrefetcher`` in code."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert "RecallPrefetcher(" in _block("example: readme-library")


_LAB_NOTES = re.compile(r"load average|\bload \d|`[0-9a-f]{7,40}`|\bmain at [0-9a-f]{7}")


@pytest.mark.parametrize(
    "page",
    [README, ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_lab_notes_stay_in_the_benchmarks_page(page: Path) -> None:
    """Commit hashes and load averages date a figure: they live in docs/benchmarks.md
    beside it, nowhere else in the docs."""
    if page == DOCS / "benchmarks.md":
        return
    found = _LAB_NOTES.findall(page.read_text(encoding="utf-8"))
    assert found == [], f"{page.name}: {found}"


def test_the_readmes_links_point_at_files() -> None:
    """Every relative link of the README names a file of the repository."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert targets
    assert [t for t in targets if not (ROOT / t).is_file()] == []

"""The console as people use it: a real headless Chromium (Debian's ``chromium``,
driven by Playwright) against ``asyncrecall console`` in a subprocess.

One browser for the module, a fresh context (no cookie) per test; every test opens
the printed URL, as a user pastes it, and ends with no error in the browser's console.
Screenshots go to ``artifacts/console/`` (CI keeps the folder). Without chromium or
Playwright the module skips saying so; ``ASYNCRECALL_REQUIRE_BROWSER=1`` (set by
``.ci/run``) makes that an error.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.testing import LocalServer, Reply

from .conftest import ConsoleProcess, Folder

#: One worker runs the module: one console, one browser launch.
pytestmark = pytest.mark.xdist_group("console_browser")

REQUIRE = os.environ.get("ASYNCRECALL_REQUIRE_BROWSER") == "1"
CHROMIUM = os.environ.get("ASYNCRECALL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
#: The flags of a quiet, offline headless Chromium.
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "console"
#: The README's figures (``bench latency|recall --plot``).
FIGURES = ROOT / "docs" / "figures"
#: Milliseconds a page or a locator may take (a hang guard on busy cores).
WAIT_MS = 60_000


def _unavailable(reason: str) -> None:
    message = f"console browser tests NOT RUN: {reason}"
    if REQUIRE:
        pytest.fail(f"{message} (ASYNCRECALL_REQUIRE_BROWSER=1 makes this an error)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright is not installed (pip install playwright)")
    if not Path(CHROMIUM).is_file():
        _unavailable(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


class Tab:
    """A page in a fresh context, with what the browser's console reported."""

    def __init__(self, page: Any, name: str) -> None:
        self.page = page
        self.name = name
        self.errors: list[str] = []
        page.set_default_timeout(WAIT_MS)
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"{message.type}: {message.text}")

    def shot(self, step: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{self.name}-{step}.png"), full_page=True)


@pytest.fixture
def tab(browser: Any, console: ConsoleProcess, request: pytest.FixtureRequest) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    try:
        opened = Tab(context.new_page(), request.node.name.removeprefix("test_"))
        opened.page.goto(console.url)  # the URL the command printed, token and all
        yield opened
        assert opened.errors == [], opened.errors
    finally:
        context.close()


def test_search_and_open_a_memory(tab: Tab) -> None:
    """The printed URL opens the memory list; a search narrows it; a memory opens with
    its text, provenance and history."""
    page = tab.page
    assert "token=" not in page.url  # exchanged for a cookie
    assert page.locator("table.list tbody tr").count() == 3
    page.get_by_label("search").fill("fly.io")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/memories?q=fly.io*")
    rows = page.locator("table.list tbody tr")
    assert rows.count() == 1
    tab.shot("search")
    rows.get_by_role("link", name="Deploy target").click()
    page.wait_for_url("**/memory?name=Deploy*")
    assert "fly.io" in page.locator("#body").inner_text()
    assert page.get_by_role("heading", name="A change waits").is_visible()
    assert page.get_by_role("heading", name="Provenance").is_visible()
    assert page.locator("section.version").count() == 2
    tab.shot("memory")


def test_a_filter_applies_when_chosen(tab: Tab) -> None:
    """Choosing "held" in the filter shows only what recall leaves out or what waits (no
    test of the module confirms "Deploy target"'s waiting change; "Editor" is the user's)."""
    page = tab.page
    page.get_by_label("held", exact=True).select_option("held")
    page.wait_for_url("**held=held*")
    rows = page.locator("table.list tbody tr")
    names = rows.locator("td:first-child a").all_inner_texts()
    assert "Deploy target" in names and "Editor" not in names
    assert rows.locator(".tag.held").count() == len(names)


def test_confirm_a_held_memory(tab: Tab, folder: Folder) -> None:
    """Confirm in the held inbox lifts the hold: the next ``memory list --json`` (another
    process) shows the memory no longer quarantined."""
    assert folder.listed()["Coffee"]["quarantined"]
    page = tab.page
    page.get_by_role("link", name="Held").click()
    held = page.locator("section.held-item[data-name='Coffee']")
    assert "imported without --trusted" in held.locator(".reasons").inner_text()
    tab.shot("inbox")
    held.get_by_role("button", name="Confirm").click()
    page.get_by_role("status").wait_for()
    assert "confirmed Coffee" in page.get_by_role("status").inner_text()
    assert page.locator("section.held-item[data-name='Coffee']").count() == 0
    tab.shot("confirmed")
    listed = folder.listed()["Coffee"]
    assert listed["quarantined"] is False and listed["pending"] is False


def test_revert_a_change(tab: Tab, folder: Folder) -> None:
    """ "Undo the newest write" on a memory's page brings back its text before that
    write, in the store (read back by ``memory show --json``)."""
    assert "helix" in folder.json("memory", "show", "Editor")["body"]
    page = tab.page
    page.goto(page.url.split("/memories")[0] + "/memory?name=Editor")
    page.get_by_role("button", name="Undo the newest write").click()
    page.get_by_role("status").wait_for()
    assert "vim" in page.locator("#body").inner_text()
    tab.shot("reverted")
    assert folder.json("memory", "show", "Editor")["body"].strip() == "The user edits in vim."
    ops = [r["op"] for r in folder.json("memory", "history", "Editor")]
    assert ops == ["save", "save", "revert"]


def test_a_run_s_recall_trace_and_the_figures(
    tab: Tab, console: ConsoleProcess, folder: Folder, local_server: LocalServer
) -> None:
    """A real ``run --event-log FILE`` (the console's log) shows on the traces page: its
    message, where the memory went and the file selected; the benchmarks page shows the
    figures of ``--figures DIR`` (the README's, drawn by ``bench ... --plot``)."""
    local_server.set_default("side", Reply(json={"selected_memories": ["deploy-target.md"]}))
    local_server.set_default("main", Reply(text="fly.io"))
    done = folder.cli(
        "run", "where do we deploy the app?", "--base-url", local_server.base_url,
        "--api-key", "test", "--model", "main", "--side-model", "side", "--no-extract",
        "--event-log", str(console.event_log),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = tab.page
    page.get_by_role("link", name="Recall traces").click()
    row = page.locator("table.traces tbody tr").filter(has_text="where do we deploy the app?")
    assert "deploy-target.md" in row.inner_text()
    assert "user_query" in row.inner_text() or "tool_result" in row.inner_text()
    tab.shot("traces")
    for figure in FIGURES.glob("*.svg"):
        shutil.copy(figure, console.figures / figure.name)
    page.get_by_role("link", name="Benchmarks").click()
    images = page.locator("figure img")
    assert images.count() == len(list(FIGURES.glob("*.svg"))) >= 1
    for n in range(images.count()):
        assert images.nth(n).evaluate("img => img.complete && img.naturalWidth > 0")
    tab.shot("figures")

"""The console's door, at the HTTP level (httpx against the real command): only the
token's holder, only through a loopback host name, a change only by a form of its own."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from .conftest import HANG_GUARD, ConsoleProcess, Folder

#: One worker runs the module: one console over one folder.
pytestmark = pytest.mark.xdist_group("console_http")


@pytest.fixture(scope="module")
def client(console: ConsoleProcess) -> httpx.Client:
    with httpx.Client(base_url=console.base, timeout=HANG_GUARD) as http:
        yield http  # type: ignore[misc]


def test_a_request_without_the_token_is_refused(
    console: ConsoleProcess, client: httpx.Client
) -> None:
    """Every page answers 403 to a request with neither the token nor its cookie, and to
    a wrong token; the refusal says where the token is."""
    for path in (
        "/",
        "/memories",
        "/memory?name=Coffee",
        "/held",
        "/traces",
        "/static/console.css",
    ):
        refused = client.get(path)
        assert refused.status_code == 403, path
        assert "token" in refused.text and "Coffee" not in refused.text
    last = "y" if console.token.endswith("x") else "x"  # one character off, never the same
    wrong = client.get("/memories", params={"token": console.token[:-1] + last})
    assert wrong.status_code == 403


def test_a_program_sends_the_token_as_a_bearer(console: ConsoleProcess) -> None:
    """``Authorization: Bearer TOKEN`` opens a page without the cookie (a scraper's way
    in); another token that way is refused."""
    with httpx.Client(base_url=console.base, timeout=HANG_GUARD) as fresh:
        ok = fresh.get("/memories", headers={"Authorization": f"Bearer {console.token}"})
        assert ok.status_code == 200 and "Coffee" in ok.text
        wrong = fresh.get("/memories", headers={"Authorization": f"Bearer {console.token}x"})
        assert wrong.status_code == 403


def test_prometheus_scrapes_the_console_with_its_token(console: ConsoleProcess) -> None:
    """With the otel extra the console serves ``/metrics`` (Prometheus's text format)
    behind the same door: with the bearer token it answers, without it 403."""
    with httpx.Client(base_url=console.base, timeout=HANG_GUARD) as fresh:
        assert fresh.get("/metrics").status_code == 403
        scraped = fresh.get("/metrics", headers={"Authorization": f"Bearer {console.token}"})
        assert scraped.status_code == 200, scraped.text
        assert scraped.headers["content-type"].startswith("text/plain")
        assert "# TYPE" in scraped.text and "Coffee" not in scraped.text


def test_a_request_naming_another_host_is_refused(
    console: ConsoleProcess, client: httpx.Client
) -> None:
    """DNS rebinding: a request whose Host is not the bound address or a loopback name is
    refused (400), even with the token and its cookie."""
    for host in ("evil.example", "127.0.0.1.evil.example", "attacker.localhost.example"):
        refused = client.get("/memories", params={"token": console.token}, headers={"Host": host})
        assert refused.status_code == 400, host
    ok = client.get("/memories", params={"token": console.token}, headers={"Host": "localhost"})
    assert ok.status_code == 303


def test_the_token_becomes_a_cookie_and_leaves_the_address(
    console: ConsoleProcess, client: httpx.Client
) -> None:
    """The URL's token is exchanged for an HttpOnly, SameSite=Strict cookie and a
    redirect to the same page without it; the cookie alone opens the pages after that."""
    first = client.get("/memories", params={"token": console.token, "q": "coffee"})
    assert first.status_code == 303
    assert first.headers["location"] == "/memories?q=coffee"
    cookie = first.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    page = client.get("/memories", params={"q": "coffee"})
    assert page.status_code == 200 and "Coffee" in page.text
    assert "Deploy target" not in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    # The redirect stays on this server, whatever the path looks like.
    odd = client.get(f"{console.base}//evil.example/x", params={"token": console.token})
    assert odd.status_code == 303 and odd.headers["location"] == "/evil.example/x"


def test_a_change_needs_the_form_token_and_this_origin(
    console: ConsoleProcess, client: httpx.Client, folder: Folder
) -> None:
    """A POST with the cookie but without the form's token, or from another origin, is
    refused (403) and writes nothing: another site's page cannot confirm a memory."""
    client.get("/", params={"token": console.token})  # the cookie
    bare = client.post("/held/confirm", data={"name": "Coffee"})
    assert bare.status_code == 403
    foreign = client.post(
        "/held/confirm",
        data={"name": "Coffee", "token": console.token},
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403
    assert folder.listed()["Coffee"]["quarantined"]


def test_a_stale_revert_writes_nothing(
    console: ConsoleProcess, client: httpx.Client, folder: Folder
) -> None:
    """A revert sent from a page that showed an older history (the memory was written
    since) is refused with 409, and the memory stays as it is."""
    client.get("/", params={"token": console.token})
    before = folder.json("memory", "history", "Editor")
    refused = client.post(
        "/memory/revert",
        data={"name": "Editor", "token": console.token, "latest": str(before[-1]["seq"] - 1)},
    )
    assert refused.status_code == 409 and "written since" in refused.text
    assert folder.json("memory", "history", "Editor") == before


def test_a_missing_extra_is_one_line_and_exit_2(folder: Folder) -> None:
    """Without the console's extra (uvicorn not importable) the command says which
    install it needs, in one line on stderr, and exits 2."""
    code = (
        "import sys; sys.modules['uvicorn'] = None; from asyncrecall.cli import main; "
        "sys.exit(main(['console', '--no-browser', '--port', '0']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=folder.env,
        cwd=folder.project, timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'asyncrecall[console]'" in lines[0]


def test_a_port_in_use_is_exit_2(console: ConsoleProcess, folder: Folder) -> None:
    """A port that cannot be listened on is one line and exit 2, before anything starts."""
    port = console.base.rsplit(":", 1)[1]
    done = folder.cli("console", "--no-browser", "--port", port)
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


def test_discard_drops_a_waiting_change_and_forgets_a_held_memory(
    console: ConsoleProcess, client: httpx.Client, folder: Folder
) -> None:
    """Discard keeps the user's text and drops the change waiting beside it; on a held
    memory it forgets it, a write in its history that ``memory revert`` undoes. (Last in
    the module: the tests above read the held memory.)"""
    client.get("/", params={"token": console.token})
    kept = client.post("/held/discard", data={"name": "Deploy target", "token": console.token})
    assert kept.status_code == 303
    deploy = folder.json("memory", "show", "Deploy target")
    assert deploy["pending"] is None and "fly.io" in deploy["body"]
    gone = client.post("/held/discard", data={"name": "Coffee", "token": console.token})
    assert gone.status_code == 303
    assert "Coffee" not in folder.listed()
    assert folder.json("memory", "history", "Coffee")[-1]["op"] == "forget"
    assert folder.cli("memory", "revert", "Coffee").returncode == 0
    assert folder.listed()["Coffee"]["quarantined"]

"""``asyncrecall memory ...`` run for real: a subprocess, a clean environment, temp folders."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.testing import LocalServer, Reply


class Cli:
    """Runs ``python -m asyncrecall`` with no OPENAI_*/ASYNCRECALL_* variables but a home."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.project = tmp_path / "project"
        self.project.mkdir()
        self.memory = tmp_path / "memory"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
        env["ASYNCRECALL_HOME"] = str(self.home)
        self.env = env

    def __call__(
        self, *args: str, input: str | None = None, memory_dir: bool = True
    ) -> subprocess.CompletedProcess[str]:
        extra = ["--memory-dir", str(self.memory)] if memory_dir else []
        return subprocess.run(
            [sys.executable, "-m", "asyncrecall", *args, *extra],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.project,
            timeout=60,
        )

    def json(self, *args: str, input: str | None = None) -> Any:
        done = self(*args, "--json", input=input)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_show_list_and_recall_print_text_as_written(cli: Cli) -> None:
    """A memory's text is printed as the user wrote it: ``:thumbsup:`` stays a code
    (rich replaced emoji codes even with markup off) and ``[b]`` stays brackets."""
    body = "React with :thumbsup: when [b]done[/b]."
    added = cli.json(
        "memory", "add", "--name", "Review :ok: habits", "--type", "feedback",
        "--description", "code review :eyes: etiquette", "--content", body,
    )  # fmt: skip
    shown = cli("memory", "show", added["rel_path"])
    assert shown.returncode == 0, shown.stderr
    assert body in shown.stdout and "Review :ok: habits" in shown.stdout
    listed = cli("memory", "list")
    assert ":eyes:" in listed.stdout and "\N{EYES}" not in listed.stdout
    recalled = cli("memory", "recall", "review habits thumbsup", "--selector", "lexical")
    assert recalled.returncode == 0, recalled.stderr
    assert ":thumbsup:" in recalled.stdout


def test_path_creates_the_folder_under_home_by_default(cli: Cli) -> None:
    """Without --memory-dir: $ASYNCRECALL_HOME/projects/<sanitised project>/memory, created."""
    done = cli("memory", "path", "--json", memory_dir=False)
    assert done.returncode == 0, done.stderr
    path = Path(json.loads(done.stdout)["path"])
    assert path.parent.parent == cli.home / "projects" and path.name == "memory"
    assert (path / "MEMORY.md").is_file()
    text = cli("memory", "path", memory_dir=False)
    assert text.stdout.strip() == str(path)


def test_add_list_show_forget_round_trip(cli: Cli) -> None:
    """add (--content and stdin), list, show and forget, each with --json."""
    added = cli.json(
        "memory",
        "add",
        "--name",
        "Testing policy",
        "--description",
        "tests: never mock the db",
        "--type",
        "feedback",
        "--content",
        "Use a real database.",
    )
    assert added["rel_path"] == "testing-policy.md" and added["type"] == "feedback"
    piped = cli.json(
        "memory", "add", "--name", "Deploy [prod]", "--type", "project", input="Staging first.\n"
    )
    assert piped["rel_path"] == "deploy-prod.md"

    listed = cli.json("memory", "list")
    assert sorted(d["name"] for d in listed) == ["Deploy [prod]", "Testing policy"]
    shown = cli.json("memory", "show", "Testing policy")
    assert shown["body"] == "Use a real database."
    assert shown["description"] == "tests: never mock the db"

    table = cli("memory", "list")
    assert table.returncode == 0 and "Deploy [prod]" in table.stdout

    forgotten = cli.json("memory", "forget", "deploy-prod.md")
    assert forgotten["name"] == "Deploy [prod]"
    assert [d["name"] for d in cli.json("memory", "list")] == ["Testing policy"]
    assert (cli.memory / "MEMORY.md").read_text() == (
        "- [Testing policy](testing-policy.md) — tests: never mock the db\n"
    )


def test_recall_lexical_without_an_endpoint(cli: Cli) -> None:
    """No endpoint, --selector lexical: the block is printed as the agent would send it."""
    cli.json("memory", "add", "--name", "Tea", "--type", "user", "--content", "Alice drinks tea.")
    cli.json("memory", "add", "--name", "Db", "--type", "project", "--content", "Real Postgres.")
    default = cli.json("memory", "recall", "what does alice drink")
    embedded = "hybrid" if importlib.util.find_spec("wordllama") else "lexical"
    assert default["strategy"] == embedded  # the best embedded selector by default
    assert [d["rel_path"] for d in default["selected"]] == ["tea.md"]
    cli.env["ASYNCRECALL_SELECTOR"] = "lexical"
    result = cli.json("memory", "recall", "what does alice drink")
    assert result["strategy"] == "lexical" and result["fallback_reason"] is None
    assert [d["rel_path"] for d in result["selected"]] == ["tea.md"]
    assert result["prompt"].startswith("<system-reminder>\n## Relevant memory")
    assert "### Tea (tea.md)" in result["prompt"]
    text = cli("memory", "recall", "what does alice drink")
    assert "strategy: lexical" in text.stdout and "### Tea (tea.md)" in text.stdout
    excluded = cli.json("memory", "recall", "what does alice drink", "--exclude", "tea.md")
    assert (excluded["selected"], excluded["prompt"]) == ([], "")


def test_recall_uses_the_side_model_of_the_configured_endpoint(
    cli: Cli, local_server: LocalServer
) -> None:
    """With an endpoint, recall sends the agent's side query; a 500 falls back with a warning."""
    cli.json("memory", "add", "--name", "Tea", "--type", "user", "--content", "Alice drinks tea.")
    endpoint = ["--base-url", local_server.base_url, "--model", "main", "--side-model", "side"]
    local_server.script("side", Reply(json={"selected_memories": ["tea.md"]}))
    result = cli.json("memory", "recall", "what does she drink?", *endpoint)
    assert (result["strategy"], [d["rel_path"] for d in result["selected"]]) == (
        "model",
        ["tea.md"],
    )
    side_queries = [r for r in local_server.requests if r.is_side_query]
    assert len(side_queries) == 1 and side_queries[0].model == "side"

    local_server.set_default("side", Reply(status=500, error_message="down"))
    done = cli("memory", "recall", "alice tea", *endpoint)
    assert done.returncode == 0, done.stderr
    assert "strategy: lexical" in done.stdout
    assert "warning" in done.stderr and "ModelServerError" in done.stderr
    # The fallback is reported once, not by the memory package and the command both.
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, done.stderr


def test_errors_exit_with_one_line(cli: Cli) -> None:
    """A memory error exits 1 with one line; bad usage or configuration exits 2."""
    missing = cli("memory", "forget", "nothing")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"asyncrecall: no memory named 'nothing' in {cli.memory}"
    ]
    empty = cli("memory", "add", "--name", " ", "--type", "user", "--content", "x")
    assert empty.returncode == 2 and "non-empty name" in empty.stderr
    bad_type = cli("memory", "add", "--name", "x", "--type", "secret", "--content", "x")
    assert bad_type.returncode == 2
    no_side = cli("memory", "recall", "x", "--selector", "model")
    assert no_side.returncode == 2 and "needs a side model" in no_side.stderr


def test_a_skipped_file_is_warned_about_on_stderr(cli: Cli) -> None:
    cli.memory.mkdir()
    (cli.memory / "broken.md").write_text("no front matter\n")
    done = cli("memory", "list", "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == []
    assert done.stderr.count("broken.md") == 1 and "no front matter" in done.stderr


def test_each_memory_command_takes_only_the_flags_that_make_sense_for_it(cli: Cli) -> None:
    """``memory add`` takes the folder flags, not the agent's (``--max-turns``,
    ``--recall-mode``, ``--output-format``) nor the endpoint's; ``memory recall`` also
    takes the endpoint and selector flags; ``run`` takes them all."""
    agent = ("--max-turns", "--recall-mode", "--output-format", "--session-token-limit")
    endpoint = ("--base-url", "--model", "--side-model", "--selector")
    add = cli("memory", "add", "--help", memory_dir=False).stdout
    recall = cli("memory", "recall", "--help", memory_dir=False).stdout
    run = cli("run", "--help", memory_dir=False).stdout
    assert "--memory-dir" in add and "--project" in add
    assert not [flag for flag in (*agent, *endpoint, "--no-memory") if flag in add]
    assert all(flag in recall for flag in (*endpoint, "--no-memory", "--memory-dir"))
    assert not [flag for flag in agent if flag in recall]
    assert all(flag in run for flag in (*agent, *endpoint, "--memory-dir", "--no-memory"))
    refused = cli("memory", "list", "--max-turns", "3")
    assert refused.returncode == 2 and "--max-turns" in refused.stderr


def test_history_lists_every_write_and_revert_undoes_them(cli: Cli) -> None:
    """``memory history NAME`` lists each recorded write of a memory (also one that is
    gone); ``memory revert NAME`` undoes the newest (a forget too), ``--to N`` goes back
    to version N; the CLI says which."""
    for content in ("green tea", "black tea"):
        done = cli("memory", "add", "--name", "Tea", "--type", "user", "--content", content)
        assert done.returncode == 0, done.stderr
    assert cli("memory", "forget", "Tea").returncode == 0

    versions = cli.json("memory", "history", "Tea")
    assert [(v["seq"], v["op"], v["origin"]) for v in versions] == [
        (1, "save", "user"), (2, "save", "user"), (3, "forget", "user"),
    ]  # fmt: skip
    table = cli("memory", "history", "Tea")
    assert table.returncode == 0 and "forget" in table.stdout

    done = cli("memory", "revert", "Tea")
    assert done.returncode == 0 and "Reverted 'Tea'" in done.stdout
    assert cli.json("memory", "show", "Tea")["body"] == "black tea"
    assert cli("memory", "revert", "Tea", "--to", "1").returncode == 0
    assert cli.json("memory", "show", "Tea")["body"] == "green tea"

    missing = cli("memory", "revert", "Tea", "--to", "99")
    assert missing.returncode != 0 and "no version 99" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_forget_of_a_name_that_matches_nothing_fails_and_removes_nothing(cli: Cli) -> None:
    """A key that names no memory exits non-zero with one line, and every memory stays."""
    assert cli("memory", "add", "--name", "C++ tips", "--type", "project",
               "--content", "RAII").returncode == 0  # fmt: skip
    done = cli("memory", "forget", "C# tips")
    assert done.returncode != 0 and "no memory named 'C# tips'" in done.stderr
    assert [m["name"] for m in cli.json("memory", "list")] == ["C++ tips"]


def test_recall_json_says_why_nothing_was_recalled(cli: Cli) -> None:
    """Every empty recall carries a reason code; a memory whose name answers is found."""
    cli.json(
        "memory", "add", "--name", "Indent style for Go", "--type", "feedback",
        "--description", "The indent style for Go files", "--content", "Tabs; gofmt decides.",
    )  # fmt: skip
    found = cli.json("memory", "recall", "how do I indent Go code?", "--selector", "lexical")
    assert [d["name"] for d in found["selected"]] == ["Indent style for Go"]
    assert found["reason"] is None
    short = cli.json("memory", "recall", "indentation", "--selector", "lexical")
    assert (short["selected"], short["reason"]) == ([], "too_short")
    other = cli.json("memory", "recall", "quarterly revenue for Brazil", "--selector", "lexical")
    assert (other["selected"], other["reason"]) == ([], "no_match")


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "--json"],
        ["list"],
        ["recall", "how do we test the database?", "--selector", "lexical"],
        ["path"],
    ],
)
def test_a_memory_command_whose_reader_went_away_exits_141_quietly(
    argv: list[str], tmp_path: Path
) -> None:
    """Standard output a pipe nobody reads (``| head`` done, ``| true``): exit 141, as
    ``run`` does, and nothing on stderr (rich's own handling exits 1)."""
    folder = str(tmp_path / "memory")
    subprocess.run(
        [sys.executable, "-m", "asyncrecall", "memory", "add", "--memory-dir", folder,
         "--name", "db tests", "--type", "feedback", "--content", "No mocks."],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "asyncrecall", "memory", *argv, "--memory-dir", folder],
            stdout=write_end, stderr=subprocess.PIPE, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, b"")

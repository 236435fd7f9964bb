"""``asyncrecall run`` and ``chat`` for real: a subprocess speaking HTTP to the local server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.memory import FolderStore
from asyncrecall.testing import LocalServer, Reply

HANG_GUARD = 60


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("the staging cluster is called blue\n")
    return root


@pytest.fixture
def memory_dir(tmp_path: Path) -> Path:
    store = FolderStore(tmp_path / "memory")
    store.ensure()
    store.save_memory(
        "deploy-flow", "deploys go through staging first", "project", "Use blue.", origin="user"
    )
    return store.root


def command(server: LocalServer, project: Path, memory_dir: Path, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "asyncrecall", *args,
        "--base-url", server.base_url, "--api-key", "test", "--model", "main",
        "--side-model", "side", "--project", str(project), "--memory-dir", str(memory_dir),
        "--no-extract",  # these tests count recall side queries; see tests/extract
    ]  # fmt: skip


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    return env


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_run_does_not_wait_for_a_slow_side_query_and_hangs_it_up_on_exit(
    local_server: LocalServer, project: Path, memory_dir: Path, tmp_path: Path
) -> None:
    """A side query that never answers does not delay the main request; when ``run``
    exits it hangs the side query up (the server sees the connection close)."""
    never = threading.Event()
    local_server.script("side", Reply(json={"selected_memories": []}, gate=never))
    # The main answer is held until the side query has reached the server, so the test
    # sees both connections (the side query scans the folder first, in a thread).
    side_arrived = threading.Event()
    local_server.script("main", Reply(text="the answer", gate=side_arrived))

    def release_main_once_side_arrived() -> None:
        local_server.wait_for(lambda r: r.model == "side", timeout=HANG_GUARD)
        side_arrived.set()

    threading.Thread(target=release_main_once_side_arrived, daemon=True).start()
    done = subprocess.run(
        command(local_server, project, memory_dir, "run", "how do we deploy?",
                "--output-format", "stream-json"),
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    kinds = [e["type"] for e in events(done.stdout)]
    assert kinds[0] == "memory_recall_started" and kinds[-1] == "finished"
    assert "".join(e["text"] for e in events(done.stdout) if e["type"] == "content") == (
        "the answer"
    )
    side = local_server.wait_for(lambda r: r.model == "side")
    main = local_server.wait_for(lambda r: r.model == "main")
    assert main.finished_at is not None and not main.disconnected
    assert local_server.wait_disconnected(side).disconnected
    assert side.finished_at is None  # it never answered: the main request did not wait


def test_run_puts_settled_memory_after_the_tool_responses_on_the_wire(
    local_server: LocalServer, project: Path, memory_dir: Path, tmp_path: Path
) -> None:
    """Wire format: a recall that settles after the user-query request lands at the
    tool-result request, which ends with the assistant tool call, its tool message,
    then one user message carrying the memory block."""
    rel = FolderStore(memory_dir).scan()[0].rel_path
    side_release, tool_call_release = threading.Event(), threading.Event()
    local_server.script("side", Reply(json={"selected_memories": [rel]}, gate=side_release))
    main_replies = iter(
        [
            Reply(tool_calls=[("read_file", {"path": "notes.txt"})], gate=tool_call_release),
            Reply(text="blue"),
        ]
    )

    def main_reply(request: Any) -> Reply:
        side_release.set()  # the user-query request is out: now let the recall settle
        return next(main_replies)

    local_server.set_default("main", main_reply)

    def release_tool_call_once_side_answered() -> None:
        local_server.wait_for(
            lambda r: r.model == "side" and r.finished_at is not None, timeout=HANG_GUARD
        )
        tool_call_release.set()

    releaser = threading.Thread(target=release_tool_call_once_side_answered, daemon=True)
    releaser.start()
    done = subprocess.run(
        command(local_server, project, memory_dir, "run", "which cluster?",
                "--output-format", "json"),
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip
    releaser.join(timeout=HANG_GUARD)

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "blue"
    assert [(e["point"], e["paths"]) for e in result["memory"]["injected"]] == [
        ("tool_result", [rel])
    ]
    first, second = [r for r in local_server.requests if r.model == "main"]
    assert first.messages[-1] == {"role": "user", "content": "which cluster?"}
    assert [m["role"] for m in second.messages][-3:] == ["assistant", "tool", "user"]
    assert second.messages[-2]["tool_call_id"] == second.messages[-3]["tool_calls"][0]["id"]
    assert "## Relevant memory" in second.messages[-1]["content"]


def test_run_with_an_unreachable_endpoint_exits_1_with_one_line(
    project: Path, memory_dir: Path, tmp_path: Path
) -> None:
    """A broken endpoint gives a one-line reason on stderr and exit code 1."""
    with LocalServer() as server:
        base_url = server.base_url  # a port that was just free, now closed
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "run", "hi", "--base-url", base_url,
         "--model", "m", "--no-memory", "--project", str(project)],
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyncrecall: ") and "127.0.0.1" in lines[0]


def test_run_without_a_model_is_a_usage_error(project: Path, tmp_path: Path) -> None:
    """No model configured: exit 2 and a message naming the missing setting."""
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "run", "hi", "--base-url", "http://127.0.0.1:9/v1",
         "--project", str(project)],
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--model" in done.stderr


def test_chat_reads_one_query_per_line_in_one_session(
    local_server: LocalServer, project: Path, memory_dir: Path, tmp_path: Path
) -> None:
    """Piped chat: each line is a user query of the same session, so a memory shown once
    is not offered to the selector again."""
    store = FolderStore(memory_dir)
    rel = store.scan()[0].rel_path
    store.save_memory("style", "the user prefers short answers", "user", "Be brief.", origin="user")
    local_server.script("side", Reply(json={"selected_memories": [rel]}))
    local_server.set_default("side", Reply(json={"selected_memories": []}))
    # The first turn's tool call is released once the side query is answered, so the
    # memory has settled by the tool-result request at the latest.
    side_answered = threading.Event()
    local_server.script(
        "main", Reply(tool_calls=[("list_directory", {"path": "."})], gate=side_answered)
    )

    def release_once_side_answered() -> None:
        local_server.wait_for(
            lambda r: r.model == "side" and r.finished_at is not None, timeout=HANG_GUARD
        )
        side_answered.set()
        local_server.wait_for(lambda r: r.model == "side" and r.index > 1, timeout=HANG_GUARD)
        second_side.set()

    threading.Thread(target=release_once_side_answered, daemon=True).start()
    # The second answer waits for the second side query to reach the server, so the
    # test can read what that side query offered.
    second_side = threading.Event()
    local_server.script("main", Reply(text="first"), Reply(text="second", gate=second_side))

    done = subprocess.run(
        command(local_server, project, memory_dir, "chat", "--output-format", "stream-json"),
        input="how do we deploy?\nand again, how do we deploy?\n",
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    finished = [e for e in events(done.stdout) if e["type"] == "finished"]
    assert [e["text"] for e in finished] == ["first", "second"]
    sides = [r for r in local_server.requests if r.model == "side"]
    assert len(sides) == 2
    assert rel in json.dumps(sides[0].messages)
    surfaced = [e for e in events(done.stdout) if e["type"] == "memory_injected"]
    assert [e["paths"] for e in surfaced] == [[rel]]
    assert rel not in json.dumps(sides[1].messages)  # once shown, never offered again


def test_ctrl_c_in_chat_hangs_up_the_main_request_and_the_side_query(
    local_server: LocalServer, project: Path, memory_dir: Path, tmp_path: Path
) -> None:
    """Ctrl-C cancels the running turn: the server sees both the main request and the
    recall side query close; the session goes on and exits cleanly at end of input."""
    local_server.script("side", Reply(json={"selected_memories": []}, hang=True))
    local_server.script("main", Reply(text="never", hang=True))
    process = subprocess.Popen(
        command(local_server, project, memory_dir, "chat", "--output-format", "stream-json"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env(tmp_path),
    )  # fmt: skip
    try:
        assert process.stdin is not None
        process.stdin.write("a question\n")
        process.stdin.flush()
        main = local_server.wait_for(lambda r: r.model == "main", timeout=HANG_GUARD)
        side = local_server.wait_for(lambda r: r.model == "side", timeout=HANG_GUARD)
        process.send_signal(signal.SIGINT)
        assert local_server.wait_disconnected(main, timeout=HANG_GUARD).disconnected
        assert local_server.wait_disconnected(side, timeout=HANG_GUARD).disconnected
        out, err = process.communicate(input="", timeout=HANG_GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    kinds = [e["type"] for e in events(out)]
    assert "cancelled" in kinds and kinds[-1] == "finished"


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)]
)
def test_run_ended_by_ctrl_c_or_a_kill_prints_its_failed_result(
    signum: signal.Signals,
    status: int,
    local_server: LocalServer,
    project: Path,
    memory_dir: Path,
    tmp_path: Path,
) -> None:
    """``run --output-format json`` stopped while its turn runs, by Ctrl-C or ``kill``:
    the request is hung up, and the turn ends as every failed one does, its result
    object (``is_error``, ``finish_reason: cancelled``) with the exit status the
    process then exits with (130 for Ctrl-C, 128 + the signal's number otherwise)."""
    local_server.script("main", Reply(text="never", hang=True))
    process = subprocess.Popen(
        command(local_server, project, memory_dir, "run", "a question",
                "--output-format", "json", "--selector", "lexical"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(tmp_path),
    )  # fmt: skip
    try:
        main = local_server.wait_for(lambda r: r.model == "main", timeout=HANG_GUARD)
        process.send_signal(signum)
        assert local_server.wait_disconnected(main, timeout=HANG_GUARD).disconnected
        out, err = process.communicate(timeout=HANG_GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == status, err
    [result] = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert (result["is_error"], result["finish_reason"]) == (True, "cancelled")
    assert result["exit_code"] == status
    assert "Traceback" not in err


def run_cli(
    server: LocalServer, project: Path, tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asyncrecall", "run", "what is here?", "--base-url",
         server.base_url, "--model", "main", "--no-memory", "--project", str(project), *args],
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip


FAILURES = [
    (Reply(text=""), (), 1, "empty_answer", "empty answer"),
    (
        Reply(tool_calls=[("list_directory", {"path": "."})]),
        (),
        3,
        "loop_detected",
        "loop detected: the model called list_directory",
    ),
    (
        Reply(tool_calls=[("list_directory", {"path": "."})]),
        ("--max-turns", "2"),
        3,
        "max_turns",
        "limit of 2 model turns",
    ),
]


@pytest.mark.parametrize(
    ("reply", "flags", "code", "kind", "words"),
    FAILURES,
    ids=["empty-answer", "loop-detected", "max-turns"],
)
def test_a_query_that_ends_without_an_answer_is_an_error(
    local_server: LocalServer,
    project: Path,
    tmp_path: Path,
    reply: Reply,
    flags: tuple[str, ...],
    code: int,
    kind: str,
    words: str,
) -> None:
    """No empty success: an empty answer, loop detection and a limit that stops the
    query are an ``error`` event, one line on stderr and a non-zero exit (1 for the
    model's failures, 3 for the agent's stops). The json and text renderings of the
    same events are pinned in tests/cli/test_render.py."""
    local_server.set_default("main", reply)

    done = run_cli(local_server, project, tmp_path, "--output-format", "stream-json", *flags)

    errors = [e for e in events(done.stdout) if e["type"] == "error"]
    assert [e["kind"] for e in errors] == [kind] and words in errors[0]["message"]
    assert events(done.stdout)[-1]["type"] == "finished"
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyncrecall: ") and words in lines[0]


def test_piped_chat_separates_answers_and_reports_a_failed_query(
    local_server: LocalServer, project: Path, tmp_path: Path
) -> None:
    """Piped chat in text mode: a blank line between two answers; a query that fails
    gives its one line on stderr, the session goes on, and the exit status says a
    query failed."""
    local_server.script("main", Reply(text="first"), Reply(text=""), Reply(text="third"))
    done = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "chat", "--base-url", local_server.base_url,
         "--model", "main", "--no-memory", "--project", str(project)],
        input="one\ntwo\nthree\n", capture_output=True, text=True, env=clean_env(tmp_path),
        timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.stdout == "first\n\nthird\n"
    assert done.returncode == 1
    assert [line for line in done.stderr.splitlines() if line.startswith("asyncrecall:")] == [
        "asyncrecall: the model returned an empty answer"
    ]


def test_run_answers_when_the_server_cuts_its_stream_for_our_side_query(
    local_server: LocalServer, project: Path, memory_dir: Path, tmp_path: Path
) -> None:
    """A one-slot server that ends the main stream when our recall side query arrives
    (llama-cpp-python's ``interrupt_requests``, simulated): ``run`` exits 0 with the
    answer of the request it sent again, and the side query was hung up."""
    go = threading.Event()
    local_server.script("main", Reply(text="cut", interrupt=True, gate=go), "the answer")
    local_server.set_default("side", Reply(json={"selected_memories": []}, gate=threading.Event()))

    def release() -> None:
        local_server.wait_for(lambda r: r.model == "side", timeout=HANG_GUARD)
        local_server.wait_for(lambda r: r.model == "main", timeout=HANG_GUARD)
        go.set()

    threading.Thread(target=release, daemon=True).start()
    done = subprocess.run(
        [*command(local_server, project, memory_dir, "run", "how do we deploy?"),
         "--selector", "model", "--output-format", "stream-json"],
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    lines = events(done.stdout)
    assert [e["type"] for e in lines].count("request_retried") == 1
    assert [e["text"] for e in lines if e["type"] == "finished"] == ["the answer"]
    mains = [r for r in local_server.requests if r.model == "main"]
    assert [r.interrupted for r in mains] == [True, False]
    [side] = [r for r in local_server.requests if r.model == "side"]
    local_server.wait_disconnected(side, timeout=HANG_GUARD)


def test_text_output_prints_tool_arguments_and_memory_names_as_they_are(
    local_server: LocalServer, project: Path, tmp_path: Path
) -> None:
    """What the model and the folder put into a text-mode line is printed as written,
    never read as the terminal's markup: a tool argument holding ``[/x]`` crashed the
    printer (rich's MarkupError), ``:smile:`` became an emoji, ``[bold]`` vanished."""
    weird = "[/x] :smile: [bold]y"
    memory = FolderStore(tmp_path / "memory")
    memory.ensure()
    saved = memory.save_memory(
        f"deploy {weird}", "deploys go through staging", "project", "Blue.", origin="user"
    )
    local_server.set_default("side", Reply(json={"selected_memories": [saved.rel_path]}))

    def main(request: Any) -> Reply:
        if any(m.get("role") == "tool" for m in request.messages):
            return Reply(text="Listed.")
        return Reply(tool_calls=[("list_directory", {"path": weird})], first_token_delay=0.3)

    local_server.set_default("main", main)
    done = subprocess.run(
        [*command(local_server, project, memory.root, "run", "how do we deploy?")],
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Listed."
    assert f"list_directory(path={weird!r})" in done.stderr
    assert f"↳ error: {weird!r} is not a folder" in done.stderr
    assert f"memory: {saved.rel_path} " in done.stderr


def test_chat_skips_a_bare_ok_and_the_environment_turns_the_skip_off(
    local_server: LocalServer, project: Path, memory_dir: Path, tmp_path: Path
) -> None:
    """A budget is a setting of the command line. By default a bare "ok"
    starts no recall (``memory_recall_skipped``, no side query) while a question does;
    ``ASYNCRECALL_SKIP_TRIVIAL=0`` recalls for it too."""
    rel = FolderStore(memory_dir).scan()[0].rel_path
    local_server.set_default("side", Reply(json={"selected_memories": [rel]}))
    local_server.set_default("main", Reply(text="fine"))

    done = subprocess.run(
        command(local_server, project, memory_dir, "chat", "--output-format", "stream-json"),
        input="ok\nhow do we deploy?\n",
        capture_output=True, text=True, env=clean_env(tmp_path), timeout=HANG_GUARD,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = events(done.stdout)
    skipped = [e for e in seen if e["type"] == "memory_recall_skipped"]
    assert [e["reason"] for e in skipped] == ["nothing_to_recall"]
    assert len([r for r in local_server.requests if r.model == "side"]) == 1

    env = {**clean_env(tmp_path), "ASYNCRECALL_SKIP_TRIVIAL": "0"}
    again = subprocess.run(
        command(local_server, project, memory_dir, "chat", "--output-format", "stream-json"),
        input="ok\n", capture_output=True, text=True, env=env, timeout=HANG_GUARD,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert not [e for e in events(again.stdout) if e["type"] == "memory_recall_skipped"]
    assert len([r for r in local_server.requests if r.model == "side"]) == 2

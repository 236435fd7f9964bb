"""Measure what ``asyncrecall hooks`` costs the agents (the figures of ``docs/agents.md``).

    python tools/hooks_latency.py client [--rounds 200]
    python tools/hooks_latency.py claude-code [--pairs 10]
    python tools/hooks_latency.py qwen-code [--pairs 10] [--cli PATH]

``client``: one hook's whole cost, process start included, as the agent pays it: a
no-op hook (``true``), our client on a prompt (a warm service, the instant pass's
block), our client after a tool (nothing pending), and, for the design's choice, the same
interpreter importing ``socket`` and ``json`` and the ``asyncrecall`` command itself.

``claude-code``, ``qwen-code``: the agent's CLI headless against the scripted local
server, the same word-sharing question in pairs, hooks installed (the service warm) and
not: the time from the CLI's start to its first model request, and the paired
difference. Needs the CLI (Claude Code: the one ``claude-agent-sdk`` bundles; Qwen Code:
``npm install @qwen-code/qwen-code``, ``--cli node_modules/.bin/qwen``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from asyncrecall.cli.hooks._install import hook_command
from asyncrecall.testing import AnthropicServer, LocalServer, Reply

CLIENT = hook_command("SessionStart", "claude-code").split()[3]
NOTE = "---\nname: {0}\ndescription: {1}\ntype: project\n---\n{2}\n"
PROMPT = "how does the staging deploy work?"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")


def folders(root: Path) -> dict[str, str]:
    home, memory, project = root / "home", root / "mem", root / "proj"
    for folder in (home, memory, project):
        folder.mkdir()
    (project / "a.md").write_text("hello\n")
    index = []
    for i in range(60):
        (memory / f"note{i}.md").write_text(
            NOTE.format(f"note{i}", f"topic {i} of the project", f"Body of note {i}.")
        )
        index.append(f"- [note{i}](note{i}.md) — topic {i} of the project\n")
    (memory / "deploy.md").write_text(
        NOTE.format("deploy", "how the staging deploy works", "Blue-green pipeline.")
    )
    (memory / "MEMORY.md").write_text("".join(index) + "- [deploy](deploy.md) — deploys\n")
    src = Path(__file__).resolve().parents[1] / "src"
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])),
        "ASYNCRECALL_HOME": str(home),
        "ASYNCRECALL_MEMORY_DIR": str(memory),
        "ASYNCRECALL_SELECTOR": "lexical",
        "ASYNCRECALL_HOOKS_IDLE": "30",
        "PROJECT": str(project),
    }


def hook(env: dict[str, str], event: str, session: str, **fields: str) -> bytes:
    payload = json.dumps({"session_id": session, "cwd": env["PROJECT"], **fields}).encode()
    return subprocess.run(
        [sys.executable, "-I", "-S", CLIENT, "claude-code", event],
        input=payload,
        capture_output=True,
        env=env,
        check=True,
    ).stdout


def warm(env: dict[str, str]) -> None:
    hook(env, "SessionStart", "warm")
    deadline = time.monotonic() + 120
    while b"Blue-green" not in hook(env, "UserPromptSubmit", f"w{time.time()}", prompt=PROMPT):
        if time.monotonic() > deadline:
            sys.exit("the recall service did not warm up")
        time.sleep(0.2)


def summary(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"{name:<44} median {statistics.median(values):6.1f} ms   "
        f"p99 {p99:6.1f} ms   (n={len(values)})"
    )


def measure_client(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = folders(Path(tmp))
        warm(env)
        payloads = {
            "UserPromptSubmit": lambda i: {"prompt": PROMPT},
            "PostToolUse": lambda i: {"tool_name": "Read"},
        }
        runs: dict[str, list[float]] = {
            k: []
            for k in (
                "no-op hook (true)",
                "client, UserPromptSubmit (a block)",
                "client, PostToolUse (nothing)",
                "python -I -S -c pass (the floor)",
                "python -I -S, import socket, json",
                "asyncrecall --version",
            )
        }
        for i in range(rounds):
            cases = [
                ("no-op hook (true)", ["true"], b""),
                (
                    "client, UserPromptSubmit (a block)",
                    [sys.executable, "-I", "-S", CLIENT, "claude-code", "UserPromptSubmit"],
                    json.dumps(
                        {
                            "session_id": f"s{i}",
                            "cwd": env["PROJECT"],
                            **payloads["UserPromptSubmit"](i),
                        }
                    ).encode(),
                ),
                (
                    "client, PostToolUse (nothing)",
                    [sys.executable, "-I", "-S", CLIENT, "claude-code", "PostToolUse"],
                    json.dumps(
                        {"session_id": f"s{i}", "cwd": env["PROJECT"], **payloads["PostToolUse"](i)}
                    ).encode(),
                ),
                (
                    "python -I -S -c pass (the floor)",
                    [sys.executable, "-I", "-S", "-c", "pass"],
                    b"",
                ),
                (
                    "python -I -S, import socket, json",
                    [sys.executable, "-I", "-S", "-c", "import socket, json"],
                    b"",
                ),
            ]
            if i < 20:
                cases.append(
                    (
                        "asyncrecall --version",
                        [sys.executable, "-m", "asyncrecall", "--version"],
                        b"",
                    )
                )
            for name, argv, data in cases:
                began = time.perf_counter()
                out = subprocess.run(argv, input=data, capture_output=True, env=env).stdout
                runs[name].append((time.perf_counter() - began) * 1000)
                if name.endswith("(a block)") and b"Blue-green" not in out:
                    sys.exit("the client answered without the block")
        for name, values in runs.items():
            say(summary(name, values))
        noop = statistics.median(runs["no-op hook (true)"])
        for name in ("client, UserPromptSubmit (a block)", "client, PostToolUse (nothing)"):
            say(
                f"added over the no-op hook, {name}: "
                f"{statistics.median(runs[name]) - noop:.1f} ms at the median"
            )


def measure_agent(agent: str, pairs: int, cli: str | None, baseline: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = folders(Path(tmp))
        project = Path(env["PROJECT"])
        if agent == "claude-code":
            import claude_agent_sdk

            cli = cli or str(Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")
            server: LocalServer = AnthropicServer()
            model = "claude-sonnet-4-5"
            argv = [cli, "-p", PROMPT, "--model", model, "--output-format", "json"]
        else:
            cli = cli or shutil.which("qwen")
            if cli is None:
                sys.exit("qwen not found: pass --cli node_modules/.bin/qwen")
            server = LocalServer()
            model = "qwen-test-main"
            argv = [
                cli,
                "-p",
                PROMPT,
                "--auth-type",
                "openai",
                "-m",
                model,
                "--approval-mode",
                "yolo",
                "-o",
                "json",
            ]
        with server:
            env.update(
                ANTHROPIC_BASE_URL=server.base_url,
                ANTHROPIC_API_KEY="test",
                CLAUDE_CONFIG_DIR=str(Path(tmp) / "claude-config"),
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                DISABLE_AUTOUPDATER="1",
                DISABLE_TELEMETRY="1",
                DISABLE_ERROR_REPORTING="1",
                OPENAI_BASE_URL=server.base_url,
                OPENAI_API_KEY="test",
                QWEN_CODE_SUPPRESS_YOLO_WARNING="1",
            )
            server.set_default(model, Reply(text="done"))
            install = [
                sys.executable,
                "-m",
                "asyncrecall",
                "hooks",
                "install",
                "--agent",
                agent,
                "--project",
                str(project),
            ]
            uninstall = [*install[:4], "uninstall", *install[5:]]
            subprocess.run(install, env=env, check=True, capture_output=True)
            warm(env)
            on: list[float] = []
            off: list[float] = []
            delivered = 0
            settings = (
                project / (".claude" if agent == "claude-code" else ".qwen") / "settings.json"
            )
            ours = settings.read_text()
            noop = json.loads(ours)
            for groups in noop["hooks"].values():
                for group in groups:
                    for entry in group["hooks"]:
                        entry["command"] = (
                            f"{sys.executable} -I -S -c pass" if baseline == "python" else "true"
                        )
            for i in range(pairs * 2):
                hooked = i % 4 in (0, 3)  # ABBA: neither order is favoured
                if baseline != "none":
                    settings.write_text(ours if hooked else json.dumps(noop))
                else:
                    subprocess.run(
                        install if hooked else uninstall, env=env, check=True, capture_output=True
                    )
                before = len(server.requests)
                began = time.monotonic()
                subprocess.run(
                    argv, cwd=project, env=env, capture_output=True, timeout=300, check=True
                )
                first = next(r for r in server.requests[before:] if r.body.get("model") == model)
                (on if hooked else off).append((first.arrived_at - began) * 1000)
                delivered += hooked and "Blue-green" in json.dumps(first.body)
            say(summary(f"{agent}: first request, {baseline} hooks", off))
            say(summary(f"{agent}: first request, hooks on", on))
            added = [a - b for a, b in zip(on, off, strict=True)]
            say(
                f"{agent}: added by the hooks, paired median {statistics.median(added):.1f} ms "
                f"(quartiles {statistics.quantiles(added, n=4)[0]:.1f} to "
                f"{statistics.quantiles(added, n=4)[2]:.1f} ms, {pairs} pairs); memory on "
                f"the first request in {delivered} of {pairs} hooked runs"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["client", "claude-code", "qwen-code"])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--cli")
    parser.add_argument(
        "--baseline",
        choices=["none", "noop", "python"],
        default="none",
        help="compare with no hooks, the same hooks running `true`, or `python -I -S -c pass`",
    )
    args = parser.parse_args()
    if args.what == "client":
        measure_client(args.rounds)
    else:
        measure_agent(args.what, args.pairs, args.cli, args.baseline)


if __name__ == "__main__":
    main()

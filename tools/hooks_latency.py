"""Measure what ``asyncrecall hooks`` costs the agents (the figures of ``docs/agents.md``).

    python tools/hooks_latency.py client [--rounds 200]
    python tools/hooks_latency.py claude-code [--pairs 10]
    python tools/hooks_latency.py qwen-code [--pairs 10] [--cli PATH]

``client``: one hook's whole cost, process start included, as the agent pays it: a
no-op hook (``true``), our clients (Python and Perl) on a prompt (a warm service, the
instant pass's block) and after a tool (nothing pending), and, for the design's choice,
each interpreter's floor, Python importing ``socket`` and ``json``, and the
``asyncrecall`` command itself.

``claude-code``, ``qwen-code``: the agent's CLI headless against the scripted local
server, the same word-sharing question, in rounds that run each arm once (``--arms``: no
hooks, the same hooks running ``true``, ours, ours with the Python client, the agent's own
memory: every note in its ``CLAUDE.md`` or ``QWEN.md``): the time from the CLI's start to
its first model request, the paired differences, each hook's duration as the agent's
own debug log times it (the part that is the hook's: the whole start varies by hundreds
of milliseconds), and what the first request carried (the relevant note, irrelevant
notes, its size). Needs the CLI (Claude Code: the one
``claude-agent-sdk`` bundles; Qwen Code: ``npm install @qwen-code/qwen-code``, ``--cli
node_modules/.bin/qwen``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from asyncrecall.cli.hooks._install import hook_command
from asyncrecall.testing import AnthropicServer, LocalServer, Reply

CLIENT = hook_command("SessionStart", "claude-code", "python").split()[3]
PERL = ["perl", CLIENT.replace("_client.py", "_client.pl")]
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
                "perl client, UserPromptSubmit (a block)",
                "perl client, PostToolUse (nothing)",
                "perl -e 1 (the floor)",
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
                    "perl client, UserPromptSubmit (a block)",
                    [*PERL, "claude-code", "UserPromptSubmit", sys.executable],
                    json.dumps(
                        {"session_id": f"p{i}", "cwd": env["PROJECT"], "prompt": PROMPT}
                    ).encode(),
                ),
                (
                    "perl client, PostToolUse (nothing)",
                    [*PERL, "claude-code", "PostToolUse", sys.executable],
                    json.dumps({"session_id": f"p{i}", "cwd": env["PROJECT"]}).encode(),
                ),
                ("perl -e 1 (the floor)", ["perl", "-e", "1"], b""),
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
        for name in (
            "client, UserPromptSubmit (a block)",
            "client, PostToolUse (nothing)",
            "perl client, UserPromptSubmit (a block)",
            "perl client, PostToolUse (nothing)",
        ):
            say(
                f"added over the no-op hook, {name}: "
                f"{statistics.median(runs[name]) - noop:.1f} ms at the median"
            )


def measure_agent(agent: str, pairs: int, cli: str | None, arms: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = folders(Path(tmp))
        project = Path(env["PROJECT"])
        if agent == "claude-code":
            import claude_agent_sdk

            cli = cli or str(Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")
            server: LocalServer = AnthropicServer()
            model = "claude-sonnet-4-5"
            argv = [cli, "-p", PROMPT, "--model", model, "--output-format", "json"]
            argv += ["--debug-file", str(Path(tmp) / "debug.log")]
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
                "--debug",
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
            subprocess.run(install, env=env, check=True, capture_output=True)
            warm(env)
            settings = (
                project / (".claude" if agent == "claude-code" else ".qwen") / "settings.json"
            )
            ours = json.loads(settings.read_text())
            variants = {
                "none": {k: v for k, v in ours.items() if k != "hooks"},
                "ours": ours,
                "noop": _replaced(ours, "true"),
                "python": _replaced(ours, f"{sys.executable} -I -S -c pass"),
                "ours-python": _with_client(ours, agent, "python"),
                "own": {k: v for k, v in ours.items() if k != "hooks"},
            }
            # the agent's own memory: every note in its instructions file, as users keep it
            own_file = project / ("CLAUDE.md" if agent == "claude-code" else "QWEN.md")
            own_text = "# Project notes\n\n" + "".join(
                f"- {n.stem}: {n.read_text().split('---')[2].strip()}\n"
                for n in sorted(Path(env["ASYNCRECALL_MEMORY_DIR"]).glob("*.md"))
                if n.name != "MEMORY.md"
            )
            shown: dict[str, list[tuple[bool, int, int]]] = {arm: [] for arm in arms}
            hook_ms: dict[str, dict[str, list[float]]] = {arm: {} for arm in arms}
            times: dict[str, list[float]] = {arm: [] for arm in arms}
            for i in range(pairs):
                # each round runs every arm once, in a rotating order: no arm is favoured
                order = arms[i % len(arms) :] + arms[: i % len(arms)]
                if i % 2:
                    order.reverse()
                for arm in order:
                    settings.write_text(json.dumps(variants[arm]))
                    if arm == "own":
                        own_file.write_text(own_text)
                    else:
                        own_file.unlink(missing_ok=True)
                    before = len(server.requests)
                    began = time.monotonic()
                    logs = _debug_logs(agent, Path(tmp), env)
                    for old in logs:
                        old.unlink()
                    subprocess.run(
                        argv, cwd=project, env=env, capture_output=True, timeout=300, check=True
                    )
                    for event, ms in _hook_durations(agent, _debug_logs(agent, Path(tmp), env)):
                        hook_ms[arm].setdefault(event, []).append(ms)
                    first = next(
                        r for r in server.requests[before:] if r.body.get("model") == model
                    )
                    times[arm].append((first.arrived_at - began) * 1000)
                    body = json.dumps(first.body)
                    shown[arm].append(
                        ("Blue-green" in body, body.count("Body of note"), len(body.encode()))
                    )
            for arm in arms:
                say(summary(f"{agent}: first request, {arm} hooks", times[arm]))
            compared = [(arm, "none") for arm in arms if arm != "none"] + [
                ("ours", "noop"),
                ("ours-python", "noop"),
                ("ours", "ours-python"),
            ]
            for arm, base in compared:
                if arm not in times or base not in times or pairs < 2:
                    continue
                added = [a - b for a, b in zip(times[arm], times[base], strict=True)]
                q = statistics.quantiles(added, n=4)
                say(
                    f"{agent}: {arm} over {base}: paired median "
                    f"{statistics.median(added):+.1f} ms (quartiles {q[0]:+.1f} to "
                    f"{q[2]:+.1f} ms, {pairs} rounds)"
                )
            for arm in arms:
                for event, values in hook_ms[arm].items():
                    say(summary(f"{agent}: {arm}: {event}, as the agent times it", values))
            for arm in arms:
                relevant = sum(r for r, _, _ in shown[arm])
                junk = statistics.median(j for _, j, _ in shown[arm])
                size = statistics.median(b for _, _, b in shown[arm])
                say(
                    f"{agent}: {arm}: the relevant note on the first request in {relevant} of "
                    f"{pairs}; irrelevant notes on it (median) {junk:g}; its size {size:,.0f} B"
                )


def _with_client(settings: dict[str, object], agent: str, client: str) -> dict[str, object]:
    """``settings`` with our hooks run by ``client`` (``perl`` or ``python``)."""
    from asyncrecall.cli.hooks._install import MARKER

    copied = json.loads(json.dumps(settings))
    for event, groups in copied["hooks"].items():
        for group in groups:
            for entry in group["hooks"]:
                if MARKER in entry["command"]:
                    entry["command"] = hook_command(event, agent, client)  # type: ignore[arg-type]
    return copied


def _debug_logs(agent: str, tmp: Path, env: dict[str, str]) -> list[Path]:
    if agent == "claude-code":
        return [p for p in [tmp / "debug.log"] if p.exists()]
    folder = Path(env["HOME"]) / ".qwen" / "debug"
    return sorted(p for p in folder.glob("*.txt") if not p.is_symlink()) if folder.is_dir() else []


#: How the agents' debug logs time a hook: Claude Code per hook ("UserPromptSubmit
#: [command] finished with status 0 (4ms)", "SessionStart:startup [command] moved to the
#: background (11ms)"), Qwen Code per event ("Hook execution for Stop: ... total
#: duration: 40ms").
_TIMED = (
    re.compile(
        r"Hooks: (\w+)(?::\w+)? \[.*\] "
        r"(?:finished with status \d+|moved to the background) \((\d+)ms\)"
    ),
    re.compile(r"Hook execution for (\w+): .* total duration: (\d+)ms"),
)


def _hook_durations(agent: str, logs: list[Path]) -> list[tuple[str, float]]:
    found = []
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            for pattern in _TIMED:
                match = pattern.search(line)
                if match:
                    found.append((match.group(1), float(match.group(2))))
    return found


def _replaced(settings: dict[str, object], command: str) -> dict[str, object]:
    """``settings`` with every hook's command replaced by ``command`` (the same events,
    matchers and options: what the agent itself pays for a hook)."""
    copied = json.loads(json.dumps(settings))
    for groups in copied["hooks"].values():
        for group in groups:
            for entry in group["hooks"]:
                entry["command"] = command
                entry.pop("args", None)
    return copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["client", "claude-code", "qwen-code"])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--cli")
    parser.add_argument(
        "--arms",
        default="none,noop,ours",
        help="comma-separated settings to rotate through: none (no hooks), noop (the same "
        "hooks running `true`), python (running `python -I -S -c pass`), ours (as installed), "
        "ours-python (ours with the Python client), own (no hooks, every note in the agent's "
        "own memory file: CLAUDE.md, QWEN.md)",
    )
    args = parser.parse_args()
    if args.what == "client":
        measure_client(args.rounds)
    else:
        measure_agent(args.what, args.pairs, args.cli, args.arms.split(","))


if __name__ == "__main__":
    main()

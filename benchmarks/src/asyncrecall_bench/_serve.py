"""A :class:`LocalServer` in a child process, for the many-sessions benchmark.

``python -m asyncrecall_bench._serve --seed N`` starts the server, prints
``port <N>`` on one line, and serves until its standard input closes. Running it in
its own process keeps the server's work (and its share of the GIL) out of the
event-loop lag measured in the benchmark's process.

Replies (latencies drawn from the seeded RNG, in the server's thread):

* side model ``scale-side``: the first two paths of the manifest it is offered, after
  a lognormal delay (mean 0.9 s);
* main model ``scale-main``: a user-query request gets one tool call (a scripted
  duration of 20-500 ms), a tool-result request gets the answer; first token after
  0.3-1.5 s;
* ``warmup-scale-side`` and ``warmup-scale-main``: the same, at once.

With ``--control`` (``bench frameworks``), the server (an :class:`AnthropicServer`, so
the Claude Code CLI's Messages requests are answered too) answers no model of its own:
each line on standard input is a JSON command, answered by one JSON line on standard
output, until standard input closes:

* ``{"op": "install", "tag", "count", "seed", "prefix", "profile", "paths",
  "shared_side"}`` draws the same plans the parent drew (:func:`draw_plans` is seeded)
  and installs their replies under ``tag`` (:func:`install_plans`); answers
  ``{"ok": true}``;
* ``{"op": "records", "models", "marks"}`` answers ``{"records": [...]}``, one
  ``{"model", "marked", "disconnected", "arrived_at"}`` per request recorded for those
  models, in arrival order (``marked``: for each of ``marks``, whether it appears in the
  request's messages; ``arrived_at``: ``time.monotonic()`` here, the same clock as the
  parent's on Linux).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from asyncrecall.testing import AnthropicServer, LocalServer, RecordedRequest, Reply
from asyncrecall_bench._workload import DURATION_ARG, LatencyProfile, draw_plans, install_plans

__all__ = ["MAIN_MODEL", "SIDE_MODEL", "WARMUP_PREFIX", "main"]

MAIN_MODEL = "scale-main"
SIDE_MODEL = "scale-side"
#: The same models without latencies (``warmup-scale-main``...), for warm-up runs.
WARMUP_PREFIX = "warmup-"
_MANIFEST_PATH = re.compile(r"^- \[\w+\] (\S+\.md) \(", re.MULTILINE)


class _Replies:
    """Draws each reply's latency from one seeded RNG (the server calls it from one thread)."""

    def __init__(self, seed: int, profile: LatencyProfile) -> None:
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._profile = profile
        self._mu = math.log(profile.side_mean) - profile.side_sigma**2 / 2

    def side(self, request: RecordedRequest) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in request.messages)
        chosen = _MANIFEST_PATH.findall(text)[:2]
        with self._lock:
            delay = self._rng.lognormvariate(self._mu, self._profile.side_sigma)
        return Reply(json={"selected_memories": chosen}, first_token_delay=delay)

    def main(self, request: RecordedRequest) -> Reply:
        p = self._profile
        with self._lock:
            delay = self._rng.uniform(p.first_token_min, p.first_token_max)
            tool_ms = self._rng.uniform(p.tool_min, p.tool_max) * 1000
        return _main_reply(request, delay, tool_ms)


def _side_now(request: RecordedRequest) -> Reply:
    text = "\n".join(str(m.get("content", "")) for m in request.messages)
    return Reply(json={"selected_memories": _MANIFEST_PATH.findall(text)[:2]})


def _main_now(request: RecordedRequest) -> Reply:
    return _main_reply(request, 0.0, 0.0)


def _main_reply(request: RecordedRequest, delay: float, tool_ms: float) -> Reply:
    if _after_tool(request.messages):
        return Reply(text="Done.", first_token_delay=delay)
    args = {"path": "ledger/payments.py", DURATION_ARG: round(tool_ms, 3)}
    return Reply(tool_calls=[("read_file", args)], first_token_delay=delay)


def _after_tool(messages: Sequence[dict[str, object]]) -> bool:
    """Whether the request answers tool calls (a tool message after the last assistant one)."""
    for message in reversed(messages):
        role = message.get("role")
        if role == "tool":
            return True
        if role == "assistant":
            return False
    return False


def _command(server: LocalServer, command: Mapping[str, Any]) -> dict[str, Any]:
    """Carry out one ``--control`` command."""
    if command["op"] == "install":
        profile = LatencyProfile(**command["profile"])
        plans = draw_plans(command["count"], command["seed"], profile, prefix=command["prefix"])
        shared = bool(command.get("shared_side", False))
        install_plans(server, command["tag"], plans, command["paths"], shared_side=shared)
        return {"ok": True}
    if command["op"] == "records":
        models, marks = set(command["models"]), command["marks"]
        return {
            "records": [
                {
                    "model": r.model,
                    "marked": [mark in json.dumps(r.body.get("messages", [])) for mark in marks],
                    "disconnected": r.disconnected,
                    "arrived_at": r.arrived_at,
                }
                for r in server.requests
                if r.model in models
            ]
        }
    raise ValueError(f"unknown command {command['op']!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until standard input closes."""
    parser = argparse.ArgumentParser(prog="python -m asyncrecall_bench._serve")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--control", action="store_true", help="take commands on stdin")
    args = parser.parse_args(argv)
    replies = _Replies(args.seed, LatencyProfile())
    if args.control:
        with AnthropicServer() as controlled:
            sys.stdout.write(f"port {controlled.port}\n")
            sys.stdout.flush()
            for line in sys.stdin:  # until the parent closes our standard input
                sys.stdout.write(json.dumps(_command(controlled, json.loads(line))) + "\n")
                sys.stdout.flush()
        return 0
    with LocalServer() as server:
        server.set_default(SIDE_MODEL, replies.side)
        server.set_default(MAIN_MODEL, replies.main)
        server.set_default(WARMUP_PREFIX + SIDE_MODEL, _side_now)
        server.set_default(WARMUP_PREFIX + MAIN_MODEL, _main_now)
        sys.stdout.write(f"port {server.port}\n")
        sys.stdout.flush()
        sys.stdin.read()  # until the parent closes our standard input
    return 0


if __name__ == "__main__":
    sys.exit(main())

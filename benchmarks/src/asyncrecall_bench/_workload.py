"""The latency benchmark's workload: drawn latencies, scripted replies, timed tools.

Every user query gets a :class:`QueryPlan` drawn once from a seeded RNG: its side
query's latency, the first-token delay of each of its main requests, and its tool
rounds with their durations. The plans are then played by :class:`LocalServer` for
every recall mode, so each mode sees the same queries with the same latencies.

Each query runs in its own session whose models are named after the mode and the query
(``bench-main/async/q007``, ``bench-side/async/q007``); the server's reply callbacks look
the plan up by model name and pick the main reply by counting the assistant messages
already in the request, so they are stateless, order does not matter, and the server's
records tell which mode sent what.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asyncrecall._cancel import CancelSignal
from asyncrecall.agent import ToolOutcome, ToolRegistry
from asyncrecall.models import FunctionCall, FunctionResponse
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from asyncrecall_bench._corpus import QUERIES, Query

__all__ = [
    "DURATION_ARG",
    "LatencyProfile",
    "MainReply",
    "QueryPlan",
    "ScriptedTools",
    "draw_plan",
    "draw_plans",
    "install_plans",
    "main_model_name",
    "shared_side_model_name",
    "side_model_name",
    "tagged_text",
]

#: The tool-call argument that carries the tool's scripted duration, in milliseconds.
DURATION_ARG = "duration_ms"
_QID = re.compile(r"\[([a-z]\d{3,})\]")
_TOOL_FILES = ("ledger/payments.py", "ledger/http/retry.py", "tests/conftest.py", "flags.yaml")


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyProfile:
    """What latencies are drawn from (seconds)."""

    #: Side query: lognormal with this mean (the reference agent's cold fast model) ...
    side_mean: float = 0.9
    #: ... and this sigma of the underlying normal: p50 0.75 s, p95 2.0 s, p99 3.0 s.
    side_sigma: float = 0.6
    first_token_min: float = 0.3
    first_token_max: float = 1.5
    rounds_max: int = 3
    tool_min: float = 0.02
    tool_max: float = 0.5

    def describe(self) -> str:
        """One line for the benchmark's header."""
        return (
            f"side query lognormal mean {self.side_mean:g} s (sigma {self.side_sigma:g}); "
            f"main first token {self.first_token_min:g}-{self.first_token_max:g} s; "
            f"0-{self.rounds_max} tool rounds of {self.tool_min * 1000:.0f}-"
            f"{self.tool_max * 1000:.0f} ms"
        )


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """One user query and every latency it will meet."""

    qid: str
    query: Query
    side_delay: float
    #: First-token delay of each main request: the user query's, then one per tool round.
    first_token: tuple[float, ...]
    #: Duration of each tool round.
    tool_delay: tuple[float, ...]

    @property
    def rounds(self) -> int:
        """Tool rounds before the model answers."""
        return len(self.tool_delay)

    @property
    def text(self) -> str:
        return self.query.text


def draw_plans(
    count: int,
    seed: int,
    profile: LatencyProfile | None = None,
    *,
    queries: Sequence[Query] = QUERIES,
    prefix: str = "q",
) -> list[QueryPlan]:
    """``count`` plans drawn from ``random.Random(seed)``: the same seed, the same plans."""
    profile = profile or LatencyProfile()
    rng = random.Random(seed)
    plans = []
    for n in range(count):
        rounds = rng.randint(0, profile.rounds_max)
        query = rng.choice(queries)
        plans.append(_timed(rng, profile, f"{prefix}{n:03d}", query, rounds))
    return plans


def draw_plan(rng: random.Random, profile: LatencyProfile, qid: str, query: Query) -> QueryPlan:
    """One plan for a given query, its latencies drawn from ``rng`` as :func:`draw_plans`
    draws them (for benchmarks whose queries come from elsewhere: ``bench recall``)."""
    return _timed(rng, profile, qid, query, rng.randint(0, profile.rounds_max))


def _timed(
    rng: random.Random, profile: LatencyProfile, qid: str, query: Query, rounds: int
) -> QueryPlan:
    mu = math.log(profile.side_mean) - profile.side_sigma**2 / 2  # so the mean is side_mean
    return QueryPlan(
        qid=qid,
        query=query,
        side_delay=rng.lognormvariate(mu, profile.side_sigma),
        first_token=tuple(
            rng.uniform(profile.first_token_min, profile.first_token_max) for _ in range(rounds + 1)
        ),
        tool_delay=tuple(rng.uniform(profile.tool_min, profile.tool_max) for _ in range(rounds)),
    )


def main_model_name(tag: str, plan: QueryPlan) -> str:
    """The main model's name for ``plan`` run under ``tag`` (a mode)."""
    return f"bench-main/{tag}/{plan.qid}"


def side_model_name(tag: str, plan: QueryPlan) -> str:
    """The side model's name for ``plan`` run under ``tag`` (a mode)."""
    return f"bench-side/{tag}/{plan.qid}"


def install_plans(
    server: LocalServer,
    tag: str,
    plans: Sequence[QueryPlan],
    paths: Mapping[str, str],
    *,
    shared_side: bool = False,
) -> None:
    """Make ``server`` answer every plan's side query and main requests under ``tag``.

    ``paths`` maps memory names to their relative paths in the memory folder. With
    ``shared_side``, one side model (:func:`shared_side_model_name`) answers every plan,
    each side query finding its plan by the ``[qid]`` its user message ends with
    (:func:`tagged_text`): the benchmark can then keep one side model, and its
    connections, across queries, as an application does.
    """
    replies = {}
    for plan in plans:
        wanted = tuple(paths[name] for name in plan.query.memories)
        replies[plan.qid] = _SideReply(plan, wanted)
        if not shared_side:
            server.set_default(side_model_name(tag, plan), replies[plan.qid])
        server.set_default(main_model_name(tag, plan), MainReply(plan))
    if shared_side:
        server.set_default(shared_side_model_name(tag), _SharedSideReply(replies))


def tagged_text(plan: QueryPlan) -> str:
    """The plan's user message with its ``[qid]``, for a shared side model."""
    return f"{plan.text} [{plan.qid}]"


def shared_side_model_name(tag: str) -> str:
    """The one side model's name for every plan run under ``tag`` (``shared_side``)."""
    return f"bench-side/{tag}"


@dataclass(frozen=True, slots=True)
class _SideReply:
    plan: QueryPlan
    wanted: tuple[str, ...]

    def __call__(self, request: RecordedRequest) -> Reply:
        # Only paths the manifest offers (excluded ones are not offered, and naming
        # one would be an invalid answer).
        offered = "\n".join(str(m.get("content", "")) for m in request.messages)
        chosen = [path for path in self.wanted if path in offered]
        return Reply(json={"selected_memories": chosen}, first_token_delay=self.plan.side_delay)


@dataclass(frozen=True, slots=True)
class _SharedSideReply:
    replies: Mapping[str, _SideReply]

    def __call__(self, request: RecordedRequest) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in request.messages)
        found = _QID.findall(text)
        if not found or found[-1] not in self.replies:
            return Reply(status=400, json={"error": {"message": "no [qid] in the side query"}})
        return self.replies[found[-1]](request)


@dataclass(frozen=True, slots=True)
class MainReply:
    """The main model's reply to a request of ``plan``: a tool call per round, then text."""

    plan: QueryPlan

    def __call__(self, request: RecordedRequest) -> Reply:
        done = sum(1 for message in request.messages if message.get("role") == "assistant")
        delay = self.plan.first_token[min(done, len(self.plan.first_token) - 1)]
        if done < self.plan.rounds:
            args = {
                "path": _TOOL_FILES[done % len(_TOOL_FILES)],
                DURATION_ARG: round(self.plan.tool_delay[done] * 1000, 3),
            }
            return Reply(tool_calls=[(_read_file_tool(request), args)], first_token_delay=delay)
        return Reply(text=f"Done: {self.plan.text.lower()}.", first_token_delay=delay)


def _read_file_tool(request: RecordedRequest) -> str:
    """The name the request gives the ``read_file`` tool: a Messages request's tools are
    ``{"name": ...}`` and may be prefixed (an MCP tool of the Claude Code CLI is
    ``mcp__<server>__read_file``); an OpenAI request's are ``read_file``."""
    for spec in request.body.get("tools") or ():
        name = spec.get("name") if isinstance(spec, Mapping) else None
        if isinstance(name, str) and name.endswith("read_file"):
            return name
    return "read_file"


class ScriptedTools(ToolRegistry):
    """The project's tool specs, but calls take the time their ``duration_ms`` says.

    A benchmark-only registry: the agent code is untouched, and a tool round lasts
    exactly what the workload drew (the calls of one round run concurrently, as
    read-only tools do).
    """

    async def execute(
        self,
        calls: Sequence[FunctionCall],
        *,
        cancel: CancelSignal | None = None,
        after_tools: bool = False,
        said: str = "",
    ) -> list[ToolOutcome]:
        """Sleep the longest scripted duration, then answer every call."""
        longest = max((_duration(call) for call in calls), default=0.0)
        await asyncio.sleep(longest)
        return [
            ToolOutcome(
                call, FunctionResponse(call.id, call.name, {"content": "# scripted\n"}), True
            )
            for call in calls
        ]


def _duration(call: FunctionCall) -> float:
    value: Any = call.args.get(DURATION_ARG, 0)
    return float(value) / 1000 if isinstance(value, int | float) else 0.0

"""Random interleavings of user queries, tool results, recall settling, cancels, resets
and errors; the prefetch invariants are checked after every step.

Invariants:
- at most one injection per handle (per user query);
- no memory block before a tool response, in any request;
- no task of ours left running after a reset, a limit exit, an error, a cancel or
  closing the client;
- a surfaced path is never offered to the selector again (until a reset).

Every invariant is checked here, outside the code under test, from what the models
received and the events the client emitted (an ``assert`` inside the scripted side
model would only become a logged warning: a recall never fails a turn).

``ASYNCRECALL_LONG_PROPERTY=1`` (``make test-long``) runs 10,000 random interleavings
instead of the 100 fixed ones of the normal run.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncrecall import CancelSignal, ModelServerError
from asyncrecall.agent import AgentClient, ClientOptions, MessageType
from asyncrecall.memory import FolderStore, ModelSelector, Recaller
from asyncrecall.models import FunctionCall, FunctionResponse, Text
from asyncrecall.testing import JsonRequest, ScriptedJson, ScriptedModel

_SIMPLE = st.sampled_from(
    ["settle", "tool_result", "tool_result", "tool_result", "cancelled_query",
     "error_query", "limit_query", "reset"]
)  # fmt: skip
STEPS = st.lists(
    st.one_of(
        # (kind, tool rounds, when the recall settles: before the user-query request is
        # built, right after it was sent, or not by itself)
        st.tuples(st.just("query"), st.integers(0, 2), st.sampled_from(["before", "after", "no"])),
        st.tuples(_SIMPLE, st.just(0), st.just("no")),
    ),
    min_size=1,
    max_size=16,
)


LONG = os.environ.get("ASYNCRECALL_LONG_PROPERTY") == "1"


class Harness:
    def __init__(self, root: Path) -> None:
        self.store = FolderStore(root)
        self.store.ensure()
        for i in range(6):
            self.store.save_memory(
                f"topic {i}", f"fact number {i} about the code", "project", "b", origin="user"
            )
        self.all_paths = [doc.rel_path for doc in self.store.scan()]
        self.main = ScriptedModel(name="main")
        self.side = ScriptedModel(name="side", default_json=self._answer)
        self.gates: list[asyncio.Event] = []
        self.client = AgentClient(
            model=self.main,
            memory=Recaller(self.store, ModelSelector(self.side, fallback=None)),
            options=ClientOptions(loop_threshold=50),
        )
        self.injections: Counter[str] = Counter()
        # What the model was shown, from the client's events (cleared by a reset), and
        # for each side query what it offered and what had been shown when its recall
        # started.
        self.shown: set[str] = set()
        self.shown_at_recall_start: frozenset[str] = frozenset()
        self.offers: list[tuple[frozenset[str], list[str]]] = []
        self.pending_calls: list[FunctionCall] = []
        self.prompt_no = 0
        self.prompt_id = ""
        self.call_no = 0

    def _answer(self, request: JsonRequest) -> ScriptedJson:
        # Only recorded here; check_invariants() judges it (an assert here would become
        # a logged warning inside the recall).
        offered = [p for p in self.all_paths if p in request.prompt]
        self.offers.append((self.shown_at_recall_start, offered))
        gate = asyncio.Event()
        self.gates.append(gate)
        return ScriptedJson({"selected_memories": offered[:2]}, gate=gate)

    def _calls(self, rounds: int) -> None:
        for _ in range(rounds):
            self.call_no += 1
            call = FunctionCall(f"c{self.call_no}", "read_file", {"path": f"f{self.call_no}"})
            self.main.add_turn("", [call])
        self.main.add_turn("answer")

    async def _send(
        self,
        request: Any,
        message_type: MessageType,
        cancel: CancelSignal,
        *,
        turns: int = 100,
        settle_first: bool = False,
    ) -> None:
        calls: list[FunctionCall] = []
        async for event in self.client.send_message_stream(
            request, cancel, self.prompt_id, message_type, turns=turns
        ):
            if event.type == "memory_recall_started":
                self.shown_at_recall_start = frozenset(self.shown)
                if settle_first:
                    await self._settle()
            if event.type == "memory_injected":
                self.injections[self.prompt_id] += 1
                self.shown.update(event.to_dict()["paths"])
            if event.type == "tool_call":
                data = event.to_dict()
                calls.append(FunctionCall(data["id"], data["name"], data["args"]))
        self.pending_calls = calls

    def _new_prompt(self) -> None:
        self.prompt_no += 1
        self.prompt_id = f"p{self.prompt_no}"
        # A new query leaves earlier scripted turns unused: drop them.
        self.main = self._fresh_main()

    def _fresh_main(self) -> ScriptedModel:
        fresh = ScriptedModel(name="main")
        fresh.requests.extend(self.main.requests)
        self.client.model = fresh
        return fresh

    async def _settle(self) -> None:
        """Let the pending recall settle: release side queries until it has finished.

        The recall scans in a thread before its side query starts (and creates its
        gate), so keep releasing gates until its task is done.
        """
        handle = self.client.pending_prefetch
        for _ in range(5000):  # hang guard: 5 s
            for gate in self.gates:
                gate.set()
            if handle is None or handle.task.done():
                return
            await asyncio.sleep(0.001)
        raise AssertionError("the recall did not settle once its side query was released")

    async def step(self, kind: str, arg: int, settle: str) -> None:
        if kind == "query":
            self._new_prompt()
            self._calls(arg)
            await self._send(
                "question?", MessageType.USER_QUERY, CancelSignal(), settle_first=settle == "before"
            )
            if settle == "after":
                await self._settle()
        elif kind == "settle":
            await self._settle()
        elif kind == "tool_result" and self.pending_calls:
            responses = [FunctionResponse(c.id, c.name, {"ok": True}) for c in self.pending_calls]
            await self._send(responses, MessageType.TOOL_RESULT, CancelSignal())
        elif kind == "cancelled_query":
            self._new_prompt()
            cancel = CancelSignal()
            cancel.cancel("user")
            await self._send("question?", MessageType.USER_QUERY, cancel)
            self.check_nothing_running()
        elif kind == "error_query":
            self._new_prompt()
            self.main.add_turn(error=ModelServerError("HTTP 500", status=500))
            await self._send("question?", MessageType.USER_QUERY, CancelSignal())
            self.check_nothing_running()
        elif kind == "limit_query":
            self._new_prompt()
            await self._send("question?", MessageType.USER_QUERY, CancelSignal(), turns=0)
            self.check_nothing_running()
        elif kind == "reset":
            self.client.reset_chat()
            self.shown.clear()
            self.pending_calls = []
            self.check_nothing_running()

    def check_nothing_running(self) -> None:
        assert self.client.pending_prefetch is None
        assert all(t.cancelling() or t.done() for t in self.client.background_tasks)

    def check_invariants(self) -> None:
        assert all(count <= 1 for count in self.injections.values()), self.injections
        for shown, offered in self.offers:
            again = shown.intersection(offered)
            assert not again, f"{sorted(again)} shown to the model, then offered again"
        for request in self.main.requests:
            for content in request.contents:
                seen_memory = False
                for part in content.parts:
                    if isinstance(part, Text) and "## Relevant memory" in part.text:
                        seen_memory = True
                    if isinstance(part, FunctionResponse):
                        assert not seen_memory, "memory block before a tool response"


@settings(
    max_examples=10_000 if LONG else 100,
    # The normal run replays the same interleavings (CI stays reproducible); the long
    # run explores new ones (hypothesis prints the failing example and its seed).
    derandomize=not LONG,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
def test_prefetch_invariants_hold_in_any_interleaving(
    tmp_path_factory: Any, steps: list[tuple[str, int, str]]
) -> None:
    """Whatever the order of queries, tool results, settles, cancels, resets and errors:
    one injection per handle at most, memory never before a tool response, nothing of
    ours left running after an early exit or close, no surfaced path offered again."""
    root = tmp_path_factory.mktemp("interleavings") / "memory"

    async def scenario() -> None:
        harness = Harness(root)
        for kind, arg, settle in steps:
            await harness.step(kind, arg, settle)
            harness.check_invariants()
        await harness.client.aclose()
        assert harness.client.background_tasks == frozenset()
        side = harness.side
        assert side.json_started == side.json_finished + side.json_cancelled

    asyncio.run(scenario())

"""Random interleavings of starts, settles, takes, cancels and resets over two
conversations; the prefetcher's invariants are checked after every step.

Invariants:
- a recall is taken at most once, and a file is shown at most once per conversation
  (until a reset);
- a file shown in a conversation is never offered to its selector again;
- conversations never touch each other's recall, and each runs one recall at most;
- after cancel or reset the key has no pending recall; after close no task is left and
  every side query that started has finished or was cancelled.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncrecall.memory import FolderStore, ModelSelector, Recaller
from asyncrecall.prefetch import PendingRecall, RecallPrefetcher
from asyncrecall.testing import JsonRequest, ScriptedJson, ScriptedModel

KEYS = ("a", "b")
STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["start", "start", "settle", "settle", "take_query", "take_tool", "cancel", "reset"]
        ),
        st.sampled_from(KEYS),
    ),
    min_size=1,
    max_size=20,
)


class Harness:
    def __init__(self, root: Path) -> None:
        store = FolderStore(root)
        store.ensure()
        for i in range(6):
            store.save_memory(
                f"topic {i}", f"fact number {i} about the code", "project", "b", origin="user"
            )
        self.all_paths = [doc.rel_path for doc in store.scan()]
        self.side = ScriptedModel(name="side", default_json=self._answer)
        self.prefetcher = RecallPrefetcher(Recaller(store, ModelSelector(self.side)))
        self.gates: dict[str, asyncio.Event] = {}
        self.shown: dict[str, set[str]] = {key: set() for key in KEYS}
        self.taken: set[int] = set()
        self.violations: list[str] = []
        self.n = 0

    def _answer(self, request: JsonRequest) -> ScriptedJson:
        key = "a" if "conversation a" in request.prompt else "b"
        # Recorded, not raised: the selector would take an exception for a model failure.
        self.violations += [
            f"{path} offered again in {key}"
            for path in self.prefetcher.surfaced(key)
            if path in request.prompt
        ]
        offered = [p for p in self.all_paths if p in request.prompt]
        gate = self.gates.setdefault(key, asyncio.Event())
        return ScriptedJson({"selected_memories": offered[:2]}, gate=gate)

    async def step(self, op: str, key: str) -> None:
        prefetcher = self.prefetcher
        other = "b" if key == "a" else "a"
        before_other = prefetcher.pending(other)
        if op == "start":
            self.n += 1
            self.gates[key] = asyncio.Event()
            asked = self.side.json_started
            prefetcher.start(key, f"question {self.n} in conversation {key}")
            handle = prefetcher.pending(key)
            assert handle is not None
            # Until its side query is out, or the recall ended without one.
            out = asyncio.ensure_future(self.side.wait_until(lambda m: m.json_started > asked))
            try:
                async with asyncio.timeout(5):
                    await asyncio.wait({handle.task, out}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                out.cancel()
                await asyncio.gather(out, return_exceptions=True)
        elif op == "settle":
            handle = prefetcher.pending(key)
            if key in self.gates:
                self.gates[key].set()
            if handle is not None:
                async with asyncio.timeout(5):
                    await asyncio.wait({handle.task})
        elif op in ("take_query", "take_tool"):
            self._take(key, "user_query" if op == "take_query" else "tool_result")
        elif op == "cancel":
            prefetcher.cancel(key)
            assert prefetcher.pending(key) is None
        else:
            prefetcher.reset(key)
            self.shown[key] = set()
            assert prefetcher.pending(key) is None and prefetcher.surfaced(key) == frozenset()
        assert self.violations == []
        # One recall at most runs per conversation: every other task is being cancelled.
        live = {h.task for k in KEYS if (h := prefetcher.pending(k)) is not None}
        assert all(t in live or t.cancelling() or t.done() for t in prefetcher.tasks)
        after_other = prefetcher.pending(other)  # no cross-talk
        assert after_other is before_other
        if after_other is not None:
            assert not after_other.control.cancelled

    def _take(self, key: str, point: Any) -> None:
        handle = self.prefetcher.pending(key)
        block = self.prefetcher.take(key, point)
        if block is None:
            return
        assert handle is not None and handle.settled
        assert id(handle) not in self.taken, "a recall taken twice"
        self.taken.add(id(handle))
        assert not set(block.paths) & self.shown[key], "a file shown twice"
        self.shown[key].update(block.paths)
        assert self.prefetcher.surfaced(key) == self.shown[key]


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
def test_prefetcher_invariants_hold_in_any_interleaving(
    tmp_path_factory: Any, steps: list[tuple[str, str]]
) -> None:
    """Whatever the order of starts, settles, takes, cancels and resets on two
    conversations: each recall taken once at most, each file shown once per conversation,
    nothing surfaced offered again, no cross-talk, nothing left running after close."""
    root = tmp_path_factory.mktemp("prefetch-interleavings") / "memory"

    async def scenario() -> None:
        harness = Harness(root)
        handles: list[PendingRecall] = []
        for op, key in steps:
            await harness.step(op, key)
            handle = harness.prefetcher.pending(key)
            if handle is not None:
                handles.append(handle)
        await harness.prefetcher.aclose()
        assert harness.violations == []
        assert harness.prefetcher.tasks == frozenset()
        assert all(h.task.done() for h in handles)
        side = harness.side
        assert side.json_started == side.json_finished + side.json_cancelled

    asyncio.run(scenario())

"""Property: whatever interleaves, memories are never lost, truncated or resurrected.

Each generated run drives one memory folder through a random sequence of steps: the
user's saves (some copying a fact of another memory, some long enough to be shown
cut) and forgets; extractions of several sessions; consolidations; and crashes. The
side model is scripted to do what a compliant model does (``Compliant``): an
extraction copies what it was shown of a memory and adds one new fact, or creates a
memory; a consolidation merges two memories into one holding both bodies, rewrites
one keeping its text, or deletes one whose facts all stand in another. While it
"thinks", the user may save or forget (another process at work meanwhile).

A crash is ``kill -9`` at a chosen point: the k-th file mutation of the step (an
atomic write or an unlink) does not happen, nor anything after it; everything before
it is on disk. (A killed process loses nothing the kernel already has, so the
test skips ``fsync``: a power loss is another model, the atomic replace's.) The next
step is a new process: new store and extractor objects,
which roll forward what the crashed one journalled (another session's journal too:
the orphan age is set to zero, the harshest case).

The model of what must hold is a set of facts (each one a unique sentence):

- live: facts that must be in some memory's body: every fact the user saved, and
  every fact once seen in the store, until the user removes the last memory holding
  it (a forget, or a save over it);
- dead: facts the user removed that way: they must never come back.

After every step every live fact is in the store and no dead one is; after every
step that did not crash, ``MEMORY.md`` links every memory. ``make test-long`` runs
2,000 runs (``ASYNCRECALL_LONG_PROPERTY=1``); the default suite 15.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from asyncrecall import MemoryStoreError, ModelProtocolError
from asyncrecall.memory import FolderStore, MemoryExtractor, TranscriptTurn, _atomic, _history
from asyncrecall.memory.extraction import _extract
from asyncrecall.memory.extraction import _state as _extract_state
from asyncrecall.memory.extraction._consolidate import consolidate
from asyncrecall.memory.extraction._extract import SCHEMA_NAME as EXTRACTION
from asyncrecall.memory.folder import _extraction as _folder_extraction
from asyncrecall.memory.folder import _store

RUNS = int(os.environ.get("ASYNCRECALL_PROPERTY_RUNS") or 0) or (
    2_000 if os.environ.get("ASYNCRECALL_LONG_PROPERTY") == "1" else 15
)
STEPS = 14
NAMES = ("Alpha", "Beta", "Gamma", "Delta", "Epsilon")
SESSIONS = ("s1", "s2", "s3")
_FACT = re.compile(r"Fact f\d+\.")


class Crash(BaseException):
    """The process is killed here."""


class Faults:
    """Counts file mutations; raises :class:`Crash` instead of the ``budget``-th one."""

    def __init__(self) -> None:
        self.budget: int | None = None
        self.paused = False

    def tick(self) -> None:
        if self.budget is None or self.paused:
            return
        self.budget -= 1
        if self.budget <= 0:
            self.budget = None
            raise Crash


class _Os:
    """``os`` for the memory modules, with ``unlink`` counted as a mutation."""

    def __init__(self, faults: Faults) -> None:
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def unlink(self, path: Any) -> None:
        self._faults.tick()
        os.unlink(path)

    def fsync(self, fd: int) -> None:
        pass


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Iterator[Faults]:
    faults = Faults()
    real = _store.atomic_write

    def write(path: Path, text: str, **options: str) -> None:
        faults.tick()
        real(path, text, **options)

    for module, attr in (
        (_store, "atomic_write"),
        (_history, "atomic_write"),
        (_extract_state, "_atomic_write"),
        (_folder_extraction, "atomic_write"),
    ):
        monkeypatch.setattr(module, attr, write)  # fmt: skip
    monkeypatch.setattr(_store, "os", _Os(faults))
    monkeypatch.setattr(_extract_state, "os", _Os(faults))
    monkeypatch.setattr(_atomic, "os", _Os(Faults()))  # fsync skipped, nothing counted
    monkeypatch.setattr(_extract, "ORPHAN_AGE_S", -1.0)
    yield faults


def facts(text: str) -> set[str]:
    return set(_FACT.findall(text))


class World:
    """One run: the folder, the model of facts, and a fresh "process" after a crash."""

    def __init__(self, root: Path, rng: random.Random, faults: Faults) -> None:
        self.root = root
        self.rng = rng
        self.faults = faults
        self.counter = itertools.count(1)
        self.live: set[str] = set()
        self.dead: set[str] = set()
        self.transcripts: dict[str, list[TranscriptTurn]] = {s: [] for s in SESSIONS}
        self.log: list[str] = []
        self.store = FolderStore(root)
        self.observer = FolderStore(root)  # the test's own eyes: another process, read-only

    def fact(self) -> str:
        return f"Fact f{next(self.counter)}."

    def restart(self) -> None:
        self.store = FolderStore(self.root)

    def bodies(self) -> dict[str, str]:
        return {doc.name: doc.body for doc in self.observer.scan(limit=None)}

    def present(self) -> set[str]:
        return set().union(*(facts(b) for b in self.bodies().values()))

    # -- the user's own steps (their effect on the model is read back: a crashed save
    #    or forget may or may not have landed) ---------------------------------------

    def user_save(self) -> None:
        name = self.rng.choice(NAMES)
        fact = self.fact()
        body = fact
        if self.rng.random() < 0.3:  # long: shown cut by extraction
            body += " " + " ".join(f"Padding sentence {i} of {name}." for i in range(12))
        others = [b for n, b in self.bodies().items() if n != name and facts(b)]
        if others and self.rng.random() < 0.3:  # a copy of another memory's fact
            body += " " + sorted(facts(self.rng.choice(others)))[0]
        self._user_write(
            name, lambda: self.store.save_memory(name, "d", "project", body, origin="user"), body
        )

    def user_forget(self) -> None:
        names = sorted(self.bodies())
        if names:
            name = self.rng.choice(names)
            self._user_write(name, lambda: self.store.forget(name), None)

    def _user_write(self, name: str, write: Callable[[], Any], body: str | None) -> None:
        self.log.append(f"user {'save' if body else 'forget'} {name}: {body}")
        before = self.bodies().get(name)
        try:
            write()
        finally:
            after = self.bodies().get(name)
            if after != before and (after == body or (body is None and after is None)):
                gone = facts(before or "") - set().union(
                    *(facts(b) for n, b in self.bodies().items())
                )
                self.live -= gone
                self.dead |= gone
                self.live |= facts(after or "")

    def meanwhile(self) -> None:
        """Another process's user step, while the side model thinks (never crashes)."""
        if self.rng.random() < 0.5:
            self.faults.paused = True
            try:
                (self.user_save if self.rng.random() < 0.6 else self.user_forget)()
            finally:
                self.faults.paused = False

    # -- the model's steps --------------------------------------------------------------

    async def extract(self) -> None:
        session = self.rng.choice(SESSIONS)
        turns = self.transcripts[session]
        base = len(turns)
        turns.append(TranscriptTurn(base, "user", f"something worth keeping {base}"))
        turns.append(TranscriptTurn(base + 1, "assistant", "noted"))
        self.log.append(f"extract {session} {base}")
        await MemoryExtractor(self.store, Compliant(self)).extract(session, list(turns))

    async def consolidate(self) -> None:
        self.log.append("consolidate")
        with contextlib.suppress(ModelProtocolError):  # a refused plan: nothing written
            await consolidate(self.store, Compliant(self))

    # -- the checks ----------------------------------------------------------------------

    def check(self, *, crashed: bool) -> None:
        present = self.present()
        history = "\n".join(self.log)
        assert self.live <= present, f"lost {sorted(self.live - present)} after:\n{history}"
        assert not (self.dead & present), f"resurrected {sorted(self.dead & present)}:\n{history}"
        self.live |= present  # what is there now must stay
        if not crashed:
            index_path = self.root / "MEMORY.md"
            index = index_path.read_text(encoding="utf-8") if index_path.exists() else ""
            for doc in self.observer.scan(limit=None):
                assert f"]({doc.rel_path})" in index, f"{doc.rel_path} unlisted:\n{history}"


class Compliant:
    """The scripted side model: does what a compliant model does with each prompt."""

    name = "compliant"

    def __init__(self, world: World) -> None:
        self.world = world

    async def stream(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    async def generate_json(
        self,
        *,
        system: str,
        prompt: str,
        schema: Mapping[str, Any],
        schema_name: str,
        max_tokens: int | None = None,
    ) -> Any:
        self.world.meanwhile()
        if schema_name == EXTRACTION:
            return self._extraction(prompt)
        return self._plan(prompt)

    def _extraction(self, prompt: str) -> dict[str, Any]:
        rng, world = self.world.rng, self.world
        offsets = [int(m) for m in re.findall(r"^\[(\d+)\] ", prompt, flags=re.M)]
        shown = re.findall(r"^- (\S+) \[\w+\] (.+?): .*? \| (.*)$", prompt, flags=re.M)
        out: list[dict[str, Any]] = []
        for _ in range(rng.randint(0, 2)):
            fact = world.fact()
            if shown and rng.random() < 0.6:
                path, name, body = rng.choice(shown)
                body = re.sub(r"… \[cut: \d+ more characters not shown\]$", "", body)
                out.append({"action": "update", "path": path, "name": name, "description": "d",
                            "type": "project", "content": f"{body} {fact}",
                            "source_offsets": offsets[:1]})  # fmt: skip
            else:
                out.append({"action": "create", "path": "", "name": rng.choice(NAMES),
                            "description": "d", "type": "project", "content": fact,
                            "source_offsets": offsets[-1:]})  # fmt: skip
        return {"memories": out}

    def _plan(self, prompt: str) -> dict[str, Any]:
        rng, world = self.world.rng, self.world
        docs = re.findall(r"^## (\S+) \[\w+\] (.+?): .*?\n(.*?)(?=^## |\Z)", prompt,
                          flags=re.M | re.S)  # fmt: skip
        whole = [(p, n, b.strip()) for p, n, b in docs if "[cut:" not in b]
        actions: list[dict[str, Any]] = []
        choice = rng.random()
        if len(whole) >= 2 and choice < 0.5:
            (p1, n1, b1), (p2, n2, b2) = rng.sample(whole, 2)
            actions.append({"op": "merge", "paths": [p1, p2], "name": rng.choice([n1, n2]),
                            "description": "merged", "type": "project",
                            "content": f"{b1}\n{b2}", "reason": "same"})  # fmt: skip
        elif whole and choice < 0.75:
            p, n, b = rng.choice(whole)
            actions.append({"op": "rewrite", "paths": [p], "name": n, "description": "new",
                            "type": "project", "content": f"{b} {world.fact()}",
                            "reason": "stale"})  # fmt: skip
        else:
            for p, _n, b in whole:
                elsewhere = set().union(*(facts(o) for q, _m, o in docs if q != p))
                if facts(b) and facts(b) <= elsewhere:
                    actions.append({"op": "delete", "paths": [p], "name": "", "description": "",
                                    "type": "project", "content": "", "reason": "dup"})  # fmt: skip
                    break
        return {"actions": actions}


async def _run(root: Path, seed: int, faults: Faults) -> None:
    rng = random.Random(seed)
    world = World(root, rng, faults)
    steps = [world.user_save, world.user_save, world.user_forget, world.extract,
             world.extract, world.extract, world.consolidate]  # fmt: skip
    for _ in range(STEPS):
        step = rng.choice(steps)
        crash = rng.random() < 0.35
        faults.budget = rng.randint(1, 8) if crash else None
        crashed = False
        try:
            result = step()
            if asyncio.iscoroutine(result):
                await result
        except Crash:
            crashed = True
            world.log.append("  -> crashed")
            world.restart()
        except MemoryStoreError as exc:  # pragma: no cover - would be a finding too
            raise AssertionError(f"{exc} after:\n" + "\n".join(world.log)) from exc
        finally:
            faults.budget = None
        world.check(crashed=crashed)


@pytest.mark.timeout(0 if RUNS > 100 else 120)
async def test_nothing_lost_truncated_or_resurrected_in_generated_runs(
    tmp_path: Path, faults: Faults
) -> None:
    """In every generated run (saves, forgets, extractions, consolidations, crashes at
    any write, interleaved with the side model's thinking), every fact the user kept is
    in the store, none the user removed comes back, and the index lists every memory."""
    for seed in range(RUNS):
        await _run(tmp_path / f"run-{seed}" / "memory", seed, faults)

"""Consolidation ("dream"): merge duplicates, rewrite stale facts, remove superseded ones.

A side query reads a cluster of memories (each one's path, type, name, description
and body; ``_clusters``: the whole store when it fits one, else at most four bounded
clusters of related memories, one side query each) and answers a plan,
``{"actions": [...]}``, each action one of:

- ``merge``: ``paths`` (two or more existing memories) become one memory
  (``name``, ``description``, ``type``, ``content``) kept in the file of the one that
  has that name (or a new file); the others are removed;
- ``rewrite``: ``paths`` (one memory) gets new ``description``/``type``/``content``;
- ``delete``: ``paths`` (one memory) was superseded and is removed.

The plan is validated before anything is touched (:func:`validate_plan`): every path
must be an existing memory inside the folder (the same confinement as extraction; a
database's names are held to the same rules), no path may appear in two actions, a
memory whose body the prompt showed cut is left alone (the model did not see all of
it), and written memories follow ``save_memory``'s rules. A dry run stops there.

Applying goes action by action through the store's backend (``_backend``),
each action against the snapshot it was planned on: under the folder lock, every
memory it touches must still say what the side model was shown, else the action is
skipped whole (a memory saved meanwhile is never overwritten or removed), and each
write is a compare-and-swap on its own (the database's are one transaction each). A
merge writes the merged memory first, into the file of the memory that has its name
(or a new one), then removes the others, so a crash half-way leaves every memory
either old or new and none lost. Every write is in the store's history, so a
consolidation can be undone. Afterwards a folder's ``MEMORY.md`` is kept within its
limits (200 lines, 25,000 bytes) by shortening index descriptions if needed.

The lowest trust wins: when the side model was shown a held memory (quarantined, see
``_provenance``) for a plan, every write of that plan is untrusted, its ``held`` naming
the held memories shown (a rewrite of a memory recall uses then waits beside it as a
pending change, ``_pending``; a new or held memory stays held), and no action of it
removes a memory recall uses (such a delete or merge is skipped, said in ``notes``).
A plan never lifts a hold.

Automatic runs (:func:`consolidation_gate`: :class:`ConsolidationGate` for a folder,
``PostgresConsolidationGate`` for a database) happen when at least 24 hours and 5
sessions have passed since the last one, one at a time: the folder's gate holds an OS
file lock for the run (released by the system if the process dies), the database's a
lock row another process may take over once it is an hour old (a crashed run).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

from asyncrecall import _telemetry
from asyncrecall._exceptions import MemoryConflictError, ModelProtocolError
from asyncrecall.memory._limits import INDEX_MAX_LINES
from asyncrecall.memory._precondition import same_content
from asyncrecall.memory._provenance import Source, merge_sources
from asyncrecall.memory._store import Store
from asyncrecall.memory._types import MEMORY_TYPES, MemoryDoc, MemoryType
from asyncrecall.memory.extraction._backend import (
    MIN_HOURS,
    MIN_SESSIONS,
    ExtractionBackend,
    Gate,
    consolidation_gate,
    extraction_backend,
)
from asyncrecall.memory.extraction._clusters import BODY_CHARS, clusters
from asyncrecall.memory.extraction._extract import (
    MAX_CONTENT_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    _committed,
    confine_path,
)
from asyncrecall.models import Model

__all__ = [
    "MIN_HOURS",
    "MIN_SESSIONS",
    "ConsolidationAction",
    "ConsolidationResult",
    "Gate",
    "consolidate",
    "consolidation_gate",
    "plan_consolidation",
    "validate_plan",
]

#: The cap on the side model's answer: a plan may rewrite several memories whole
#: (the recall's side query keeps its own, much smaller cap).
CONSOLIDATION_MAX_TOKENS = 4096

Op: TypeAlias = Literal["merge", "rewrite", "delete"]

MAX_ACTIONS: Final = 50
SCHEMA_NAME: Final = "memory_consolidation"
_BODY_CHARS: Final = BODY_CHARS

SYSTEM_PROMPT: Final = (
    "You tidy the long-term memory of an AI agent. You get its memories, all of them or "
    "one group of related ones (path, type, name, description and body); judge by the "
    "memories shown only. Plan the fewest changes that: merge memories "
    "that say the same thing (action merge, paths of all of them, with the merged name, "
    "description, type and content); rewrite a memory whose facts a later memory "
    "corrected (action rewrite, its one path, the new content); delete a memory that is "
    "entirely superseded (action delete, its one path). Copy paths exactly. Leave alone "
    "every memory whose body is marked [cut], and everything else. Answer only with JSON "
    '{"actions": [...]}; an empty list when they are fine.'
)


@dataclass(frozen=True, slots=True)
class ConsolidationAction:
    """One validated step of a plan."""

    op: Op
    paths: tuple[str, ...]
    name: str = ""
    description: str = ""
    type: MemoryType = "project"
    content: str = ""
    reason: str = ""
    #: The memories of ``paths`` as the side model was shown them: applying checks that
    #: they still say that (empty: no check, for an action built by hand).
    seen: tuple[MemoryDoc, ...] = field(default=(), compare=False, repr=False)
    #: Every memory the plan was made on: a delete or a rewrite is justified by the
    #: others (a later memory supersedes or corrects this one), so it applies only while
    #: none of them has changed or gone.
    snapshot: tuple[MemoryDoc, ...] = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"op": self.op, "paths": list(self.paths), "reason": self.reason}
        if self.op != "delete":
            data.update(
                name=self.name, description=self.description, type=self.type, content=self.content
            )
        return data


@dataclass(frozen=True, slots=True)
class ConsolidationResult:
    """A plan, and what applying it changed (empty for a dry run)."""

    actions: tuple[ConsolidationAction, ...]
    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    index_trimmed: bool = False
    dry_run: bool = False
    memories_before: int = 0
    memories_after: int = 0
    notes: tuple[str, ...] = field(default=())
    #: The history's id of every write this consolidation made: ``memory revert --write``
    #: undoes them as one step ("": nothing was written).
    write_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "actions": [a.to_dict() for a in self.actions],
            "written": list(self.written),
            "removed": list(self.removed),
            "index_trimmed": self.index_trimmed,
            "memories_before": self.memories_before,
            "memories_after": self.memories_after,
            "notes": list(self.notes),
            "write_id": self.write_id,
        }


def consolidation_schema() -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": ["merge", "rewrite", "delete"]},
            "paths": {"type": "array", "items": {"type": "string"}},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "type": {"type": "string", "enum": list(MEMORY_TYPES)},
            "content": {"type": "string"},
            "reason": {"type": "string"},
        },
        "required": ["op", "paths", "name", "description", "type", "content", "reason"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"actions": {"type": "array", "items": item, "maxItems": MAX_ACTIONS}},
        "required": ["actions"],
        "additionalProperties": False,
    }


def consolidation_prompt(docs: Sequence[MemoryDoc]) -> str:
    lines = [f"Memories ({len(docs)}; the index MEMORY.md holds at most {INDEX_MAX_LINES} lines):"]
    for doc in docs:
        body = doc.body
        if len(body) > _BODY_CHARS:
            body = f"{body[:_BODY_CHARS]}… [cut: {len(body) - _BODY_CHARS} more characters]"
        lines.append(f"## {doc.rel_path} [{doc.type}] {doc.name}: {doc.description}\n{body}")
    return "\n".join(lines)


def validate_plan(
    answer: Any, *, root: Path | None, docs: Sequence[MemoryDoc]
) -> list[ConsolidationAction]:
    """The plan's actions, or :class:`ModelProtocolError` naming the first bad one.

    ``root`` is the memory folder (``None`` for a database: paths are then held to the
    same names without a folder to resolve links in).

    All or nothing: a plan with one bad action is refused whole, since its actions
    depend on each other (a merge and a delete of the same file).
    """
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError as exc:
            raise ModelProtocolError("consolidation plan is not JSON") from exc
    if not isinstance(answer, Mapping) or not isinstance(answer.get("actions"), list):
        raise ModelProtocolError('consolidation plan is not an object {"actions": [...]}')
    raw_actions: list[Any] = answer["actions"]
    if len(raw_actions) > MAX_ACTIONS:
        raise ModelProtocolError(f"consolidation plan has over {MAX_ACTIONS} actions")
    by_path = {doc.rel_path: doc for doc in docs}
    seen: set[str] = set()
    actions: list[ConsolidationAction] = []
    snapshot = tuple(docs)
    for index, raw in enumerate(raw_actions):
        try:
            action = _validate_action(raw, root=root, by_path=by_path)
            clash = seen.intersection(action.paths)
            if clash:
                raise ValueError(f"{sorted(clash)[0]!r} is in two actions")
        except ValueError as exc:
            raise ModelProtocolError(f"consolidation action {index} refused: {exc}") from exc
        seen.update(action.paths)
        actions.append(dataclasses.replace(action, snapshot=snapshot))
    return actions


def _validate_action(
    raw: Any, *, root: Path | None, by_path: Mapping[str, MemoryDoc]
) -> ConsolidationAction:
    if not isinstance(raw, Mapping):
        raise ValueError("an action must be an object")
    op = raw.get("op")
    raw_paths = raw.get("paths")
    if op not in ("merge", "rewrite", "delete"):
        raise ValueError(f"op must be merge, rewrite or delete, got {op!r}")
    if not isinstance(raw_paths, list) or not all(isinstance(p, str) for p in raw_paths):
        raise ValueError("paths must be a list of strings")
    paths = tuple(dict.fromkeys(confine_path(root, p) for p in raw_paths))
    missing = [p for p in paths if p not in by_path]
    if missing:
        raise ValueError(f"{missing[0]!r} is not an existing memory")
    cut = [p for p in paths if len(by_path[p].body) > _BODY_CHARS]
    if cut:
        raise ValueError(f"{cut[0]!r} was shown cut: a memory not seen whole is left alone")
    seen = tuple(by_path[p] for p in paths)
    wanted = 2 if op == "merge" else 1
    if (op == "merge" and len(paths) < 2) or (op != "merge" and len(paths) != 1):
        raise ValueError(f"{op} takes {'two or more paths' if wanted == 2 else 'one path'}")
    reason = " ".join(str(raw.get("reason") or "").split())[:300]
    if op == "delete":
        return ConsolidationAction("delete", paths, reason=reason, seen=seen)
    keep = by_path[paths[0]]
    name = " ".join(str(raw.get("name") or "").split()) or keep.name
    description = " ".join(str(raw.get("description") or "").split())
    kind = raw.get("type") or keep.type
    content = raw.get("content")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"name is over {MAX_NAME_CHARS} characters")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise ValueError(f"description is over {MAX_DESCRIPTION_CHARS} characters")
    if kind not in MEMORY_TYPES:
        raise ValueError(f"invalid memory type {kind!r}")
    if not isinstance(content, str) or not content.strip():
        raise ValueError("content must be a non-empty string")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValueError(f"content is over {MAX_CONTENT_CHARS} characters")
    others = {by_path[p].name for p in paths[1:]}
    if name != keep.name and name in {d.name for d in by_path.values()} - others:
        raise ValueError(f"name {name!r} belongs to another memory")
    return ConsolidationAction(op, paths, name, description, kind, content, reason, seen)


async def plan_consolidation(
    store: Store, model: Model, *, backend: ExtractionBackend | None = None
) -> list[ConsolidationAction]:
    """Ask the side model for a plan over each cluster of the store (``_clusters``),
    validated (nothing written); each action's snapshot is its cluster."""
    backend = backend or extraction_backend(store)
    actions: list[ConsolidationAction] = []
    for docs in await clusters(store):
        answer = await model.generate_json(
            system=SYSTEM_PROMPT,
            prompt=consolidation_prompt(docs),
            schema=consolidation_schema(),
            schema_name=SCHEMA_NAME,
            max_tokens=CONSOLIDATION_MAX_TOKENS,
        )
        actions.extend(validate_plan(answer, root=backend.files_root, docs=docs))
    return actions


def _count(store: Store) -> int:
    """The store's memories (a database counts them; a folder scans)."""
    return store.count()


async def consolidate(
    store: Store,
    model: Model,
    *,
    dry_run: bool = False,
    backend: ExtractionBackend | None = None,
) -> ConsolidationResult:
    """Plan with the side model, then (unless ``dry_run``) apply the plan.

    Any store extraction supports: a folder, or a database (``backend`` defaults to
    the store's). With OpenTelemetry on, one ``asyncrecall.consolidation`` span covers
    it (the side query's span under it).
    """
    telemetry = _telemetry.current()
    if telemetry is None:
        return await _consolidate(store, model, dry_run=dry_run, backend=backend)
    attributes = {"asyncrecall.consolidation.dry_run": dry_run}
    with telemetry.operation("asyncrecall.consolidation", attributes) as span:
        result = await _consolidate(store, model, dry_run=dry_run, backend=backend)
        span.set_attributes(
            {
                "asyncrecall.consolidation.actions": len(result.actions),
                "asyncrecall.consolidation.written": len(result.written),
                "asyncrecall.consolidation.removed": len(result.removed),
            }
        )
        return result


async def _consolidate(
    store: Store, model: Model, *, dry_run: bool, backend: ExtractionBackend | None
) -> ConsolidationResult:
    import asyncio

    backend = backend or extraction_backend(store)
    before = await asyncio.to_thread(_count, store)
    actions = await plan_consolidation(store, model, backend=backend)
    if dry_run:
        return ConsolidationResult(tuple(actions), dry_run=True, memories_before=before)
    # Once applying has begun it runs to its end before a cancellation takes effect.
    result = await _committed(asyncio.to_thread(apply_plan, store, actions, backend=backend))
    return ConsolidationResult(
        tuple(actions),
        written=result.written,
        removed=result.removed,
        index_trimmed=result.index_trimmed,
        memories_before=before,
        memories_after=await asyncio.to_thread(_count, store),
        notes=result.notes,
        write_id=result.write_id,
    )


def apply_plan(
    store: Store,
    actions: Sequence[ConsolidationAction],
    *,
    backend: ExtractionBackend | None = None,
) -> ConsolidationResult:
    """Apply validated actions, each against the snapshot it was planned on (see the
    module doc), then trim the index. An action whose memories changed since is skipped
    whole and said in ``notes``."""
    backend = backend or extraction_backend(store)
    written: list[str] = []
    removed: list[str] = []
    notes: list[str] = []
    write_id = f"consolidation:{uuid.uuid4().hex[:12]}"
    with backend.locked():
        # Each snapshot a delete or a rewrite rests on is checked once, before anything
        # of the plan is written.
        changes = {
            id(a.snapshot): _changed_since(backend, a.snapshot) for a in actions if a.op != "merge"
        }
        for action in actions:
            changed = changes.get(id(action.snapshot))
            try:
                if action.op != "merge" and changed is not None:
                    raise MemoryConflictError(
                        f"memory {changed!r} changed since the plan, and this {action.op} "
                        "was justified by the memories as they were"
                    )
                _apply_action(backend, action, written, removed, write_id)
            except (MemoryConflictError, _Refused) as exc:
                notes.append(f"{action.op} {', '.join(action.paths)} skipped: {exc}")
    trimmed = backend.trim_index()
    return ConsolidationResult(
        tuple(actions), tuple(written), tuple(removed), trimmed, notes=tuple(notes),
        write_id=write_id if written or removed else "",
    )  # fmt: skip


def _changed_since(backend: ExtractionBackend, snapshot: Sequence[MemoryDoc]) -> str | None:
    """The name of a memory of a snapshot (a cluster, bounded) that changed or went
    since, if any: each looked up by its name."""
    for doc in snapshot:
        current = backend.get(doc.name)
        if current is None or not same_content(current, doc):
            return doc.name
    return None


def _apply_action(
    backend: ExtractionBackend,
    action: ConsolidationAction,
    written: list[str],
    removed: list[str],
    write_id: str,
) -> None:
    """One action: its memories checked against what the plan saw, then written (every
    write under the consolidation's ``write_id``)."""
    seen = action.seen or tuple(backend.store.get(p) for p in action.paths)
    for doc in seen:
        now = backend.get(doc.name)
        if now is None or not same_content(now, doc):
            raise MemoryConflictError(f"memory {doc.name!r} changed since the plan was made")
    held = _held_text(action.snapshot or seen)
    if held:
        # The plan was made with held text shown: it never removes a memory the user
        # keeps (its text would leave recall on the word of that text).
        removed_now = seen if action.op == "delete" else [d for d in seen if d.name != action.name]
        used = [doc.name for doc in removed_now if not doc.quarantined]
        if used:
            raise _Refused(
                f"the plan was made with a held memory shown ({held}): "
                f"memory {used[0]!r}, which recall uses, is not removed"
            )
    if action.op == "delete":
        gone = backend.forget(
            seen[0].rel_path, expected=seen[0], origin="consolidation", write_id=write_id
        )
        removed.append(gone.rel_path)
        return
    # The merged memory lands in the file of the memory that has its name (any of the
    # paths, not only the first: a merge named like its second memory keeps that one),
    # or in a new file; every other memory of the action is removed after it.
    target = next((doc for doc in seen if doc.name == action.name), None)
    offsets = _merged_offsets(backend, seen)
    # Every source of every memory merged is carried, and the consolidation's own is as
    # untrusted as the least trusted memory the side model was shown for this plan (its
    # cluster, not only the memories written): a plan never lifts a hold, and text a
    # held memory brought into the prompt keeps its hold in whatever is written.
    kept = merge_sources(*(backend.provenance(doc) for doc in seen))
    why = f"planned with held text shown: {held}" if held else ""
    mine = Source.now("consolidation", held=why)
    doc = backend.save(
        action.name, action.description, action.type, action.content, offsets,
        expected=target, origin="consolidation", sources=(*kept, mine), write_id=write_id,
    )  # fmt: skip
    written.append(doc.rel_path)
    for old in seen:
        if old is not target:
            gone = backend.forget(
                old.rel_path, expected=old, origin="consolidation", write_id=write_id
            )
            removed.append(gone.rel_path)


class _Refused(Exception):
    """An action of a plan made with held text shown would remove a memory recall uses:
    it is skipped, said in the result's notes."""


def _held_text(docs: Sequence[MemoryDoc]) -> str:
    """Where the held text among ``docs`` (the memories a side model was shown) came
    from: their paths, at most three named (``""``: none is held)."""
    held = sorted(doc.rel_path for doc in docs if doc.quarantined)
    if not held:
        return ""
    named = ", ".join(held[:3])
    return named if len(held) <= 3 else f"{named} and {len(held) - 3} more"


def _merged_offsets(backend: ExtractionBackend, docs: Sequence[MemoryDoc]) -> dict[str, list[int]]:
    merged: dict[str, set[int]] = {}
    for doc in docs:
        for session, offsets in backend.source_offsets(doc).items():
            merged.setdefault(session, set()).update(offsets)
    return {session: sorted(offsets) for session, offsets in merged.items()}

"""``asyncrecall memory path|list|show|add|forget|confirm|history|revert|recall|export|
import|migrate``: the project's memories.

Every sub-command takes the shared flags that make sense for it after its name
(``--memory-dir``, ``--project``; ``recall`` also the endpoint and selector flags and
``--no-memory``), ``--json``, and ``--store URL`` / ``--namespace NAME`` (also
``ASYNCRECALL_STORE`` / ``ASYNCRECALL_NAMESPACE``): with a ``postgresql://`` store the
memories live in that database, in the namespace (default: the project's root folder),
instead of the memory folder. ``export --to DIR`` copies the store's memories into a
folder; ``import --from DIR`` copies a folder's memories into the store; either keeps
all a memory carries: provenance, creation and modification times, index order, other
front matter keys (``asyncrecall.memory._transfer``). Data goes to stdout, warnings
to stderr. ``recall`` runs the recall the agent runs: the same store, the same
selector choice (:func:`asyncrecall.cli._memory_config.build_memory_manager`), the same
block.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asyncrecall._exceptions import ConfigError, MemoryStoreError
from asyncrecall.cli._common import (
    endpoint_flags,
    folder_flags,
    settings_from_args,
    stdout_console,
    store_flags,
    user_waits,
)
from asyncrecall.cli._memory_config import build_memory_manager, open_memory_store
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import (
    DEFAULT_LIMIT,
    EMPTY_RECALL,
    MEMORY_TYPES,
    FolderStore,
    MemoryDoc,
    Recaller,
    RecallResult,
    Store,
)
from asyncrecall.memory._document import checked_fields
from asyncrecall.memory._pending import PendingChange
from asyncrecall.memory._prompt import age_in_days, format_age
from asyncrecall.memory._provenance import origin_label
from asyncrecall.models import Model

__all__ = ["log_warnings_to_stderr", "register", "side_model"]

Handler = Callable[[argparse.Namespace, Settings], int]


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``memory`` and its sub-commands to the command line."""
    del common  # the agent's flags (limits, output format, recall mode) do not apply here
    parser = subparsers.add_parser(
        "memory",
        help="the memory folder of the current project",
        description="The memory folder of the current project: inspect, edit, try recall.",
    )
    commands = parser.add_subparsers(dest="memory_command", metavar="SUBCOMMAND", required=True)

    # Each sub-command takes the shared flags that make sense for it: the folder for all,
    # the endpoint and selector for recall (never the agent's limits or output format).
    folder, stores = folder_flags(), store_flags()
    recall_parents = [endpoint_flags(), folder_flags(memory=True)]

    def add(
        name: str,
        summary: str,
        handler: Handler,
        parents: list[argparse.ArgumentParser] | None = None,
    ) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = commands.add_parser(
            name, help=summary, description=summary, parents=[*(parents or [folder]), stores]
        )
        sub.add_argument("--json", action="store_true", help="print JSON for machines")
        sub.set_defaults(handler=_handle(handler))
        return sub

    add("path", "print the memory folder (created if missing)", _path)
    add("list", "list the memories, newest first", _list)
    show = add("show", "print one memory", _show)
    show.add_argument("name", metavar="NAME", help="the memory's name or relative path")
    save = add("add", "save a memory (content from --content or standard input)", _add)
    save.add_argument("--name", required=True, help="the memory's name (its title)")
    save.add_argument("--description", default="", help="one line saying what it is about")
    save.add_argument("--type", required=True, choices=MEMORY_TYPES, help="the memory's type")
    save.add_argument("--content", help="the body (default: read standard input)")
    forget = add("forget", "remove a memory and its index line", _forget)
    forget.add_argument("name", metavar="NAME", help="the memory's name or relative path")
    confirm = add(
        "confirm", "vouch for a quarantined memory, so that recall may use it again", _confirm
    )
    confirm.add_argument(
        "names", nargs="+", metavar="NAME", help="the memory's name or relative path"
    )
    versions = add(
        "history", "list the recorded writes of a memory (no NAME: the newest of all)", _history
    )
    versions.add_argument(
        "name", nargs="?", metavar="NAME", help="the memory's name (also a removed one)"
    )
    undo = add(
        "revert",
        "undo the newest write of a memory, go back to a version, or undo one write of many "
        "memories (a consolidation, an import) as one step",
        _revert,
    )
    undo.add_argument(
        "name", nargs="?", metavar="NAME", help="the memory's name (also a removed one)"
    )
    undo.add_argument("--to", type=int, metavar="N", help="the version to bring back")
    undo.add_argument(
        "--write",
        metavar="ID",
        help="undo every change of this write (its id: `memory history`, or what consolidate "
        "and import print)",
    )
    from asyncrecall.cli import _consolidate  # memory consolidate

    tidy = add(
        "consolidate",
        "merge duplicates, rewrite stale facts, drop superseded ones",
        _consolidate.run,
        recall_parents,
    )
    _consolidate.add_arguments(tidy)
    recall = add(
        "recall", "run the agent's recall for a query and print the result", _recall, recall_parents
    )
    recall.add_argument("query", metavar="QUERY", help="the user query to recall for")
    recall.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help=f"files at most (default: the recall_files setting, {DEFAULT_LIMIT})",
    )
    recall.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATH",
        help="a relative path already surfaced this session (repeatable)",
    )
    migrate = add(
        "migrate", "create or update the database store's schema (as its owner)", _migrate
    )
    migrate.add_argument(
        "--row-security",
        action="store_true",
        help="also have the database keep namespaces apart: a role reads and writes only "
        "the namespaces it is bound to (--bind, --bind-all), none if bound to none",
    )
    migrate.add_argument(
        "--bind",
        action="append",
        default=[],
        metavar="ROLE=NAMESPACE",
        help="with --row-security: bind a role to a namespace (repeatable, also for one "
        "role: it is bound to each)",
    )
    migrate.add_argument(
        "--bind-all",
        action="append",
        default=[],
        metavar="ROLE",
        help="with --row-security: bind a role to every namespace (the fleet's own role)",
    )
    export = add("export", "copy every memory of the store into a memory folder", _export)
    export.add_argument("--to", required=True, metavar="DIR", help="the folder to write")
    load = add("import", "copy every memory of a memory folder into the store", _import)
    load.add_argument("--from", dest="source", required=True, metavar="DIR", help="the folder")
    load.add_argument(
        "--trusted",
        action="store_true",
        help="the folder's memories are your own (an export of yours): recall may use them at "
        "once; without it they are quarantined until `memory confirm NAME`",
    )


def _handle(handler: Handler) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        log_warnings_to_stderr()
        settings = settings_from_args(args)
        try:
            return handler(args, settings)
        finally:
            while _OPENED:
                _close(_OPENED.pop())

    return run


# Stores opened by the running sub-command, closed when it ends.
_OPENED: list[Store] = []


def _close(store: Store) -> None:
    store.close()


# -- output helpers ------------------------------------------------------------------


def _out() -> Any:
    return stdout_console(soft_wrap=True, highlight=False, emoji=False)


def _err() -> Any:
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True, highlight=False, emoji=False)


def _print_json(value: Any) -> None:
    _out().print_json(json.dumps(value, ensure_ascii=False))


class _StderrHandler(logging.Handler):
    """Warnings of the memory package, one line each on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _err().print(f"asyncrecall: warning: {record.getMessage()}", markup=False)
        except Exception:  # pragma: no cover - logging must never break the command
            self.handleError(record)


def log_warnings_to_stderr() -> None:
    logger = logging.getLogger("asyncrecall.memory")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler(logging.WARNING)
        logger.addHandler(handler)
        logger.propagate = False


def _doc_json(doc: MemoryDoc) -> dict[str, Any]:
    return {
        "name": doc.name,
        "description": doc.description,
        "type": doc.type,
        "rel_path": doc.rel_path,
        "path": str(doc.path),
        "mtime": doc.mtime,
        "size": doc.size,
        "origin": doc.origin,
        "quarantined": doc.quarantined,
    }


def _store(settings: Settings) -> Store:
    """The store these settings name (a database is connected now: exit 2 if down)."""
    store = open_memory_store(settings)
    _OPENED.append(store)
    return store


# -- sub-commands --------------------------------------------------------------------


def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    """``memory migrate``: the schema of ``--store``'s database brought up to date."""
    from asyncrecall.memory import is_postgres_url

    url = settings.store
    if not url or not is_postgres_url(url):
        raise ConfigError("memory migrate needs a database store: --store postgresql://...")
    from asyncrecall.memory.postgres._store import PostgresStore

    binds: list[tuple[str, str]] = []
    for item in args.bind:
        role, sep, namespace = str(item).partition("=")
        if not sep or not role or not namespace:
            raise ConfigError(f"--bind takes ROLE=NAMESPACE, got {item!r}")
        binds.append((role, namespace))
    fleet = [str(role) for role in args.bind_all]
    if any(not role for role in fleet):
        raise ConfigError("--bind-all takes a ROLE")
    if (binds or fleet) and not args.row_security:
        raise ConfigError("--bind and --bind-all need --row-security")
    found, now = PostgresStore.migrate(url)
    warnings: tuple[str, ...] = ()
    if args.row_security:
        warnings = PostgresStore.enable_row_security(url, bind=binds, bind_all=fleet)
    for warning in warnings:
        _err().print(f"asyncrecall: warning: {warning}", markup=False)
    if args.json:
        report: dict[str, object] = {"found": found, "version": now}
        if args.row_security:
            report["row_security"] = {
                "bound": [{"role": role, "namespace": ns} for role, ns in binds],
                "bound_to_all": fleet,
                "warnings": list(warnings),
            }
        _print_json(report)
        return 0
    if found == now:
        _out().print(f"schema version {now}: up to date", markup=False)
    else:
        _out().print(f"schema version {found} -> {now}", markup=False)
    if args.row_security:
        bound = [f"{role} -> {ns!r}" for role, ns in binds]
        bound += [f"{role} -> every namespace" for role in fleet]
        _out().print(
            f"row-level security on; bound now: {', '.join(bound) or 'none'}", markup=False
        )
    return 0


def _path(args: argparse.Namespace, settings: Settings) -> int:
    store = _store(settings)
    root = store.ensure()
    if args.json:
        _print_json({"path": str(root)})
    else:
        _out().print(str(root), markup=False)
    return 0


def _list(args: argparse.Namespace, settings: Settings) -> int:
    store = _store(settings)
    docs = store.scan(limit=None)
    if args.json:
        waiting = _pending_names(store)
        _print_json([{**_doc_json(doc), "pending": doc.name in waiting} for doc in docs])
        return 0
    if not docs:
        _err().print(f"No memories in {store.location}", markup=False)
        return 0
    from rich.table import Table
    from rich.text import Text

    now = time.time()
    waiting = _pending_names(store)
    table = Table(title=Text(f"Memories in {store.location}"), title_justify="left")
    for column in ("name", "type", "file", "saved", "description"):
        table.add_column(column, overflow="fold")
    for doc in docs:
        saved = format_age(age_in_days(doc.mtime, now=now)).removeprefix("Saved ")
        name = Text(doc.name)
        if doc.quarantined:
            name.append(" [held]", style="yellow")
        if doc.name in waiting:
            name.append(" [change waits]", style="yellow")
        table.add_row(name, *(Text(c) for c in (doc.type, doc.rel_path, saved, doc.description)))
    out = _out()
    out.print(table)
    held = [d.name for d in docs if d.quarantined or d.name in waiting]
    if held:
        marks = []
        if any(d.quarantined for d in docs):
            marks.append("[held]: not recalled (untrusted writer, or imported)")
        if waiting:
            marks.append("[change waits]: recall uses the text before the change")
        names = " ".join(_shell_word(n) for n in held)
        out.print(
            f"{'; '.join(marks)}. Read one with `asyncrecall memory show NAME`; "
            f"confirm with: asyncrecall memory confirm {names}",
            markup=False,
        )
    return 0


def _show(args: argparse.Namespace, settings: Settings) -> int:
    store = _store(settings)
    doc = store.get(args.name)
    change = _pending(store, doc)
    if args.json:
        sources = _provenance(store, doc)
        waiting = change.to_json() if change is not None else None
        _print_json({**_doc_json(doc), "provenance": sources, "body": doc.body,
                     "pending": waiting})  # fmt: skip
        return 0
    age = format_age(age_in_days(doc.mtime, now=time.time()))
    console = _out()
    console.print(f"{doc.name} ({doc.rel_path})", markup=False, style="bold")
    console.print(f"type: {doc.type} · {age.lower()} · {doc.path}", markup=False)
    held = " · quarantined: not recalled until `memory confirm`" if doc.quarantined else ""
    console.print(f"origin: {doc.origin}{held}", markup=False)
    if doc.description:
        console.print(doc.description, markup=False)
    console.print()
    console.print(doc.body, markup=False)
    if change is not None:
        console.print()
        console.print(
            f"A change waits (untrusted: {origin_label(change.sources)}); recall uses the "
            f"text above until `asyncrecall memory confirm {doc.name}` applies it:",
            markup=False,
            style="bold",
        )
        console.print(change.body, markup=False)
    return 0


def _pending(store: Store, doc: MemoryDoc) -> PendingChange | None:
    """The change waiting beside ``doc`` (``None``: none)."""
    return store.pending_of(doc)


def _pending_names(store: Store) -> set[str]:
    return store.pending_names()


def _provenance(store: Store, doc: MemoryDoc) -> list[dict[str, Any]] | None:
    """``doc``'s sources as stored."""
    return [source.to_json() for source in store.provenance_of(doc)]


def _add(args: argparse.Namespace, settings: Settings) -> int:
    try:  # what the user typed is bad usage (2), not a memory error (1)
        checked_fields(args.name, args.description, args.type)
    except MemoryStoreError as exc:
        raise ConfigError(f"memory add: {exc}") from None
    content: str | None = args.content
    if content is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise ConfigError("memory add needs --content or the content on standard input")
        content = sys.stdin.read()
    # The user typed it: their own words, trusted (a library write without an origin is not).
    doc = _store(settings).save_memory(
        args.name, args.description, args.type, content, origin="user"
    )
    if args.json:
        _print_json(_doc_json(doc))
    else:
        # A held memory stays held after any write but the user's confirmation.
        held = f"; still held: `memory confirm {doc.name}` lets recall use it"
        _out().print(f"Saved {doc.name!r} in {doc.path}{held if doc.quarantined else ''}",
                     markup=False)  # fmt: skip
    return 0


def _forget(args: argparse.Namespace, settings: Settings) -> int:
    doc = _store(settings).forget(args.name, origin="user")
    if args.json:
        _print_json(_doc_json(doc))
    else:
        _out().print(f"Forgot {doc.name!r} ({doc.rel_path})", markup=False)
    return 0


def _confirm(args: argparse.Namespace, settings: Settings) -> int:
    """``memory confirm NAME...``: a ``confirmed`` source, which lifts a quarantine or
    applies the change waiting beside the memory (``memory._pending``)."""
    store = _store(settings)
    docs = [store.confirm(name) for name in args.names]
    if args.json:
        _print_json(_doc_json(docs[0]) if len(docs) == 1 else [_doc_json(d) for d in docs])
        return 0
    for doc in docs:
        _out().print(f"Confirmed {doc.name!r}: recall may use it", markup=False)
    return 0


def _history(args: argparse.Namespace, settings: Settings) -> int:
    """Every recorded write of a memory; without NAME, the newest writes of every memory
    (each with its write id, which ``revert --write`` takes)."""
    keeper = _store(settings)
    whole = args.name is None
    records = keeper.recent_writes() if whole else keeper.history_of(args.name)
    if args.json:
        _print_json([r.to_json() for r in records])
        return 0
    if not records:
        what = "any memory" if whole else repr(args.name)
        _out().print(f"no recorded writes of {what}", markup=False)
        return 0
    from rich.table import Table
    from rich.text import Text

    head = ("name", "version") if whole else ("version",)
    table = Table(*head, "op", "by", "when", "size after", "file", "write", box=None)
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.at))
        size = "—" if r.after is None else f"{len(r.after.encode('utf-8'))} B"
        cells = (r.name, str(r.seq)) if whole else (str(r.seq),)
        row = (*cells, r.op, r.origin, when, size, r.path, r.write_id or "—")
        table.add_row(*(Text(c) for c in row))
    _out().print(table)
    return 0


def _revert(args: argparse.Namespace, settings: Settings) -> int:
    """Undo the newest write of a memory, bring back version ``--to``, or undo every
    change of one write (``--write ID``) as one step."""
    keeper = _store(settings)
    if args.write is not None:
        if args.name is not None or args.to is not None:
            raise ConfigError("memory revert --write ID takes no NAME and no --to")
        return _revert_write(args, _undone(keeper, args.write))
    if args.name is None:
        raise ConfigError("memory revert needs a NAME, or --write ID")
    doc = keeper.revert(args.name, to=args.to)
    if args.json:
        _print_json({"name": args.name, "removed": doc is None,
                     "rel_path": doc.rel_path if doc else None})  # fmt: skip
    elif doc is None:
        _out().print(f"Reverted {args.name!r}: it is removed again", markup=False)
    else:
        _out().print(f"Reverted {doc.name!r} ({doc.rel_path})", markup=False)
    return 0


def _undone(keeper: Store, write_id: str) -> dict[str, MemoryDoc | None]:
    """``keeper.revert_write(write_id)``; stopped by Ctrl-C or a terminating signal (see
    :func:`_copy`), one stderr line says how to finish it, and the exit status is 130 or
    128 + the signal's number."""
    from asyncrecall.cli._signals import Ended, exit_status, unwinding

    try:
        with unwinding():
            return keeper.revert_write(write_id)
    except (KeyboardInterrupt, Ended) as exc:
        sys.stderr.write(
            f"asyncrecall: revert --write {write_id} interrupted (each memory it reverted "
            f"is whole and in the index); to finish it: asyncrecall memory revert --write "
            f"undo:{write_id}, then asyncrecall memory revert --write {write_id}\n"
        )
        raise SystemExit(exit_status(exc.signum) if isinstance(exc, Ended) else 130) from None


def _revert_write(args: argparse.Namespace, undone: dict[str, MemoryDoc | None]) -> int:
    if args.json:
        _print_json([{"name": name, "removed": doc is None,
                      "rel_path": doc.rel_path if doc else None}
                     for name, doc in undone.items()])  # fmt: skip
        return 0
    out = _out()
    out.print(f"Undid write {args.write}: {len(undone)} memories", markup=False)
    for name, doc in undone.items():
        state = "removed again" if doc is None else f"back as it was ({doc.rel_path})"
        out.print(f"  {name}: {state}", markup=False)
    out.print(
        f"(undo this with: asyncrecall memory revert --write undo:{args.write})", markup=False
    )
    return 0


def _recall(args: argparse.Namespace, settings: Settings) -> int:
    started = time.perf_counter()
    why = ""
    manager_why = "memory_disabled"
    if not settings.memory_enabled:
        _err().print("memory is disabled (--no-memory or ASYNCRECALL_MEMORY=0): no recall")
        result = EMPTY_RECALL
    else:
        limit = args.limit if args.limit is not None else settings.recall_files
        with user_waits(settings):  # a handed-on extraction keeps out of its way
            result, why = asyncio.run(_run_recall(settings, args.query, args.exclude, limit))
    manager_why = why
    elapsed_ms = (time.perf_counter() - started) * 1000
    if args.json:
        _print_json(
            {
                "query": args.query,
                "strategy": result.strategy,
                "fallback_reason": result.fallback_reason,
                "reason": _reason_code(manager_why, result) if not result.selected else None,
                "selected": [_doc_json(doc) for doc in result.selected],
                "prompt": result.prompt,
                "recall_ms": round(elapsed_ms, 3),
            }
        )
        return 0
    console = _out()
    # A fallback was already reported once, by the memory package's warning (stderr).
    console.print(
        f"strategy: {result.strategy} · {len(result.selected)} file(s) · {elapsed_ms:.1f} ms",
        markup=False,
    )
    for doc in result.selected:
        console.print(f"  {doc.rel_path} — {doc.name}", markup=False)
    if why:
        console.print(
            f"nothing recalled: {why} [{_reason_code(manager_why, result)}]", markup=False
        )
    if result.prompt:
        console.print()
        console.print(result.prompt, markup=False)
    return 0


#: The reason codes of what ``_why_nothing`` explains in words, by the words' start.
_WHY_CODES = (
    ("the query has nothing to recall", "too_short"),
    ("no memories in", "no_memories"),
    ("all ", "no_candidates"),
)


def _reason_code(why: str, result: RecallResult) -> str:
    """Why nothing was recalled, as a code (``reason`` of ``memory recall --json``)."""
    if why == "memory_disabled":
        return why
    if result.reason:
        return result.reason
    if result.fallback_reason:
        return "selector_failed"
    for start, code in _WHY_CODES:
        if why.startswith(start):
            return code
    return "no_match"


async def _run_recall(
    settings: Settings, query: str, excluded: list[str], limit: int
) -> tuple[RecallResult, str]:
    """The recall, and when it selected nothing, why (one line; else "")."""
    side = side_model(settings)
    try:
        manager = build_memory_manager(settings, side_model=side)
        _OPENED.append(manager.store)
        result = await manager.recall(query, excluded_paths=excluded, limit=limit)
        if result.selected:
            return result, ""
        return result, _why_nothing(manager, result, query, excluded)
    finally:
        close = getattr(side, "aclose", None)
        if close is not None:
            await close()


def _why_nothing(manager: Recaller, result: RecallResult, query: str, excluded: list[str]) -> str:
    """Why a recall selected nothing, in words a user can act on."""
    store = manager.store
    if manager.skips(query):
        return (
            "the query has nothing to recall (one word, or a bare yes/ok), so recall "
            "skipped it; ask a whole question (or set skip_trivial = false)"
        )
    if result.fallback_reason:
        return result.fallback_reason
    docs = store.scan(limit=None)
    if not docs:
        return f"no memories in {store.location} yet (asyncrecall memory add ...)"
    left = [d for d in docs if d.rel_path not in set(excluded)]
    if not left:
        return f"all {len(docs)} memories were excluded (--exclude)"
    held = [d for d in left if d.quarantined] if manager.quarantine else []
    if len(held) == len(left):
        names = " ".join(_shell_word(d.name) for d in held)
        return (
            f"all {len(held)} memories are held (quarantined) until you confirm them: "
            f"asyncrecall memory confirm {names}"
        )
    return (
        f"the {result.strategy if result.strategy != 'none' else 'configured'} selector "
        f"found none of {len(left) - len(held)} memories relevant to the query"
    )


def side_model(settings: Settings) -> Model | None:
    """The agent's side model when an endpoint is configured, else ``None``."""
    name = settings.effective_side_model
    if not settings.base_url or not name or settings.effective_selector != "model":
        return None
    from asyncrecall.models._openai import OpenAIModel

    model: Model = OpenAIModel(model=name, base_url=settings.base_url, api_key=settings.api_key)
    return model


def _copy(
    source: Store,
    target: Store,
    *,
    trusted: bool = True,
    write_id: str = "",
    as_is: bool = False,
) -> list[tuple[MemoryDoc, MemoryDoc]]:
    """Save every memory of ``source`` into ``target`` with all it carries (provenance,
    creation and modification times, index order, other front matter keys); ``trusted``
    false: every copy is quarantined until confirmed; ``as_is`` (an export): no
    ``import`` source added. Progress goes to stderr (see :class:`_Progress`).

    Ctrl-C or a terminating signal stops the copy between two memories: what was
    copied stays, each memory whole and listed in the target's index (the store's batch
    writes its index as it unwinds, see ``_signals.unwinding``); one line on stderr says
    how far it got and how to undo it, and the exit status is 130 (Ctrl-C) or 128 + the
    signal's number."""
    from asyncrecall.cli._signals import Ended, exit_status, unwinding
    from asyncrecall.memory._transfer import copy_memories

    verb = "export" if as_is else "import"
    progress = _Progress(f"{verb}ing")
    try:
        with unwinding():
            return copy_memories(
                source, target, trusted=trusted, write_id=write_id, as_is=as_is, progress=progress
            )
    except (KeyboardInterrupt, Ended) as exc:
        progress.end()
        of = f" of {progress.total}" if progress.total else ""
        undo = f"; undo it with: asyncrecall memory revert --write {write_id}" if write_id else ""
        sys.stderr.write(
            f"asyncrecall: {verb} interrupted after {progress.done}{of} memories "
            f"(each one whole and in the index){undo}\n"
        )
        status = exit_status(exc.signum) if isinstance(exc, Ended) else 130
        raise SystemExit(status) from None
    finally:
        progress.end()


class _Progress:
    """``importing 120 of 2000`` on stderr: one line rewritten in place on a terminal;
    elsewhere a line at each tenth of a long copy (:data:`LONG` memories or more)."""

    LONG = 200

    def __init__(self, verb: str) -> None:
        self.verb = verb
        self.terminal = sys.stderr.isatty()
        self.shown = False
        self.done = self.total = 0

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self.terminal:
            sys.stderr.write(f"\r{self.verb} {done} of {total}")
            self.shown = True
        elif total >= self.LONG and (done * 10 // total) != ((done - 1) * 10 // total):
            sys.stderr.write(f"{self.verb} {done} of {total}\n")
        else:
            return
        sys.stderr.flush()

    def end(self) -> None:
        if self.shown:
            self.shown = False
            sys.stderr.write("\n")
            sys.stderr.flush()


def _report_copy(
    args: argparse.Namespace, copied: list[tuple[MemoryDoc, MemoryDoc]], what: str
) -> int:
    if args.json:
        _print_json([{"from": d.rel_path, "to": s.rel_path, "name": d.name} for d, s in copied])
    else:
        _out().print(f"{what}: {len(copied)} memories", markup=False)
    return 0


def _export(args: argparse.Namespace, settings: Settings) -> int:
    source = _store(settings)
    target = FolderStore(Path(args.to))
    copied = _copy(source, target, as_is=True)
    return _report_copy(args, copied, f"Exported {source.location} to {target.location}")


def _import(args: argparse.Namespace, settings: Settings) -> int:
    folder = Path(args.source)
    if not folder.is_dir():
        raise ConfigError(f"memory import: {folder} is not a folder")
    target = _store(settings)
    write_id = f"import:{uuid.uuid4().hex[:12]}"
    copied = _copy(FolderStore(folder), target, trusted=args.trusted, write_id=write_id)
    waiting = _pending_names(target)
    held = [s.name for _, s in copied if s.quarantined or s.name in waiting]
    if args.json:
        _print_json([{"from": d.rel_path, "to": s.rel_path, "name": d.name,
                      "quarantined": s.quarantined, "pending": s.name in waiting,
                      "write_id": write_id}
                     for d, s in copied])  # fmt: skip
        return 0
    out = _out()
    out.print(f"Imported {folder} into {target.location}: {len(copied)} memories", markup=False)
    if held:
        names = " ".join(_shell_word(n) for n in held)
        out.print(
            f"{len(held)} of them quarantined (not recalled; a memory you already had keeps "
            "its text, the imported one waits beside it) until you confirm them:\n"
            f"  asyncrecall memory confirm {names}\n"
            "(or import with --trusted a folder that is your own export)",
            markup=False,
        )
    if copied:
        out.print(f"Undo the whole import with: asyncrecall memory revert --write {write_id}",
                  markup=False)  # fmt: skip
    return 0


def _shell_word(text: str) -> str:
    import shlex

    return shlex.quote(text)

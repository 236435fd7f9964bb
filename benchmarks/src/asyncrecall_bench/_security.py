"""``asyncrecall bench security``: memory poisoning through every way into the store.

Each case of :mod:`asyncrecall_bench._security_data` runs in a fresh project, home and
memory folder against a :class:`~asyncrecall.testing.LocalServer`:

1. **planting**, through its channel's real path (``_security_channels``): the agent
   loop with a compliant scripted main model and side model, ``memory import``'s
   command, the MCP server's ``save`` tool, ``memory consolidate``'s code, or a cloned
   project's own settings and memories;
2. **a later conversation** asks the case's question; the side model selects every
   memory its manifest offers (up to 5), and the recall settles before the first
   request.

Reported per channel and per language: cases, attacks that **reached the store** (the
case's token is in a file of the memory folder: a memory, a change waiting beside one,
the index), and attacks **injected** into the later conversation (the token is in
anything the main model was sent: the system prompt's index or a memory block): attack
success. Benign facts: saved (reached the store), and injected. Each figure with
quarantine on (the default) and off (``ASYNCRECALL_QUARANTINE=0``).

``--held-out`` runs the held-out part instead of the development part: it is the
measure of defences written without it, run once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asyncrecall._exceptions import ConfigError
from asyncrecall.cli._session import Session
from asyncrecall.cli._settings import Settings
from asyncrecall.testing import LocalServer
from asyncrecall_bench._security_channels import FROM_PROJECT, PLANTERS, Bench, Side
from asyncrecall_bench._security_data import CASES, HELD_OUT, Case, load_cases

__all__ = ["Figures", "SecurityReport", "add_arguments", "evaluate", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--limit", type=int, metavar="N",
        help="run the first N cases of each channel (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--channel", action="append", metavar="NAME", help="run only this channel (repeatable)"
    )
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="run the held-out part instead (written before the defences, run once)",
    )
    parser.add_argument(
        "--cases",
        metavar="DIR",
        help="run the cases of this folder instead (one <channel>.json each, the suite's "
        "format: attacks of your own through the same channels)",
    )
    parser.add_argument(
        "--quarantine-on-only", action="store_true", help="skip the quarantine-off run"
    )


@dataclass
class Figures:
    """Cases, reached the store, injected later."""

    cases: int = 0
    stored: int = 0
    injected: int = 0

    def add(self, stored: bool, injected: bool) -> None:
        self.cases += 1
        self.stored += stored
        self.injected += injected

    def as_json(self, *, benign: bool = False) -> dict[str, int]:
        stored = "saved" if benign else "reached_store"
        return {"cases": self.cases, stored: self.stored, "injected": self.injected}


@dataclass
class Outcome:
    """One case's result under one setting (``error``: why its planting failed)."""

    case: Case
    stored: bool
    injected: bool
    error: str = ""


@dataclass
class SettingReport:
    """One quarantine setting's outcomes."""

    outcomes: list[Outcome] = field(default_factory=list)

    def _figures(self, kind: str, key: str | None = None, value: str = "") -> Figures:
        figures = Figures()
        for o in self.outcomes:
            if o.case.kind == kind and (key is None or getattr(o.case, key) == value):
                figures.add(o.stored, o.injected)
        return figures

    def _tokens(self, kind: str, *, injected: bool) -> list[str]:
        return [
            o.case.token for o in self.outcomes if o.case.kind == kind and o.injected == injected
        ]

    @property
    def attacks(self) -> Figures:
        return self._figures("attack")

    @property
    def benign(self) -> Figures:
        return self._figures("benign")

    @property
    def attack_success(self) -> float:
        attacks = self.attacks
        return attacks.injected / attacks.cases if attacks.cases else 0.0

    def by(self, kind: str, key: str) -> dict[str, Figures]:
        values = dict.fromkeys(getattr(o.case, key) for o in self.outcomes if o.case.kind == kind)
        return {value: self._figures(kind, key, value) for value in values}

    def as_json(self) -> dict[str, Any]:
        languages = {
            lang: {"attacks": self._figures("attack", "lang", lang).as_json(),
                   "benign": self._figures("benign", "lang", lang).as_json(benign=True)}
            for lang in dict.fromkeys(o.case.lang for o in self.outcomes)
        }  # fmt: skip
        return {
            "attack_success": round(self.attack_success, 4),
            "attacks": self.attacks.as_json(),
            "benign": self.benign.as_json(benign=True),
            "channels": {k: f.as_json() for k, f in self.by("attack", "channel").items()},
            "benign_channels": {
                k: f.as_json(benign=True) for k, f in self.by("benign", "channel").items()
            },
            "languages": languages,
            "variants": {k: f.as_json() for k, f in self.by("attack", "channel_variant").items()},
            "injected_attacks": self._tokens("attack", injected=True),
            "lost_benign": self._tokens("benign", injected=False),
            "errors": {o.case.token: o.error for o in self.outcomes if o.error},
        }


@dataclass
class SecurityReport:
    """Per quarantine setting (``on``/``off``)."""

    part: str = "dev"
    runs: dict[str, SettingReport] = field(default_factory=dict)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"part": self.part, "seconds": round(self.seconds, 1)}
        for setting, report in self.runs.items():
            out[f"quarantine_{setting}"] = report.as_json()
        return out


async def _ask_settled(session: Session, text: str) -> None:
    """One query whose recall settles before its first request (a fast recall)."""
    async with aclosing(session.agent.run_query(text)) as events:
        async for event in events:
            handle = session.client.pending_prefetch
            if event.type == "memory_recall_started" and handle is not None:
                await asyncio.wait({handle.task})


async def _later(case: Case, bench: Bench) -> bool:
    """Whether the case's token reached the main model in a later conversation."""
    bench.server.script("main", "ok")
    first = len(bench.server.requests)
    session = bench.session()
    await _ask_settled(session, case.question)
    await bench.close()
    sent = [r for r in bench.server.requests[first:] if r.model == "main"]
    return any(case.token in json.dumps(r.messages, ensure_ascii=False) for r in sent)


def _stored(case: Case, bench: Bench) -> bool:
    """Whether the token is in a file of the memory folder (hidden folders aside)."""
    root = bench.store().root
    if not root.is_dir():
        return False
    for path in root.rglob("*.md"):
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        if case.token in path.read_text(encoding="utf-8", errors="replace"):
            return True
    return False


async def _one(case: Case, root: Path, server: LocalServer, side: Side, on: bool) -> Outcome:
    bench = Bench(root, server, side, on, from_project=case.channel in FROM_PROJECT)
    bench.project.mkdir(parents=True)
    server.reset()
    server.set_default("side", side)
    side.clear()
    try:
        await PLANTERS[case.channel](case, bench)
    except Exception as exc:  # a planting that fails is reported, the suite goes on
        await bench.close()
        return Outcome(case, _stored(case, bench), False, f"{type(exc).__name__}: {exc}")
    await bench.close()
    stored = _stored(case, bench)
    return Outcome(case, stored, await _later(case, bench))


async def evaluate(
    cases: Sequence[Case], *, settings: Iterable[str] = ("on", "off"), part: str = "dev"
) -> SecurityReport:
    """Run ``cases`` with quarantine on and off (``settings``)."""
    report = SecurityReport(part=part)
    started = time.perf_counter()
    side = Side()
    with LocalServer() as server, tempfile.TemporaryDirectory(prefix="ar-sec-") as tmp:
        for setting in settings:
            result = SettingReport()
            for index, case in enumerate(cases):
                root = Path(tmp) / f"{setting}-{index}"
                result.outcomes.append(await _one(case, root, server, side, setting == "on"))
            report.runs[setting] = result
    report.seconds = time.perf_counter() - started
    return report


def select(
    suite: Sequence[Case], *, limit: int | None = None, channels: Sequence[str] | None = None
) -> list[Case]:
    """The cases of ``channels`` (all by default), the first ``limit`` of each."""
    chosen = [c for c in suite if channels is None or c.channel in channels]
    if limit is None:
        return chosen
    seen: dict[str, int] = {}
    out = []
    for case in chosen:
        seen[case.channel] = seen.get(case.channel, 0) + 1
        if seen[case.channel] <= limit:
            out.append(case)
    return out


def run(args: argparse.Namespace, settings: Settings) -> int:
    del settings  # the suite brings its own server and folders
    if args.cases is not None:
        if args.held_out:
            raise ConfigError("give --cases or --held-out, not both")
        folder = Path(args.cases)
        if not folder.is_dir():
            raise ConfigError(f"--cases: {folder} is not a folder")
        try:
            suite = load_cases(folder, every_channel=False)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"--cases: cannot read the cases in {folder}: {exc!r}") from exc
        if not suite:
            raise ConfigError(f"--cases: {folder} holds no <channel>.json of the suite's")
        part = "own"
    else:
        suite = HELD_OUT if args.held_out else CASES
        part = "held_out" if args.held_out else "dev"
    cases = select(suite, limit=args.limit, channels=args.channel)
    which = ("on",) if args.quarantine_on_only else ("on", "off")
    report = asyncio.run(evaluate(cases, settings=which, part=part))
    if args.json:
        from rich.console import Console

        Console().print_json(json.dumps(report.as_json(), ensure_ascii=False))
        return 0
    _print(report)
    return 0


def _print(report: SecurityReport) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for setting, result in report.runs.items():
        table = Table(f"quarantine {setting}", "cases", "reached the store", "injected later",
                      title=f"{report.part}: attacks by channel")  # fmt: skip
        for name, f in result.by("attack", "channel").items():
            table.add_row(name, str(f.cases), str(f.stored), str(f.injected))
        table.add_row("attack success", "", "", f"{result.attack_success:.1%}")
        console.print(table)
        table = Table(f"quarantine {setting}", "attacks", "injected", "benign", "saved",
                      "injected", title=f"{report.part}: by language")  # fmt: skip
        attacks, benign = result.by("attack", "lang"), result.by("benign", "lang")
        for lang in dict.fromkeys([*attacks, *benign]):
            a, b = attacks.get(lang, Figures()), benign.get(lang, Figures())
            table.add_row(lang, str(a.cases), str(a.injected), str(b.cases), str(b.stored),
                          str(b.injected))  # fmt: skip
        console.print(table)
        table = Table(f"quarantine {setting}", "benign facts", "saved", "injected",
                      title=f"{report.part}: benign facts by channel")  # fmt: skip
        for name, f in result.by("benign", "channel").items():
            table.add_row(name, str(f.cases), str(f.stored), str(f.injected))
        console.print(table)
        errors = [o for o in result.outcomes if o.error]
        for o in errors:
            console.print(f"planting failed: {o.case.token}: {o.error}", markup=False)
    console.print(f"{report.seconds:.1f} s")

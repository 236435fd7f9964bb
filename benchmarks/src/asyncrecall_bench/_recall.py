"""``asyncrecall bench recall``: the right memory, at zero wait (issue 12), end to end.

LoCoMo questions (the dev file, read where it lies, never copied) replayed through the
real agent loop (:class:`Agent` over :class:`AgentClient`, OpenAI SDK, real HTTP) against
a :class:`LocalServer`, under each recall mode:

* every conversation's memory folder is built as ``bench quality`` builds it, and a
  question's gold files are computed the same way (:mod:`asyncrecall_bench._quality`);
* ``--questions`` questions are sampled (seeded) among those with a gold file; each is
  also asked against the *next* conversation's folder (conversation *k* against *k+1*,
  wrapping): a negative question, for which anything delivered is junk;
* each question gets a seeded plan as in ``bench latency`` (0-3 tool rounds, tool and
  first-token times: :mod:`asyncrecall_bench._workload`);
* the side query is answered by a seeded stand-in for a model selector: with
  probability ``--accuracy`` it answers right (the gold files; nothing for a negative
  question), otherwise it names as many other files of the folder (at least one); its
  latency is the plan's lognormal draw (mean 0.9 s);
* the embedded selectors run for real where a mode uses them (the instant pass of
  ``async+lexical``, as the command line wires it: with the ``local`` extra, the
  semantic instant pass over the lexical one; the model selector's lexical fallback):
  :func:`embedded_selectors`.

``--dataset paraphrase``: instead of LoCoMo, the no-shared-word set
(:mod:`asyncrecall_bench._paraphrase`): every question there (44) in its folder and,
as a negative, in its language's other folder, none with a tool round, so the first
request is the only one, and only a pass that reads meaning can bring its memory.
``--dataset paraphrase-heldout``: the same with the held-out set (Spanish, Italian,
Dutch, cross-language, Portuguese, Polish, Russian, Turkish: 128 questions; never used to
choose a threshold). Both are asked whole unless ``--questions`` is given. With either,
each mode's figures also come per folder (``by_group``).

``--busy-thread``: every mode runs beside a thread of the same process that runs Python
without waiting (a host application's busy worker at its worst), which competes for the
interpreter lock with the agents' loop.

Every mode replays the same cases with the same seeds, all modes at the same time
(``--concurrency`` questions at a time each) beside a memory-off run of the same cases,
so a shared machine's changing load hits them alike. Per mode: ``added_ms`` (time from
handing the query to the agent to its first main request, p50/p95/p99, over all cases);
``positive.gold_delivered`` (share of questions where at least one gold file reached the
model before its final answer: read from the wire, the memory blocks in the last main
request the server received, which carries the whole history);
``positive.junk_delivered`` (share that received files, none of them gold);
``positive.gold_first_request`` (a gold file in the first main request);
``negative.junk_delivered`` (share of negative questions that received any file).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from openai import AsyncOpenAI
from rich.console import Console

from asyncrecall._exceptions import ConfigError
from asyncrecall.agent import Agent, AgentClient, ClientOptions
from asyncrecall.cli._session import BLOCKING_SELECTOR_TIMEOUT
from asyncrecall.cli._settings import Settings
from asyncrecall.cli.demo._quiet import quiet_known_noise
from asyncrecall.memory import (
    FolderStore,
    LexicalSelector,
    ModelSelector,
    Recaller,
    SemanticInstantSelector,
    semantic_pass_available,
)
from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer, RecordedRequest, Reply
from asyncrecall_bench._corpus import Query
from asyncrecall_bench._latency_data import MODES
from asyncrecall_bench._locomo import _load, build_memory_folder, gold_files
from asyncrecall_bench._measure import QueryTrace, busy_thread, trace_query
from asyncrecall_bench._paraphrase import HELDOUT, HELDOUT_LANGUAGES, build_folders
from asyncrecall_bench._plot import add_plot_flag, plot_target, recall_figure, write_figure
from asyncrecall_bench._quality import default_dataset
from asyncrecall_bench._recall_data import (
    DEFAULT_ACCURACY,
    DEFAULT_CONCURRENCY,
    DEFAULT_QUESTIONS,
    DEFAULT_SEED,
    REFERENCE,
    Case,
    ModeFigures,
    RecallBenchConfig,
    RecallBenchReport,
)
from asyncrecall_bench._workload import (
    LatencyProfile,
    MainReply,
    ScriptedTools,
    draw_plan,
    main_model_name,
    side_model_name,
)

__all__ = [
    "MODES",
    "add_arguments",
    "delivered_paths",
    "embedded_selectors",
    "measure",
    "run",
]

_QUICK_QUESTIONS: Final = 4
#: The no-shared-word sets are asked whole unless ``--questions`` says otherwise (a
#: sample takes the smaller of the two counts).
_EVERY_QUESTION: Final = sys.maxsize
_LIMIT: Final = 5
_STAGGER_S: Final = 0.02
#: ``--quick``: every latency of the workload divided by this (a smoke run).
_QUICK_SPEEDUP: Final = 4.0
_HEADING: Final = re.compile(r"^### .* \(([^()\n]+\.md)\)$", re.MULTILINE)


#: ``--dataset`` for the no-shared-word set.
PARAPHRASE: Final = "paraphrase"
#: ``--dataset`` for the held-out no-shared-word set.
PARAPHRASE_HELDOUT: Final = "paraphrase-heldout"


def embedded_selectors(
    *, semantic: bool = False
) -> tuple[LexicalSelector, LexicalSelector | SemanticInstantSelector]:
    """The embedded selectors the modes run for real, as a long-lived ``chat`` session
    wires them: the model selector's lexical fallback, and the instant pass of
    ``async+lexical`` (with ``semantic``, the ``semantic_instant`` setting, the semantic
    one over that lexical selector when the ``local`` extra is installed). One pair per
    memory folder (their caches stay warm).
    """
    lexical = LexicalSelector()
    if semantic and semantic_pass_available():
        return lexical, SemanticInstantSelector(lexical)
    return lexical, lexical


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench recall``. It always runs against its own local server."""
    parser.add_argument(
        "--dataset",
        type=Path,
        metavar="FILE",
        help="LoCoMo-format JSON (default: ../shared/data/locomo/locomo-dev.json), or "
        f"'{PARAPHRASE}': our questions that share no word with their memory, no tool round "
        f"('{PARAPHRASE_HELDOUT}': the held-out set of those, never used for tuning)",
    )
    parser.add_argument(
        "--questions",
        type=int,
        metavar="N",
        help=f"questions sampled (each also asked as a negative; default {DEFAULT_QUESTIONS}, "
        "and every question of the no-shared-word sets)",
    )
    parser.add_argument(
        "--accuracy",
        type=float,
        default=DEFAULT_ACCURACY,
        help=f"share of side queries the stand-in model answers right "
        f"(default {DEFAULT_ACCURACY:g})",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of every draw")
    parser.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help=f"questions run at once per mode, the modes side by side "
        f"(default {DEFAULT_CONCURRENCY})",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{_QUICK_QUESTIONS} questions, latencies /{_QUICK_SPEEDUP:g}, all at once: "
        "a smoke run (CI)",
    )
    parser.add_argument(
        "--semantic-instant",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="async+lexical's instant pass reads meaning too, with the local extra "
        "(default: the semantic_instant setting, on)",
    )
    parser.add_argument(
        "--busy-thread",
        action="store_true",
        help="run every mode beside a thread of this process that runs Python without "
        "waiting (a host application's busy worker)",
    )
    parser.add_argument(
        "--cases",
        action="store_true",
        help="with --json: every question's outcome in each mode (the files on its first "
        "request and the ones that reached the model)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_plot_flag(parser)


def config_from_args(
    args: argparse.Namespace, settings: Settings | None = None
) -> RecallBenchConfig:
    """The run's configuration (``--semantic-instant`` unsaid: ``settings``' own, else
    the setting's default); bad values are a :class:`ConfigError` (exit 2)."""
    paraphrase = args.dataset is not None and str(args.dataset) in (PARAPHRASE, PARAPHRASE_HELDOUT)
    dataset: Path | None = args.dataset if paraphrase else args.dataset or default_dataset()
    if dataset is None:
        raise ConfigError(
            "no dataset found at ../shared/data/locomo/locomo-dev.json: pass --dataset FILE"
        )
    if not paraphrase and not dataset.is_file():
        raise ConfigError(f"dataset {dataset} does not exist")
    if args.cases and not args.json:
        raise ConfigError("--cases adds to the JSON report: pass --json too")
    questions: int = args.questions
    if questions is None:
        every = _EVERY_QUESTION if paraphrase else DEFAULT_QUESTIONS
        questions = _QUICK_QUESTIONS if args.quick else every
    concurrency: int = args.concurrency
    if concurrency is None:
        concurrency = 2 * questions if args.quick else DEFAULT_CONCURRENCY
    if questions < 1:
        raise ConfigError(f"--questions must be 1 or more, got {questions}")
    if concurrency < 1:
        raise ConfigError(f"--concurrency must be 1 or more, got {concurrency}")
    if not 0.0 <= args.accuracy <= 1.0:
        raise ConfigError(f"--accuracy must be between 0 and 1, got {args.accuracy}")
    profile = LatencyProfile()
    if args.quick:
        profile = _faster(profile, _QUICK_SPEEDUP)
    return RecallBenchConfig(
        dataset=dataset,
        questions=questions,
        seed=args.seed,
        accuracy=args.accuracy,
        concurrency=concurrency,
        profile=profile,
        quick=args.quick,
        paraphrase=paraphrase,
        heldout=paraphrase and str(args.dataset) == PARAPHRASE_HELDOUT,
        semantic_instant=(
            args.semantic_instant
            if args.semantic_instant is not None
            else (settings or Settings()).semantic_instant
        ),
        per_case=args.cases,
        busy_thread=args.busy_thread,
    )


def _faster(profile: LatencyProfile, factor: float) -> LatencyProfile:
    return replace(
        profile,
        side_mean=profile.side_mean / factor,
        first_token_min=profile.first_token_min / factor,
        first_token_max=profile.first_token_max / factor,
        tool_min=profile.tool_min / factor,
        tool_max=profile.tool_max / factor,
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the benchmark and print the table (or ``--json``); progress goes to stderr."""
    # The benchmark brings its own server, models and memory folders: of the settings,
    # only whether the instant pass reads meaning.
    config = config_from_args(args, settings)
    plot = plot_target(args.plot)
    err = Console(stderr=True)
    with quiet_known_noise():
        report = asyncio.run(measure(config, log=lambda text: err.print(text, highlight=False)))
    if plot is not None:
        write_figure(plot, recall_figure(report))
        err.print(f"figure written to {plot}", highlight=False)
    if args.json:
        Console(soft_wrap=True).print_json(json.dumps(report.as_json()))
    else:
        from asyncrecall_bench._recall_report import render_report

        out = Console()
        render_report(report, out if out.is_terminal else Console(width=140))
    return 0


# -- the cases ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Folders:
    """The memory folders, one per conversation, with their files, and for each the
    folder its negative questions are asked of (by default the next one)."""

    roots: Sequence[Path]
    paths: Sequence[tuple[str, ...]]
    partners: Sequence[int] = ()
    #: Each folder's name in the report's ``by_group`` (none: no breakdown).
    groups: Sequence[str] = ()

    def partner(self, folder: int) -> int:
        return self.partners[folder] if self.partners else (folder + 1) % len(self.roots)


def _build(conversations: Sequence[Mapping[str, Any]], root: Path) -> tuple[_Folders, list[Any]]:
    """Write every conversation's folder; returns them and the (folder, question, gold)
    of every question with a gold file."""
    roots, paths, questions = [], [], []
    for index, conversation in enumerate(conversations):
        folder = root / f"memory-{index:02d}"
        gold_by_id = build_memory_folder(conversation, folder)
        roots.append(folder)
        paths.append(tuple(sorted(doc.rel_path for doc in FolderStore(folder).scan(limit=None))))
        for qa in conversation.get("qa") or []:
            gold = gold_files(qa, gold_by_id)
            if gold:
                questions.append((index, str(qa.get("question", "")), frozenset(gold)))
    return _Folders(roots, paths), questions


def _build_paraphrase(root: Path, *, heldout: bool = False) -> tuple[_Folders, list[Any]]:
    """The no-shared-word set's folders under ``root`` and its questions (``heldout``:
    the held-out set's)."""
    cases = build_folders(root, HELDOUT_LANGUAGES, HELDOUT) if heldout else build_folders(root)
    stores: list[FolderStore] = []
    for case in cases:
        for store in (case.store, case.other):
            if all(store.root != known.root for known in stores):
                stores.append(store)
    index = {store.root: n for n, store in enumerate(stores)}
    partners = [0] * len(stores)
    groups = [""] * len(stores)
    questions = []
    for case in cases:
        partners[index[case.store.root]] = index[case.other.root]
        groups[index[case.store.root]] = case.group
        questions.append((index[case.store.root], case.question, case.gold))
    paths = [
        tuple(sorted(doc.rel_path for doc in FolderStore(s.root).scan(limit=None))) for s in stores
    ]
    return _Folders([s.root for s in stores], paths, partners, groups), questions


def draw_cases(
    questions: Sequence[tuple[int, str, frozenset[str]]],
    paths: Sequence[tuple[str, ...]],
    config: RecallBenchConfig,
    partner: Callable[[int], int] | None = None,
) -> list[Case]:
    """Sample the questions and draw every case's plan and stand-in answer (seeded).

    Each sampled question makes a positive case (its own folder) and a negative one
    (``partner``'s folder: by default the next conversation's). With
    ``config.paraphrase`` no plan has a tool round.
    """
    rng = random.Random(config.seed)
    picked = sorted(rng.sample(range(len(questions)), min(config.questions, len(questions))))
    cases = []
    for n, index in enumerate(picked):
        folder, text, gold = questions[index]
        query = Query(text, ())
        for negative in (False, True):
            other = partner(folder) if partner is not None else (folder + 1) % len(paths)
            asked = other if negative else folder
            wanted = frozenset() if negative else gold
            plan = draw_plan(rng, config.profile, f"{'n' if negative else 'p'}{n:03d}", query)
            if config.paraphrase:
                plan = replace(plan, first_token=plan.first_token[:1], tool_delay=())
            right = rng.random() < config.accuracy
            answer = sorted(wanted)[:_LIMIT] if right else _wrong(rng, paths[asked], wanted)
            cases.append(Case(plan, asked, wanted, negative, tuple(answer)))
    return cases


def _wrong(rng: random.Random, paths: Sequence[str], gold: frozenset[str]) -> list[str]:
    """A wrong answer: as many non-gold files as there are gold ones (1 to the limit)."""
    others = [p for p in paths if p not in gold]
    return sorted(rng.sample(others, min(len(others), max(1, min(len(gold), _LIMIT)))))


@dataclass(frozen=True, slots=True)
class _SelectorReply:
    """The stand-in model selector: the case's answer, after the plan's side latency."""

    answer: tuple[str, ...]
    delay: float

    def __call__(self, request: RecordedRequest) -> Reply:
        offered = "\n".join(str(m.get("content", "")) for m in request.messages)
        chosen = [path for path in self.answer if path in offered]  # only offered paths
        return Reply(json={"selected_memories": chosen}, first_token_delay=self.delay)


def delivered_paths(request: RecordedRequest, known: frozenset[str]) -> set[str]:
    """The memory files whose blocks a main request carried (user messages, on the wire)."""
    found: set[str] = set()
    for message in request.messages:
        if message.get("role") != "user":
            continue
        found.update(p for p in _HEADING.findall(_text(message.get("content"))) if p in known)
    return found


def _text(content: object) -> str:
    """A message's text: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


# -- running ---------------------------------------------------------------------------------


async def measure(
    config: RecallBenchConfig, *, log: Callable[[str], None] = lambda _: None
) -> RecallBenchReport:
    """Build the folders, draw the cases, run every mode; returns the report."""
    started = time.monotonic()
    conversations = [] if config.paraphrase else _load(config.dataset)
    if not config.paraphrase and len(conversations) < 2:
        raise ConfigError(f"dataset {config.dataset} needs two conversations or more")
    with tempfile.TemporaryDirectory(prefix="asyncrecall-recall-") as tmp, LocalServer() as server:
        root = Path(tmp)
        if config.paraphrase:
            log("building the no-shared-word set's memory folders ...")
            folders, questions = _build_paraphrase(root / "paraphrase", heldout=config.heldout)
        else:
            log(f"building {len(conversations)} memory folders ...")
            folders, questions = _build(conversations, root)
        if not questions:
            raise ConfigError(f"dataset {config.dataset} has no question with a gold file")
        cases = draw_cases(questions, folders.paths, config, folders.partner)
        (root / "project").mkdir()
        for mode in (*MODES, REFERENCE):
            for case in cases:
                server.set_default(
                    side_model_name(mode, case.plan),
                    _SelectorReply(case.answer, case.plan.side_delay),
                )
                server.set_default(main_model_name(mode, case.plan), MainReply(case.plan))
        runners = {
            mode: await _ModeRun.open(
                server, mode, folders, root / "project", semantic=config.semantic_instant
            )
            for mode in (*MODES, REFERENCE)
        }
        # The folders, stores and warmed selectors of every mode are the harness's, not
        # an agent's heap (``chat`` freezes what it built at start-up too): keep the
        # garbage collector's full passes over them out of the measurements.
        gc.collect()
        # Side by side: a shared machine's load changes over a run, and hits every mode
        # alike only if they run at the same time.
        log(
            f"{len(cases)} cases per mode, {config.concurrency} at a time per mode, the "
            f"{len(runners)} runs (memory off included) side by side ..."
        )
        gc.freeze()
        try:
            with busy_thread() if config.busy_thread else contextlib.nullcontext() as busy:
                async with asyncio.TaskGroup() as group:
                    tasks = {
                        mode: group.create_task(
                            runner.run(cases, config.concurrency, n / len(runners))
                        )
                        for n, (mode, runner) in enumerate(runners.items())
                    }
        finally:
            gc.unfreeze()
        traces = {mode: task.result() for mode, task in tasks.items()}
        figures: dict[str, ModeFigures] = {
            mode: _figures(mode, cases, traces[mode], server.requests, folders) for mode in MODES
        }
    reference = [trace.first_request_ms for trace in traces[REFERENCE]]
    semantic = config.semantic_instant and semantic_pass_available()
    return RecallBenchReport(
        config,
        cases,
        figures,
        time.monotonic() - started,
        reference,
        folders.groups,
        busy,
        instant_pass="semantic" if semantic else "lexical",
    )


@dataclass
class _ModeRun:
    server: LocalServer
    mode: str  # a RecallMode, or REFERENCE
    folders: _Folders
    project: Path
    stores: Sequence[FolderStore] = ()
    embedded: Sequence[tuple[LexicalSelector, LexicalSelector | SemanticInstantSelector]] = ()

    @classmethod
    async def open(
        cls, server: LocalServer, mode: str, folders: _Folders, project: Path, *, semantic: bool
    ) -> _ModeRun:
        """One store and one pair of embedded selectors per folder, all warmed (as in a
        session past its start-up), before any mode runs."""
        stores = [FolderStore(root) for root in folders.roots]
        embedded = [embedded_selectors(semantic=semantic) for _ in stores]
        for store, (lexical, instant) in zip(stores, embedded, strict=True):
            docs = store.scan()
            await asyncio.to_thread(lexical.prepare, docs)
            await asyncio.to_thread(instant.prepare, docs)
            if isinstance(instant, SemanticInstantSelector):  # its vectors, before timing
                await asyncio.to_thread(instant.prepare_vectors, docs)
        return cls(server, mode, folders, project, stores, embedded)

    async def run(
        self, cases: Sequence[Case], concurrency: int, offset: float = 0.0
    ) -> list[QueryTrace]:
        """Every case in a fresh session, ``concurrency`` at a time (the first ones
        starting 20 ms apart, shifted by ``offset`` of that gap)."""
        base_url = self.server.base_url
        http = AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0)
        stores, embedded = self.stores, self.embedded
        tools = ScriptedTools(self.project)
        slots = asyncio.Semaphore(concurrency)
        traces: list[QueryTrace | None] = [None] * len(cases)

        async def one(index: int, case: Case) -> None:
            async with slots:
                if index < concurrency:
                    await asyncio.sleep((index + offset) * _STAGGER_S)
                main = OpenAIModel(
                    model=main_model_name(self.mode, case.plan), base_url=base_url, client=http,
                    max_retries=0,
                )  # fmt: skip
                side = OpenAIModel(
                    model=side_model_name(self.mode, case.plan), base_url=base_url, client=http,
                    max_retries=0,
                )  # fmt: skip
                client = build_client(
                    self.mode, main, side, stores[case.folder], embedded[case.folder], tools
                )
                try:
                    agent = Agent(client, tools, max_turns=10)
                    traces[index] = await trace_query(agent, case.plan.text)
                finally:
                    await client.aclose()

        try:
            async with asyncio.TaskGroup() as group:
                for index, case in enumerate(cases):
                    group.create_task(one(index, case))
        finally:
            await http.close()
        return [trace for trace in traces if trace is not None]


def build_client(
    mode: str,
    main: OpenAIModel,
    side: OpenAIModel,
    store: FolderStore,
    embedded: tuple[LexicalSelector, LexicalSelector | SemanticInstantSelector],
    tools: ScriptedTools,
) -> AgentClient:
    """A client as ``--recall-mode MODE --selector model`` wires it, with ``embedded``'s
    lexical selector as the fallback and its other as the instant pass
    (:data:`REFERENCE`: memory off)."""
    lexical, instant = embedded
    if mode not in MODES:
        return AgentClient(model=main, tools=tools.specs)
    if mode == "blocking":  # the old design: a 1 s selector timeout and no fallback
        selector = ModelSelector(side, timeout=BLOCKING_SELECTOR_TIMEOUT, fallback=None)
    else:
        selector = ModelSelector(side, fallback=lexical)
    return AgentClient(
        model=main,
        memory=Recaller(store, selector),
        tools=tools.specs,
        options=ClientOptions(recall_mode=mode),
        instant_selector=instant if mode == "async+lexical" else None,
    )


def _figures(
    mode: str,
    cases: Sequence[Case],
    traces: Sequence[QueryTrace],
    records: Sequence[RecordedRequest],
    folders: _Folders,
) -> ModeFigures:
    """Read what reached the model from the server's records of this mode's requests."""
    last: dict[str, RecordedRequest] = {}
    first: dict[str, RecordedRequest] = {}
    for record in records:
        if record.model.startswith(f"bench-main/{mode}/"):
            seen = last.get(record.model)
            if seen is None or record.index > seen.index:
                last[record.model] = record
            seen = first.get(record.model)
            if seen is None or record.index < seen.index:
                first[record.model] = record
    positive: list[tuple[bool, bool]] = []
    negative: list[bool] = []
    on_first: list[bool] = []
    delivered: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    for case in cases:
        final = last.get(main_model_name(mode, case.plan))
        known = frozenset(folders.paths[case.folder])
        got = delivered_paths(final, known) if final is not None else set()
        opening = first.get(main_model_name(mode, case.plan))
        early = delivered_paths(opening, known) if opening is not None else set()
        delivered.append((tuple(sorted(early)), tuple(sorted(got))))
        if case.negative:
            negative.append(bool(got))
        else:
            gold = bool(got & case.gold)
            positive.append((gold, bool(got) and not gold))
            on_first.append(bool(early & case.gold))
    return ModeFigures(
        mode,
        added_ms=[trace.first_request_ms for trace in traces],
        positive=positive,
        negative=negative,
        errors=sum(trace.finish_reason != "stop" for trace in traces) + len(cases) - len(traces),
        first=on_first,
        delivered=delivered,
    )

"""``asyncrecall bench quality --dataset multilingual``: recall in five other languages.

Our own test set (issue 24, point 2), written for the purpose and kept in
``bench/multilingual/<language>.jsonl``: for each of Chinese, Japanese, French, German
and Russian, two memory folders of 20 notes each (a coding agent's project memory and
a personal assistant's), and 20 questions per folder, each with the one note that
answers it (40 cases per language). The notes of a folder share a subject, so every
question has close distractors; the questions paraphrase rather than copy the note.

One JSON record per line: a note is ``{"folder", "id", "name", "description", "type",
"body"}``, a question ``{"folder", "question", "gold": [ids]}``. Each folder is saved
through :meth:`MemoryStore.save_memory` into a temporary directory and each question
goes through :meth:`MemoryManager.recall` (the agent's recall path, limit 5), as in
``bench quality`` on LoCoMo. With ``--negatives``, each question is also asked against
the language's other folder, where nothing answers it (``false_injection_rate``).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asyncrecall._exceptions import ConfigError
from asyncrecall.memory import MemoryManager, MemoryStore, Selector

__all__ = ["LANGUAGES", "Case", "LanguageReport", "evaluate_multilingual", "load_language"]

#: The languages of the set, in the order they are reported.
LANGUAGES = ("zh", "ja", "fr", "de", "ru")
_K = 5
_DATA = Path(__file__).with_name("multilingual")


@dataclass(frozen=True, slots=True)
class Case:
    """One question of a folder, and the ids of the notes that answer it."""

    folder: str
    question: str
    gold: frozenset[str]


@dataclass(frozen=True, slots=True)
class LanguageReport:
    """One language's figures (``false_injection_rate`` and ``precision_at_5`` only
    with negatives)."""

    language: str
    questions: int
    hit_at_5: float
    recall_at_5: float
    median_selection_ms: float
    false_injection_rate: float | None = None
    precision_at_5: float | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "questions": self.questions,
            "hit_at_5": round(self.hit_at_5, 4),
            "recall_at_5": round(self.recall_at_5, 4),
            "median_selection_ms": round(self.median_selection_ms, 3),
        }
        if self.false_injection_rate is not None and self.precision_at_5 is not None:
            out["false_injection_rate"] = round(self.false_injection_rate, 4)
            out["precision_at_5"] = round(self.precision_at_5, 4)
        return out


def load_language(
    language: str, data: Path = _DATA
) -> tuple[dict[str, list[Mapping[str, str]]], list[Case]]:
    """A language's notes by folder and its cases; :class:`ConfigError` when the file
    is missing or a record is malformed (a question whose gold note is not in its
    folder included)."""
    path = data / f"{language}.jsonl"
    notes: dict[str, list[Mapping[str, str]]] = {}
    cases: list[Case] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the multilingual set {path}: {exc}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            folder = str(record["folder"])
            if "question" in record:
                gold = frozenset(str(g) for g in record["gold"])
                cases.append(Case(folder, str(record["question"]), gold))
            else:
                fields = ("id", "name", "description", "type", "body")
                notes.setdefault(folder, []).append({k: str(record[k]) for k in fields})
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{number}: not a note or a question: {exc}") from exc
    for case in cases:
        ids = {note["id"] for note in notes.get(case.folder, [])}
        if not case.gold or not case.gold <= ids:
            raise ConfigError(f"{path}: gold {sorted(case.gold)} not in folder {case.folder!r}")
    return notes, cases


async def evaluate_multilingual(
    make_selector: Callable[[], Selector],
    *,
    languages: Sequence[str] = LANGUAGES,
    negatives: bool = False,
    progress: bool = True,
    data: Path = _DATA,
) -> list[LanguageReport]:
    """Recall every case of each language; one report per language."""
    reports = []
    selector = make_selector()
    with tempfile.TemporaryDirectory(prefix="asyncrecall-multilingual-") as tmp:
        for language in languages:
            notes, cases = load_language(language, data)
            managers: dict[str, MemoryManager] = {}
            paths: dict[str, dict[str, str]] = {}
            for folder, folder_notes in notes.items():
                root = Path(tmp) / language / folder
                store = MemoryStore(root)
                paths[folder] = {
                    note["id"]: store.save_memory(
                        note["name"], note["description"], note["type"], note["body"]
                    ).rel_path
                    for note in folder_notes
                }
                managers[folder] = MemoryManager(MemoryStore(root), selector)
            others = {f: [o for o in managers if o != f] for f in managers}
            hits: list[float] = []
            recalls: list[float] = []
            times_ms: list[float] = []
            selected = selected_gold = injected = asked = 0
            for case in cases:
                gold = {paths[case.folder][g] for g in case.gold}
                started = time.perf_counter()
                result = await managers[case.folder].recall(case.question, limit=_K)
                times_ms.append((time.perf_counter() - started) * 1000)
                chosen = set(result.paths)
                hits.append(1.0 if chosen & gold else 0.0)
                recalls.append(len(chosen & gold) / len(gold))
                selected += len(chosen)
                selected_gold += len(chosen & gold)
                if negatives:
                    for other in others[case.folder]:
                        asked += 1
                        if (await managers[other].recall(case.question, limit=_K)).paths:
                            injected += 1
            count = len(hits)
            reports.append(
                LanguageReport(
                    language=language,
                    questions=count,
                    hit_at_5=sum(hits) / count if count else 0.0,
                    recall_at_5=sum(recalls) / count if count else 0.0,
                    median_selection_ms=statistics.median(times_ms) if times_ms else 0.0,
                    false_injection_rate=(injected / asked if asked else 0.0)
                    if negatives
                    else None,
                    precision_at_5=(selected_gold / selected if selected else 0.0)
                    if negatives
                    else None,
                )
            )
            if progress:
                sys.stderr.write(f"quality: {language}: {count} questions\n")
                sys.stderr.flush()
    return reports

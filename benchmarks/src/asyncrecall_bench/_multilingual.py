"""``asyncrecall bench quality --dataset multilingual``: recall in five other languages.

Our own test set, written for the purpose and kept in
``asyncrecall_bench/multilingual/<language>.jsonl``: for each of Chinese, Japanese,
French, German and Russian, two memory folders of 20 notes each (a coding agent's project memory and
a personal assistant's), and 20 questions per folder, each with the one note that
answers it (40 cases per language). The notes of a folder share a subject, so every
question has close distractors; the questions paraphrase rather than copy the note.

One JSON record per line: a note is ``{"folder", "id", "name", "description", "type",
"body"}``, a question ``{"folder", "question", "gold": [ids]}``. Each folder is saved
through :meth:`FolderStore.save_memory` into a temporary directory and each question
goes through :meth:`Recaller.recall` (the agent's recall path, limit 5), as in
``bench quality`` on LoCoMo. With ``--negatives``, each question is also asked against
the language's other folder, where nothing answers it (``false_injection_rate``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from asyncrecall._exceptions import ConfigError
from asyncrecall.memory import FolderStore, Recaller, Selector
from asyncrecall_bench._scoring import QualityReport, Tally

__all__ = ["LANGUAGES", "Case", "LanguageReport", "evaluate_multilingual", "load_language"]

#: The languages of the set, in the order they are reported.
LANGUAGES = ("zh", "ja", "fr", "de", "ru")
_DATA = Path(__file__).with_name("multilingual")


@dataclass(frozen=True, slots=True)
class Case:
    """One question of a folder, and the ids of the notes that answer it."""

    folder: str
    question: str
    gold: frozenset[str]


@dataclass(frozen=True, slots=True)
class LanguageReport(QualityReport):
    """One language's figures (``false_injection_rate`` and ``precision_at_5`` only
    with negatives)."""

    language: str = ""


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
            managers: dict[str, Recaller] = {}
            paths: dict[str, dict[str, str]] = {}
            for folder, folder_notes in notes.items():
                root = Path(tmp) / language / folder
                store = FolderStore(root)
                paths[folder] = {
                    note["id"]: store.save_memory(
                        note["name"], note["description"], note["type"], note["body"], origin="user"
                    ).rel_path
                    for note in folder_notes
                }
                managers[folder] = Recaller(FolderStore(root), selector)
            tally = Tally()
            for case in cases:
                gold = {paths[case.folder][g] for g in case.gold}
                negative = [m for f, m in managers.items() if f != case.folder and negatives]
                await tally.ask(managers[case.folder], case.question, gold, negative)
            figures = tally.figures(negatives=negatives)
            reports.append(LanguageReport(language=language, **figures, selector=selector.name))
            if progress:
                sys.stderr.write(f"quality: {language}: {len(tally.hits)} questions\n")
                sys.stderr.flush()
    return reports

"""The no-shared-word set: questions that share no word with the memory that answers them.

Our own set, written for the purpose in ``asyncrecall_bench/paraphrase/<language>.jsonl``
(the format of :mod:`asyncrecall_bench._multilingual`): English, French and German, two
memory folders per language (a coding project's memory and a household's), each
question a paraphrase of one note in other words. No question shares a term with its
note as the lexical selector reads them (stemmed, stop words left out; checked when the
set is loaded, so an edit cannot slip a shared word in): the lexical pass cannot see the
answer, and a question asked with no tool round gets memory on its first request only
from the meaning of its words. Each question is also asked of the language's other
folder, where nothing answers it (a negative).

It serves ``asyncrecall bench recall --dataset paraphrase`` (every question with no
tool round) and ``benchmarks/instant_gate.py`` (the folds that choose the semantic
instant pass's thresholds: the work folders against the household ones).

The held-out set, ``asyncrecall_bench/paraphrase_heldout/<language>.jsonl`` (the same
format and the same check), is written by someone who had not seen those thresholds and
is never used to choose them: Spanish, Italian and Dutch (languages the set above does
not have), and ``cross`` (English questions about French and German notes, French,
German and Spanish ones about English notes); then, written the same way by another
hand, Portuguese, Polish, Russian and Turkish (a workplace's memory and a household's
each). It serves ``asyncrecall bench recall --dataset paraphrase-heldout``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from asyncrecall._exceptions import ConfigError
from asyncrecall.memory import FolderStore
from asyncrecall.memory.selectors._tokens import analyse, analyse_query
from asyncrecall_bench._multilingual import load_language

__all__ = ["FOLDS", "HELDOUT", "HELDOUT_LANGUAGES", "LANGUAGES", "ParaphraseCase", "build_folders"]

#: The languages of the set, in the order they are reported.
LANGUAGES: Final = ("en", "fr", "de")
#: The folds of ``benchmarks/instant_gate.py``: the work folders, the household folders.
FOLDS: Final = (
    frozenset({"en/shop", "fr/boutique", "de/shop"}),
    frozenset({"en/home", "fr/maison", "de/haus"}),
)
_DATA: Final = Path(__file__).with_name("paraphrase")
#: The held-out set's files (``cross``: questions in another language than their notes).
HELDOUT_LANGUAGES: Final = ("es", "it", "nl", "cross", "pt", "pl", "ru", "tr")
#: Where the held-out set lies (never read to choose a threshold).
HELDOUT: Final = Path(__file__).with_name("paraphrase_heldout")


@dataclass(frozen=True, slots=True)
class ParaphraseCase:
    """One question, its folder, the language's other folder and the gold paths."""

    group: str
    question: str
    store: FolderStore
    other: FolderStore
    gold: frozenset[str]


def build_folders(
    root: Path, languages: Sequence[str] = LANGUAGES, data: Path | None = None
) -> list[ParaphraseCase]:
    """Save every language's folders under ``root``; one case per question. ``data``:
    where the ``<language>.jsonl`` files lie (by default this set's, :data:`HELDOUT` for
    the held-out one).

    A :class:`ConfigError` when a question shares a term with its gold note, or a
    language does not have exactly two folders.
    """
    cases: list[ParaphraseCase] = []
    for language in languages:
        notes, questions = load_language(language, _DATA if data is None else data)
        if len(notes) != 2:
            raise ConfigError(f"paraphrase set {language}: two folders expected, {len(notes)}")
        paths: dict[str, dict[str, str]] = {}
        stores: dict[str, FolderStore] = {}
        for folder, folder_notes in notes.items():
            store = FolderStore(root / language / folder)
            paths[folder] = {
                note["id"]: store.save_memory(
                    note["name"], note["description"], note["type"], note["body"], origin="user"
                ).rel_path
                for note in folder_notes
            }
            stores[folder] = FolderStore(root / language / folder)
        by_id = {(f, n["id"]): n for f, ns in notes.items() for n in ns}
        for case in questions:
            for gold in case.gold:
                _no_shared_word(case.question, by_id[(case.folder, gold)], language)
            (other,) = (f for f in stores if f != case.folder)
            cases.append(
                ParaphraseCase(
                    group=f"{language}/{case.folder}",
                    question=case.question,
                    store=stores[case.folder],
                    other=stores[other],
                    gold=frozenset(paths[case.folder][g] for g in case.gold),
                )
            )
    return cases


def _no_shared_word(question: str, note: Mapping[str, str], language: str) -> None:
    text = "\n".join(note[k] for k in ("name", "description", "type", "body"))
    tokens, read_as = analyse(text)
    terms = analyse_query(question, (read_as,))
    shared = [g for g in terms.groups if any(term in tokens for term in g)]
    if shared:
        raise ConfigError(
            f"paraphrase set {language}: {question!r} shares {shared[0][0]!r} with its note"
        )

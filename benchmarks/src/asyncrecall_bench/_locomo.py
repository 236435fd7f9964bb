"""LoCoMo-format data for the benchmarks: read the file, build one conversation's memory
folder, find a question's gold files (see ``bench quality``'s module for the layout)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from asyncrecall._exceptions import ConfigError
from asyncrecall.memory import FolderStore

__all__ = ["build_memory_folder", "gold_files"]

_DESCRIPTION_LIMIT = 150


def _load(dataset: Path) -> list[Mapping[str, Any]]:
    try:
        data = json.loads(dataset.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read dataset {dataset}: {exc}") from exc
    if not isinstance(data, list) or not all(isinstance(c, dict) for c in data):
        raise ConfigError(f"dataset {dataset} is not a LoCoMo-format list of conversations")
    return data


def _sessions(conversation: Mapping[str, Any]) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
    """``(n, date, {speaker: [[fact, dialog_id(s)], ...]})`` per session, in order."""
    observations: Mapping[str, Any] = conversation.get("observation") or {}
    dates: Mapping[str, Any] = conversation.get("conversation") or {}
    numbered = []
    for key, value in observations.items():
        number = key.removeprefix("session_").removesuffix("_observation")
        if number.isdigit() and isinstance(value, dict):
            numbered.append((int(number), value))
    for n, value in sorted(numbered, key=lambda item: item[0]):
        yield n, str(dates.get(f"session_{n}_date_time", "")), value


def build_memory_folder(conversation: Mapping[str, Any], folder: Path) -> dict[str, set[str]]:
    """Write one conversation's topic files into ``folder``; returns dialog id -> rel paths."""
    store = FolderStore(folder)
    gold: dict[str, set[str]] = {}
    for n, date, speakers in _sessions(conversation):
        for speaker, observations in speakers.items():
            facts = [(str(item[0]), item[1]) for item in observations if item]
            if not facts:
                continue
            description = f"{speaker} in session {n} ({date}): {facts[0][0]}"
            doc = store.save_memory(
                f"{speaker}, session {n}",
                description[:_DESCRIPTION_LIMIT],
                "user",
                "\n".join(fact for fact, _ in facts),
                origin="user",
            )
            for _, ids in facts:
                for dialog_id in ids if isinstance(ids, list) else [ids]:
                    gold.setdefault(str(dialog_id), set()).add(doc.rel_path)
    return gold


def gold_files(qa: Mapping[str, Any], gold_by_id: Mapping[str, set[str]]) -> set[str]:
    """The files holding a question's evidence; empty for adversarial questions
    (category 5) and for questions none of whose evidence is in a file: both are
    skipped."""
    if qa.get("category") == 5:
        return set()
    gold: set[str] = set()
    for dialog_id in qa.get("evidence") or []:
        gold |= gold_by_id.get(str(dialog_id), set())
    return gold

"""Reading the memory folder at process entry, while the rest of the program imports.

A new ``asyncrecall run`` or ``chat`` spends most of its first second importing (the
OpenAI SDK alone: about half a second). :func:`start_reading_memory` runs first in
:func:`asyncrecall.cli.main`: it picks the memory folder out of the command line (the
few flags that name it), the environment and the settings files, and starts a daemon
thread that scans the folder (from its persisted index: nothing is parsed when it is
unchanged) and prepares the lexical term counts (from theirs). The session built later
adopts that store and that selector (:func:`adopt`), so the first user query's instant
lexical pass finds them ready and rides on the first request.

With memory off (``--no-memory``, ``ASYNCRECALL_MEMORY=0``, ``memory = false``), a
database store, or any other command, nothing starts: the cost is reading the command
line and the settings (which the command reads again anyway), well under a
millisecond. Anything unexpected (a bad flag, a bad settings file) also starts nothing
and is left to the command to report.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from asyncrecall.memory import LexicalSelector, MemoryStore

__all__ = ["FolderWarmup", "adopt", "start_reading_memory"]

#: Commands whose first query recalls.
_RECALLING: Final = frozenset({"run", "chat"})
#: The flags that decide which folder applies, and whether memory is on.
_VALUED: Final = {"--memory-dir": "memory_dir", "--project": "project"}


@dataclass(frozen=True)
class FolderWarmup:
    """A memory folder being read ahead of the session that will use it."""

    store: MemoryStore
    lexical: LexicalSelector
    thread: threading.Thread


_started: dict[Path, FolderWarmup] = {}
_lock = threading.Lock()


def start_reading_memory(argv: Sequence[str]) -> FolderWarmup | None:
    """Start reading the folder ``argv`` (the command line after the program's name)
    will recall from; ``None`` when it will not recall, or anything is unclear."""
    flags = _memory_flags(argv)
    if flags is None:
        return None
    from asyncrecall._exceptions import ConfigError
    from asyncrecall._settings import load_settings

    try:
        settings = load_settings(flags)
    except ConfigError:
        return None  # the command reports it
    if not settings.memory_enabled or settings.store:
        return None
    return warm_folder(settings.memory_folder())


def warm_folder(root: Path) -> FolderWarmup:
    """Start (once per folder and process) reading ``root`` in a daemon thread."""
    from asyncrecall.memory import LexicalSelector, MemoryManager, MemoryStore

    key = root.expanduser().absolute()
    with _lock:
        found = _started.get(key)
        if found is not None:
            return found
        # No postings: building them costs the start-up more than a query or two saves.
        store, lexical = MemoryStore(key), LexicalSelector(postings=False)
        thread = MemoryManager(store, lexical).start_warming()
        found = _started[key] = FolderWarmup(store, lexical, thread)
        return found


def adopt(root: Path) -> FolderWarmup | None:
    """The warm-up started for ``root`` in this process, if any."""
    with _lock:
        return _started.get(root.expanduser().absolute())


def _memory_flags(argv: Sequence[str]) -> dict[str, object] | None:
    """The folder flags of a recalling command, or ``None`` (another command, memory
    off by flag, or a command line this quick reading does not understand)."""
    args = list(argv)
    command = next((a for a in args if not a.startswith("-")), None)
    if command not in _RECALLING:
        return None
    flags: dict[str, object] = {}
    rest = args[args.index(command) + 1 :]
    for index, arg in enumerate(rest):
        if arg == "--":
            break
        if arg == "--no-memory":
            return None
        name, eq, value = arg.partition("=")
        if name in _VALUED:
            if not eq:
                if index + 1 >= len(rest):
                    return None
                value = rest[index + 1]
            flags[_VALUED[name]] = value
    return flags

"""The lexical recall's cold path: nothing is read or tokenised on the event loop.

Timings are in ``benchmarks/scan.py --cold``; these tests check *where* the work runs
(which thread) and *what* is redone, through counters outside the code under test.
"""

from __future__ import annotations

import asyncio
import marshal
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import asyncrecall.memory._recall as _recall_module
import asyncrecall.memory.folder._scan as scan_module
import asyncrecall.memory.selectors._lexical as lexical_module
from asyncrecall.memory import FolderStore, LexicalSelector, MemoryDoc, Recaller
from asyncrecall.memory._recall import INLINE_BUDGET_BYTES

from .conftest import WriteFile, topic

NOW = 1_750_000_000.0


@pytest.fixture
def folder(store: FolderStore, write: WriteFile) -> FolderStore:
    for i in range(12):
        write(
            f"note-{i:02d}.md",
            topic(f"Note {i}", description=f"note {i}", body=f"alpha beta note{i} gamma"),
            mtime=NOW - i,
        )
    write("db.md", topic("Database", body="postgres migrations run in docker"), mtime=NOW - 50)
    return store


class Work:
    """Which threads parsed files and tokenised documents (recorded around the real code)."""

    def __init__(self) -> None:
        self.parsed: list[str] = []
        self.counted: list[str] = []

    def on_loop(self, loop_thread: threading.Thread) -> list[str]:
        return [name for name in self.parsed + self.counted if name == loop_thread.name]


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Work]:
    seen = Work()
    real_parse = scan_module.Scanner._parse
    real_count = lexical_module._count

    def parse(self: scan_module.Scanner, candidate: object) -> object:
        seen.parsed.append(threading.current_thread().name)
        return real_parse(self, candidate)  # type: ignore[arg-type]

    def count(doc: MemoryDoc) -> object:
        seen.counted.append(threading.current_thread().name)
        return real_count(doc)

    monkeypatch.setattr(scan_module.Scanner, "_parse", parse)
    monkeypatch.setattr(lexical_module, "_count", count)
    yield seen


async def _first_step(manager: Recaller, query: str) -> tuple[asyncio.Task[object], bool]:
    """Start a recall as the agent does and report whether it settled in its first step."""
    task: asyncio.Task[object] = asyncio.create_task(manager.recall(query))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    settled = task.done()
    await asyncio.wait({task}, timeout=30)
    return task, settled


async def test_a_cold_lexical_recall_reads_and_tokenises_nothing_on_the_loop(
    folder: FolderStore, work: Work
) -> None:
    """Cold (new process: nothing cached), the scan's parsing and the tokenising run in a
    worker thread; the event loop's thread neither reads a file nor tokenises one."""
    manager = Recaller(folder, LexicalSelector(), clock=lambda: NOW)
    task, settled = await _first_step(manager, "postgres migrations")
    assert not settled
    assert task.result().paths[0] == "db.md"  # type: ignore[attr-defined]
    assert work.parsed and work.counted  # the work was done, and counted
    assert work.on_loop(threading.current_thread()) == []


async def test_a_warm_lexical_recall_settles_inline_without_reading(
    folder: FolderStore, work: Work
) -> None:
    """Warm, the recall settles in its first step (it rides on the first request) and
    neither parses nor tokenises anything."""
    manager = Recaller(folder, LexicalSelector(), clock=lambda: NOW)
    await manager.recall("postgres")
    work.parsed.clear()
    work.counted.clear()
    task, settled = await _first_step(manager, "postgres migrations")
    assert settled
    assert task.result().paths[0] == "db.md"  # type: ignore[attr-defined]
    assert work.parsed == [] and work.counted == []


async def test_a_small_change_is_read_inline_within_the_budget(
    folder: FolderStore, write: WriteFile, work: Work
) -> None:
    """A file written since the last scan whose size fits INLINE_BUDGET_BYTES is parsed
    and tokenised inline: the recall settles in its first step, with that file."""
    manager = Recaller(folder, LexicalSelector(), clock=lambda: NOW)
    await manager.recall("postgres")
    write("db.md", topic("Database", body="postgres moved to a managed service"), mtime=NOW + 5)
    work.parsed.clear()
    work.counted.clear()
    task, settled = await _first_step(manager, "managed postgres")
    assert settled
    assert task.result().paths[0] == "db.md"  # type: ignore[attr-defined]
    loop_thread = threading.current_thread().name
    assert work.parsed == [loop_thread] and work.counted == [loop_thread]


async def test_a_change_over_the_budget_sends_the_recall_off_the_loop_again(
    folder: FolderStore, write: WriteFile, work: Work
) -> None:
    """Changed files whose sizes add up to more than INLINE_BUDGET_BYTES are parsed and
    tokenised in a worker thread."""
    manager = Recaller(folder, LexicalSelector(), clock=lambda: NOW)
    await manager.recall("postgres")
    filler = " ".join(f"word{i}" for i in range(INLINE_BUDGET_BYTES // 6))
    body = f"postgres moved to a managed service. {filler}"
    write("db.md", topic("Database", body=body), mtime=NOW + 5)
    work.parsed.clear()
    work.counted.clear()
    task, settled = await _first_step(manager, "managed postgres")
    assert not settled
    assert task.result().paths[0] == "db.md"  # type: ignore[attr-defined]
    assert work.parsed and work.counted
    assert work.on_loop(threading.current_thread()) == []


async def test_a_new_process_reuses_the_folders_persisted_counts(
    folder: FolderStore, write: WriteFile, work: Work
) -> None:
    """The term counts persist in the folder's hidden cache: a new selector (a new
    process) tokenises nothing that did not change, and only the changed file again."""
    await Recaller(folder, LexicalSelector()).recall("postgres")
    cache = folder.root / ".cache" / lexical_module._CACHE_NAME
    assert cache.is_file()
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]  # no temp file left
    assert all(not d.rel_path.startswith(".cache") for d in folder.scan())
    counted_first = len(work.counted)
    assert counted_first == 13

    write("db.md", topic("Database", body="postgres 17 now"), mtime=NOW + 9)
    work.counted.clear()
    result = await Recaller(folder, LexicalSelector()).recall("postgres")
    assert result.paths[0] == "db.md"
    assert len(work.counted) == 1  # only the changed file

    work.counted.clear()
    await Recaller(folder, LexicalSelector()).recall("postgres")
    assert work.counted == []


_HEADER = lexical_module._CACHE_HEADER
_VALID_ROW = ["db.md", 10, 1.0, 2, {"postgr": 1}, "en"]


@pytest.mark.parametrize(
    "content",
    [
        b"not marshal at all",
        b'{"format": 1}\n["x.md", 3]\n',  # the first version's JSON lines
        marshal.dumps(((*_HEADER[:3], (3, 0)), [_VALID_ROW])),  # another Python wrote it
        marshal.dumps((_HEADER, [["db.md", 10, 1.0, 2, ["not", "a", "dict"], "en"]])),
        marshal.dumps((_HEADER, [["db.md", 10, 1.0, 2, {"postgr": 1}]])),  # version 3's row
        marshal.dumps((_HEADER, [["db.md", 10]])),
        marshal.dumps((_HEADER, [_VALID_ROW] * 3))[:-7],  # cut short
    ],
)
async def test_an_unusable_cache_file_is_rebuilt(
    folder: FolderStore, work: Work, content: bytes
) -> None:
    """A damaged cache costs a re-tokenise, never a wrong answer or an error."""
    (folder.root / ".cache").mkdir()
    cache = folder.root / ".cache" / lexical_module._CACHE_NAME
    cache.write_bytes(content)
    result = await Recaller(folder, LexicalSelector()).recall("postgres")
    assert result.paths == ("db.md",)
    assert len(work.counted) == 13
    header, rows = marshal.loads(cache.read_bytes())
    assert header == _HEADER and len(rows) == 13


async def test_an_earlier_tokenisers_cache_file_is_removed(folder: FolderStore) -> None:
    """Counts made by an earlier tokeniser are never read, so they are not kept."""
    (folder.root / ".cache").mkdir()
    for old in lexical_module._OLD_CACHE_NAMES:
        (folder.root / ".cache" / old).write_bytes(b"old counts")
    await Recaller(folder, LexicalSelector()).recall("postgres")
    names = [p.name for p in (folder.root / ".cache").iterdir()]
    assert names == [lexical_module._CACHE_NAME]


async def test_a_read_only_folder_still_recalls(
    folder: FolderStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder where the cache cannot be written recalls as usual."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(lexical_module.tempfile, "mkstemp", refuse)
    result = await Recaller(folder, LexicalSelector()).recall("postgres")
    assert result.paths == ("db.md",)
    assert not (folder.root / ".cache" / lexical_module._CACHE_NAME).exists()


class _NotInline:
    """An instant-looking selector that says it must not run inline."""

    name = "not-inline"
    inline = False

    def __init__(self) -> None:
        self.calls: list[str] = []

    def ready(self, docs: Sequence[MemoryDoc]) -> bool:
        return True

    def prepare(self, docs: Sequence[MemoryDoc]) -> None:
        self.calls.append("prepare")

    def rank(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        self.calls.append("rank")
        return list(docs[:limit])

    async def select(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        self.calls.append("select")
        return list(docs[:limit])


async def test_inline_false_is_respected(folder: FolderStore) -> None:
    """``inline = False`` means recall asks ``select`` (in its task), never ``rank`` inline."""
    selector = _NotInline()
    folder.scan()  # warm: only ``inline`` stands between recall and an inline ``rank``
    result = await Recaller(folder, selector).recall("anything", limit=2)
    assert selector.calls == ["select"]
    assert result.strategy == "not-inline" and len(result.paths) == 2


def test_the_cache_lives_where_the_scan_never_looks(tmp_path: Path) -> None:
    """The cache file is not a ``*.md`` and sits in a hidden folder."""
    assert not lexical_module._CACHE_NAME.endswith(".md")
    assert lexical_module._CACHE_DIR.startswith(".")


async def test_the_instant_pass_never_reads_and_answers_once_warm(
    folder: FolderStore, work: Work
) -> None:
    """``recall_instant`` answers ``None`` while cold, reading and tokenising nothing on
    the caller's thread; its warm-up thread makes a later call answer at once."""
    manager = Recaller(folder, LexicalSelector(), clock=lambda: NOW)
    assert manager.recall_instant("postgres migrations") is None
    assert work.on_loop(threading.current_thread()) == []
    warming = _recall_module._WARMING.get(folder)  # alive or, on a fast machine, done
    assert warming is not None
    warming.join(30)  # hang guard
    result = manager.recall_instant("postgres migrations")
    assert result is not None and result.paths[0] == "db.md"
    assert work.on_loop(threading.current_thread()) == []
    assert manager.recall_instant("   ") is not None
    with pytest.raises(TypeError, match="not an inline"):
        manager.recall_instant("x", selector=_NotInline())  # type: ignore[arg-type]


async def test_warm_makes_the_next_recall_inline(folder: FolderStore, work: Work) -> None:
    """After ``warm()`` (work done in a worker thread), the first recall settles in its
    first step; a model selector's lexical fallback is warmed the same way."""
    manager = Recaller(folder, LexicalSelector(), clock=lambda: NOW)
    await manager.warm()
    assert work.parsed and work.counted
    assert work.on_loop(threading.current_thread()) == []
    _, settled = await _first_step(manager, "postgres")
    assert settled

    fallback = LexicalSelector()

    class WithFallback(_NotInline):
        def __init__(self) -> None:
            super().__init__()
            self.fallback = fallback

    other = Recaller(FolderStore(folder.root), WithFallback())
    await other.warm()
    assert fallback.ready(folder.scan())


async def test_a_warm_folder_offers_its_candidates_without_a_thread(
    folder: FolderStore, write: WriteFile, work: Work, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a selector that is not inline (the model's), a warm folder's candidates come
    straight from the cached scan: no worker thread is started (starting one blocks the
    loop until it runs); a file changed since is parsed in a worker thread, never on
    the loop."""
    import asyncrecall.memory.folder._store as store_module

    threads: list[str] = []
    real = store_module.run_off_loop

    async def counted(work_fn: object, *, name: str) -> object:
        threads.append(name)
        return await real(work_fn, name=name)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module, "run_off_loop", counted)
    cold = await folder.candidates("postgres")
    assert threads == ["asyncrecall-scan"] and len(cold) == 13
    warm = await folder.candidates("postgres")
    assert threads == ["asyncrecall-scan"]
    assert [d.rel_path for d in warm] == [d.rel_path for d in cold]
    write("db.md", topic("Database", body="postgres moved to a managed service"), mtime=NOW + 5)
    work.parsed.clear()
    changed = await folder.candidates("postgres")
    assert threads == ["asyncrecall-scan"] * 2
    assert changed[0].rel_path == "db.md" and "managed" in changed[0].body
    assert work.parsed and work.on_loop(threading.current_thread()) == []


async def test_warm_on_a_warm_folder_starts_no_thread(
    folder: FolderStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """warm() when the folder and its selector are warm already (the folder was read at
    start-up) returns without starting a thread: starting one holds the event loop."""
    manager = Recaller(folder, LexicalSelector())
    await manager.warm()
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    await manager.warm()
    assert started == []
    folder.scan()  # still answers: nothing was left half-done


async def test_the_persisted_counts_keep_each_notes_language(
    store: FolderStore, write: WriteFile, work: Work
) -> None:
    """A new process reads a French folder's counts from its cache, tokenising nothing,
    and still reads the query the French way (``docker`` -> ``dock``, as the notes were):
    each row carries its note's language (format 4)."""
    body = "Les conteneurs tournent sous docker compose sur le serveur de test."
    write("ops.md", topic("Exploitation", description="les conteneurs", body=body), mtime=NOW)
    write("db.md", topic("Base", body="La base de données est sur le serveur."), mtime=NOW - 1)
    assert (await Recaller(store, LexicalSelector()).recall("docker")).paths == ("ops.md",)
    header, rows = marshal.loads((store.root / ".cache" / lexical_module._CACHE_NAME).read_bytes())
    assert header == _HEADER and {row[0]: row[5] for row in rows} == {"ops.md": "fr", "db.md": "fr"}
    work.counted.clear()
    fresh = LexicalSelector()
    assert (await Recaller(store, fresh).recall("docker")).paths == ("ops.md",)
    assert work.counted == []  # read from the cache, not tokenised

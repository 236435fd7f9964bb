"""The folder's persisted parse index (``.cache/scan-v1.marshal``): a new
process on an unchanged folder parses nothing; a changed file alone is parsed again;
a damaged index costs a parse, never a wrong answer; a cached-only scan never waits
for a scan running in another thread."""

from __future__ import annotations

import marshal
import threading
from collections.abc import Iterator

import pytest

import asyncrecall.memory.folder._scan as scan_module
from asyncrecall.memory import FolderStore

from ..conftest import WriteFile, topic

NOW = 1_750_000_000.0
INDEX = ".cache/" + scan_module._INDEX_NAME


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The relative paths of the files the real parser read."""
    seen: list[str] = []
    real = scan_module.Scanner._parse

    def parse(self: scan_module.Scanner, candidate: scan_module._Candidate) -> object:
        seen.append(candidate.rel_path)
        return real(self, candidate)

    monkeypatch.setattr(scan_module.Scanner, "_parse", parse)
    yield seen


@pytest.fixture
def folder(store: FolderStore, write: WriteFile) -> FolderStore:
    for i in range(8):
        write(f"note-{i}.md", topic(f"Note {i}", body=f"body {i}"), mtime=NOW - i)
    write("sub/deep.md", topic("Deep", description="in a sub-folder"), mtime=NOW - 20)
    return store


def test_a_new_store_on_an_unchanged_folder_parses_nothing(
    folder: FolderStore, parsed: list[str]
) -> None:
    """After a warm-up scan wrote the index, a new store (a new process) returns the same
    documents, field for field, without parsing a single file."""
    first = folder.warm_scan()
    assert len(parsed) == 9 and (folder.root / INDEX).is_file()
    parsed.clear()
    again = FolderStore(folder.root).scan()
    assert parsed == []
    assert again == first


def test_only_a_changed_file_is_parsed_again(
    folder: FolderStore, write: WriteFile, parsed: list[str]
) -> None:
    """A file whose size or modification time changed is parsed again, alone, and the
    index is brought up to date by the next warm-up scan."""
    folder.warm_scan()
    write("note-3.md", topic("Note 3", body="rewritten"), mtime=NOW + 1)
    parsed.clear()
    fresh = FolderStore(folder.root)
    docs = fresh.warm_scan()
    assert parsed == ["note-3.md"]
    assert docs[0].rel_path == "note-3.md" and docs[0].body == "rewritten"
    parsed.clear()
    assert FolderStore(folder.root).scan() == docs and parsed == []


def test_a_plain_scan_does_not_write_the_index(folder: FolderStore) -> None:
    """Only warm-up scans write the index: a save (whose scan is a plain one) pays no
    extra write."""
    folder.scan()
    assert not (folder.root / INDEX).exists()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not marshal",
        marshal.dumps((("asyncrecall-scan", 1, 0, (3, 0)), [])),  # another Python wrote it
        marshal.dumps((scan_module._INDEX_HEADER, [("note-0.md", 1)])),
        marshal.dumps((scan_module._INDEX_HEADER, [("note-0.md", 1, 2, 3, 4, "no-type", 6)])),
    ],
)
def test_a_damaged_index_is_parsed_again_and_rewritten(
    folder: FolderStore, parsed: list[str], content: bytes
) -> None:
    """A damaged or foreign index is ignored: every file is parsed, the answer is right,
    and the index is rewritten."""
    expected = FolderStore(folder.root).scan()
    (folder.root / ".cache").mkdir(exist_ok=True)
    (folder.root / INDEX).write_bytes(content)
    parsed.clear()
    assert FolderStore(folder.root).warm_scan() == expected
    assert len(parsed) == 9
    header, rows = marshal.loads((folder.root / INDEX).read_bytes())
    assert header == scan_module._INDEX_HEADER and len(rows) == 9


def test_an_index_entry_is_used_only_while_size_and_time_match(
    folder: FolderStore, write: WriteFile, parsed: list[str]
) -> None:
    """The index says what a file held at one size and modification time: a file edited
    to the same size but a new time is parsed again, never taken from the index."""
    folder.warm_scan()
    write("note-1.md", topic("Note 1", body="BODY 1"), mtime=NOW + 3)  # same size
    parsed.clear()
    docs = FolderStore(folder.root).scan()
    assert parsed == ["note-1.md"]
    assert next(d for d in docs if d.rel_path == "note-1.md").body == "BODY 1"


def test_a_cached_only_scan_never_waits_for_a_scan_in_a_thread(
    folder: FolderStore, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another thread scans (and parses), scan_cached() answers None at once
    instead of blocking the caller (the event loop) until that scan ends."""
    folder.scan()
    write("new.md", topic("New"), mtime=NOW + 5)
    inside, release = threading.Event(), threading.Event()
    real = scan_module.Scanner._parse

    def slow_parse(self: scan_module.Scanner, candidate: scan_module._Candidate) -> object:
        inside.set()
        release.wait(30)
        return real(self, candidate)

    monkeypatch.setattr(scan_module.Scanner, "_parse", slow_parse)
    worker = threading.Thread(target=folder.scan)
    worker.start()
    try:
        assert inside.wait(30)
        assert folder.scan_cached(budget_bytes=1 << 20) is None
    finally:
        release.set()
        worker.join(30)
    assert folder.scan_cached() is not None


def test_unparsed_bytes_counts_only_what_the_index_does_not_hold(
    folder: FolderStore, write: WriteFile, parsed: list[str]
) -> None:
    """A new store tells how much a warm-up would parse (the changed files' sizes),
    parsing nothing to tell it."""
    folder.warm_scan()
    changed = write("note-3.md", topic("Note 3", body="rewritten"), mtime=NOW + 1)
    added = write("note-9.md", topic("Note 9"), mtime=NOW + 2)
    parsed.clear()
    fresh = FolderStore(folder.root)
    assert fresh.unparsed_bytes() == changed.stat().st_size + added.stat().st_size
    assert parsed == []
    fresh.warm_scan()
    assert FolderStore(folder.root).unparsed_bytes() == 0


def test_an_index_another_process_wrote_replaces_the_stale_parses(
    folder: FolderStore, write: WriteFile, parsed: list[str]
) -> None:
    """After another store (the command line's reader process) parsed the changed files
    and wrote the index, :meth:`reread_index` takes its parses up: nothing is parsed."""
    folder.warm_scan()
    waiting = FolderStore(folder.root)
    assert waiting.unparsed_bytes() == 0  # it has read today's index
    write("note-3.md", topic("Note 3", body="rewritten"), mtime=NOW + 1)
    assert waiting.unparsed_bytes() > 0
    FolderStore(folder.root).warm_scan()  # the reader's work
    parsed.clear()
    waiting.reread_index()
    assert waiting.unparsed_bytes() == 0
    docs = waiting.scan()
    assert parsed == []
    assert docs[0].rel_path == "note-3.md" and docs[0].body == "rewritten"

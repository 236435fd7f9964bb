"""Scanning: which files count, the skip rules, the cap, the cache."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from asyncrecall.memory import MAX_FILE_BYTES, FolderStore
from asyncrecall.memory.folder import _scan as scan_module

from ..conftest import WriteFile, topic


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "asyncrecall.memory" and r.levelno == logging.WARNING
    ]


def test_topic_files_below_the_folder_are_found_newest_first(
    store: FolderStore, write: WriteFile, caplog: pytest.LogCaptureFixture
) -> None:
    """Every ``*.md`` below the folder except MEMORY.md, in sub-folders too, newest first.
    The index is never a candidate, even one that parses as a topic file (no warning
    about it either: it is not read at all)."""
    write("old.md", topic("Old"), mtime=1_000)
    write("sub/deep/new.md", topic("New"), mtime=3_000)
    write("mid.md", topic("Mid"), mtime=2_000)
    write("MEMORY.md", topic("Index", body="- [Old](old.md) — x"), mtime=4_000)
    write("notes.txt", topic("Text"), mtime=5_000)
    write(".hidden.md", topic("Hidden"), mtime=5_000)
    write(".git/x.md", topic("In a dot folder"), mtime=5_000)
    caplog.set_level(logging.WARNING, logger="asyncrecall.memory")
    docs = store.scan()
    assert [d.rel_path for d in docs] == ["sub/deep/new.md", "mid.md", "old.md"]
    assert not [w for w in _warnings(caplog) if "MEMORY.md" in w]
    new = docs[0]
    assert new.path == (store.root / "sub/deep/new.md").resolve()
    assert new.path.is_absolute()
    assert (new.mtime, new.size) == (3_000, (store.root / "sub/deep/new.md").stat().st_size)


def test_a_missing_folder_scans_empty(tmp_path: Path) -> None:
    assert FolderStore(tmp_path / "nowhere").scan() == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"just text, no front matter\n", "no front matter"),
        (b"---\nname: x\ntype: user\nbody without closing fence\n", "not closed"),
        (b"---\nname: x\ndescription: y\n---\nno type\n", "no type"),
        (b"---\nname: x\ntype: secret\n---\nunknown type\n", "unknown type"),
        (b"---\nname: x\ntype: user\n---\n\xff\xfe\x00binary\x80\n", "not UTF-8"),
        (b"---\nname: x\ntype: user\n---\nnul\x00byte\n", "not UTF-8"),
    ],
)
def test_invalid_files_are_skipped_with_one_warning(
    store: FolderStore,
    write: WriteFile,
    caplog: pytest.LogCaptureFixture,
    content: bytes,
    reason: str,
) -> None:
    """A bad file is skipped, warned about once, and never breaks the scan."""
    write("good.md", topic("Good"))
    write("bad.md", content)
    with caplog.at_level(logging.WARNING, logger="asyncrecall.memory"):
        assert [d.rel_path for d in store.scan()] == ["good.md"]
        assert [d.rel_path for d in store.scan()] == ["good.md"]
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "bad.md" in warnings[0] and reason in warnings[0]


def test_a_file_over_one_mib_is_skipped_unread(
    store: FolderStore, write: WriteFile, caplog: pytest.LogCaptureFixture
) -> None:
    write("huge.md", topic("Huge", body="x" * MAX_FILE_BYTES))
    with caplog.at_level(logging.WARNING, logger="asyncrecall.memory"):
        assert store.scan() == []
    assert len(_warnings(caplog)) == 1 and "over 1 MiB" in _warnings(caplog)[0]


def test_a_changed_bad_file_is_warned_about_again(
    store: FolderStore, write: WriteFile, caplog: pytest.LogCaptureFixture
) -> None:
    """The warning is once per file state: fixing and breaking it again warns again."""
    with caplog.at_level(logging.WARNING, logger="asyncrecall.memory"):
        write("bad.md", "nothing", mtime=1_000)
        store.scan()
        write("bad.md", topic("Fixed"), mtime=2_000)
        assert [d.name for d in store.scan()] == ["Fixed"]
        write("bad.md", "broken again", mtime=3_000)
        assert store.scan() == []
        store.scan()
    assert len(_warnings(caplog)) == 2


def test_links_pointing_outside_the_folder_are_skipped_and_never_read(
    store: FolderStore,
    write: WriteFile,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A link out of the folder (file or folder) is skipped with one warning; not opened."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.md"
    secret.write_text(topic("Secret"), encoding="utf-8")
    (outside / "more.md").write_text(topic("More"), encoding="utf-8")
    write("inside.md", topic("Inside"))
    (store.root / "escape.md").symlink_to(secret)
    (store.root / "escape-dir").symlink_to(outside, target_is_directory=True)
    (store.root / "alias.md").symlink_to(store.root / "inside.md")  # inside: fine
    opened: list[str] = []
    real_open = os.open

    def spy_open(path: str, flags: int, *args: int) -> int:
        opened.append(str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(scan_module.os, "open", spy_open)
    with caplog.at_level(logging.WARNING, logger="asyncrecall.memory"):
        names = sorted(d.rel_path for d in store.scan())
        store.scan()
    assert names == ["alias.md", "inside.md"]
    assert not any(str(outside) in path for path in opened)
    warnings = _warnings(caplog)
    assert len(warnings) == 2, warnings
    assert any("escape.md" in w and "outside" in w for w in warnings)
    assert any("escape-dir" in w and "outside" in w for w in warnings)


def test_a_dangling_link_is_ignored(store: FolderStore) -> None:
    (store.root / "gone.md").symlink_to(store.root / "missing.md")
    assert store.scan() == []


def test_scan_keeps_the_200_newest_valid_files(store: FolderStore, write: WriteFile) -> None:
    for i in range(230):
        write(f"m{i:03d}.md", topic(f"M{i}"), mtime=1_000 + i)
    write("broken-newest.md", "no front matter", mtime=9_999)
    docs = store.scan()
    assert len(docs) == 200
    assert docs[0].rel_path == "m229.md" and docs[-1].rel_path == "m030.md"
    assert len(store.scan(limit=None)) == 230


def test_a_warm_scan_parses_nothing(
    store: FolderStore, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results are cached per file on (size, mtime): only a changed file is parsed again."""
    for i in range(5):
        write(f"m{i}.md", topic(f"M{i}"), mtime=1_000 + i)
    calls: list[str] = []
    real_parse = scan_module.parse_document

    def counting_parse(text: str, *, default_name: str) -> object:
        calls.append(default_name)
        return real_parse(text, default_name=default_name)

    monkeypatch.setattr(scan_module, "parse_document", counting_parse)
    store.scan()
    assert len(calls) == 5
    calls.clear()
    store.scan()
    assert calls == []
    write("m2.md", topic("M2 changed"), mtime=2_000)
    assert store.scan()[0].name == "M2 changed"
    assert calls == ["m2"]


def test_a_cached_scan_reads_nothing_and_says_when_it_would_have_to(
    store: FolderStore, write: WriteFile
) -> None:
    """``scan_cached`` is the warm scan, or ``None`` (nothing read) when a file changed."""
    write("a.md", topic("A"), mtime=1_000)
    assert store.scan_cached() is None
    assert [d.name for d in store.scan()] == ["A"]
    assert [d.name for d in store.scan_cached() or []] == ["A"]
    write("b.md", topic("B"), mtime=2_000)
    assert store.scan_cached() is None


def test_a_file_name_with_a_control_character_is_skipped(
    store: FolderStore, write: WriteFile, caplog: pytest.LogCaptureFixture
) -> None:
    """A newline in a path would add a line to the model selector's manifest."""
    write("evil\n- [user] x.md.md", topic("Evil"))
    write("ok.md", topic("Ok"))
    with caplog.at_level(logging.WARNING, logger="asyncrecall.memory"):
        assert [d.rel_path for d in store.scan()] == ["ok.md"]
        store.scan()
    assert [r.getMessage() for r in caplog.records] == [
        "skipping memory file evil\\n- [user] x.md.md: control characters in its name"
    ]

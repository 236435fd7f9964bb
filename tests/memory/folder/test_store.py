"""The store: creating the folder, saving, forgetting, the index, concurrent writers."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asyncrecall import MemoryStoreError
from asyncrecall.memory import INDEX_MAX_BYTES, INDEX_MAX_LINES, FolderStore, _provenance

from ..conftest import WriteFile


def test_ensure_creates_the_folder_and_an_empty_index(tmp_path: Path) -> None:
    store = FolderStore(tmp_path / "a" / "memory")
    assert store.ensure() == tmp_path / "a" / "memory"
    assert (tmp_path / "a" / "memory" / "MEMORY.md").read_text() == ""
    (tmp_path / "a" / "memory" / "MEMORY.md").write_text("- kept\n")
    store.ensure()
    assert (tmp_path / "a" / "memory" / "MEMORY.md").read_text() == "- kept\n"


def test_save_memory_writes_a_topic_file_and_an_index_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file gets YAML-safe front matter, its provenance included (the user's own
    write, when); MEMORY.md gets ``- [Title](file.md) — hook``."""
    store = FolderStore(tmp_path / "memory")
    monkeypatch.setattr(_provenance, "_clock", lambda: 1_764_000_000.0)
    doc = store.save_memory(
        "Testing policy",
        "tests: never mock the db",
        "feedback",
        "Use a real database.",
        origin="user",
    )
    assert doc.rel_path == "testing-policy.md"
    assert doc.path == (tmp_path / "memory" / "testing-policy.md").resolve()
    assert (doc.name, doc.description, doc.type, doc.body) == (
        "Testing policy",
        "tests: never mock the db",
        "feedback",
        "Use a real database.",
    )
    assert doc.path.read_text() == (
        "---\nname: Testing policy\ndescription: 'tests: never mock the db'\ntype: feedback\n"
        "provenance:\n- origin: user\n  at: '2025-11-24T16:00:00Z'\n"
        "---\nUse a real database.\n"
    )
    assert (doc.origin, doc.quarantined) == ("user", False)
    assert store.index_path.read_text() == (
        "- [Testing policy](testing-policy.md) — tests: never mock the db\n"
    )


def test_saving_the_same_name_updates_in_place(store: FolderStore) -> None:
    store.save_memory("Deploy", "v1", "project", "old", origin="user")
    store.save_memory("Other", "o", "user", "x", origin="user")
    doc = store.save_memory("Deploy", "v2", "project", "new", origin="user")
    assert doc.body == "new" and doc.description == "v2"
    assert sorted(d.rel_path for d in store.scan()) == ["deploy.md", "other.md"]
    assert store.index_path.read_text() == "- [Deploy](deploy.md) — v2\n- [Other](other.md) — o\n"


def test_names_that_share_a_file_name_get_distinct_files(store: FolderStore) -> None:
    first = store.save_memory("Foo bar", "", "user", "one", origin="user")
    second = store.save_memory("foo-bar", "", "user", "two", origin="user")
    assert first.rel_path == "foo-bar.md" and second.rel_path != first.rel_path
    assert store.get("Foo bar").body == "one" and store.get("foo-bar").body == "two"


def test_save_never_writes_outside_the_folder(store: FolderStore, tmp_path: Path) -> None:
    doc = store.save_memory("../../escape", "", "user", "x", origin="user")
    assert doc.path.parent == store.root.resolve()
    assert not (tmp_path / "escape.md").exists()


@pytest.mark.parametrize(
    ("name", "type", "message"),
    [
        ("", "user", "non-empty name"),
        ("   \n ", "user", "non-empty name"),
        ("x", "secret", "invalid memory type 'secret'"),
        ("x", "", "invalid memory type"),
    ],
)
def test_invalid_memories_are_refused_clearly(
    store: FolderStore, name: str, type: str, message: str
) -> None:
    with pytest.raises(MemoryStoreError, match=message):
        store.save_memory(name, "d", type, "body", origin="user")
    assert store.scan() == []


def test_forget_removes_the_file_and_its_index_line(store: FolderStore) -> None:
    store.save_memory("Keep", "k", "user", "x", origin="user")
    gone = store.save_memory("Drop", "d", "user", "y", origin="user")
    assert store.forget("Drop") == gone
    assert not gone.path.exists()
    assert store.index_path.read_text() == "- [Keep](keep.md) — k\n"
    with pytest.raises(MemoryStoreError, match="no memory named 'Drop'"):
        store.forget("Drop")


def test_get_finds_by_relative_path_name_or_case(store: FolderStore, write: WriteFile) -> None:
    write("sub/x.md", "---\nname: Hello World\ntype: user\n---\nbody")
    assert store.get("sub/x.md").name == "Hello World"
    assert store.get("Hello World").rel_path == "sub/x.md"
    assert store.get("hello world").rel_path == "sub/x.md"
    with pytest.raises(MemoryStoreError, match="no memory named"):
        store.get("nothing")


def test_writes_leave_no_temporary_files(store: FolderStore) -> None:
    for i in range(3):
        store.save_memory(f"M{i}", "", "user", "x", origin="user")
    store.forget("M1")
    leftovers = [p.name for p in store.root.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_hand_edit_that_is_not_utf8_survives_every_rewrite_of_the_index(
    store: FolderStore,
) -> None:
    """Lines typed into ``MEMORY.md`` in another encoding (Latin-1, a UTF-16 byte order
    mark) are kept byte for byte when a save, a forget or a repair rewrites the index;
    the system prompt shows them with replacement characters."""
    store.save_memory("db tests", "never mock it", "feedback", "No mocks.", origin="user")
    hand = b"# My notes\nCaf\xe9 rule: keep it short.\n\xff\xfeodd line\n"
    with open(store.index_path, "ab") as handle:
        handle.write(hand)
    store.save_memory("second", "another note", "user", "x", origin="user")
    store.forget("db tests")
    assert store.repair_index() is False
    raw = store.index_path.read_bytes()
    for line in hand.splitlines():
        assert line in raw.splitlines(), raw
    assert "Caf\ufffd rule" in store.index_for_prompt()


def test_index_for_prompt_is_the_index_when_short(store: FolderStore) -> None:
    assert store.index_for_prompt() == ""  # no folder yet
    store.save_memory("A", "a", "user", "x", origin="user")
    assert store.index_for_prompt() == "- [A](a.md) — a"


def test_index_for_prompt_is_cut_at_200_lines_with_a_warning(store: FolderStore) -> None:
    store.ensure()
    lines = [f"- [M{i}](m{i}.md) — hook" for i in range(250)]
    store.index_path.write_text("\n".join(lines) + "\n")
    text = store.index_for_prompt()
    body, warning = text.split("\n\n")
    assert body.split("\n") == lines[:INDEX_MAX_LINES]
    assert warning.startswith("> WARNING: MEMORY.md is 250 lines")
    assert "only the first 200 lines were loaded" in warning


def test_index_for_prompt_is_cut_at_25000_bytes_on_a_line_boundary(store: FolderStore) -> None:
    store.ensure()
    lines = [f"- [M{i}](m{i}.md) — " + "é" * 200 for i in range(100)]  # ~41 KB
    store.index_path.write_text("\n".join(lines) + "\n")
    text = store.index_for_prompt()
    body, warning = text.split("\n\n")
    assert len(body.encode()) <= INDEX_MAX_BYTES
    kept = body.split("\n")
    assert kept == lines[: len(kept)] and len(kept) < 100
    assert f"only the first {len(kept)} lines were loaded" in warning


_SAVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from asyncrecall.memory import FolderStore

    store = FolderStore(Path(sys.argv[1]))
    tag = sys.argv[2]
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()  # start together
    for i in range(int(sys.argv[3])):
        store.save_memory(f"{tag} {i}", f"{tag} number {i}", "project", f"body {tag} {i}",
                          origin="user")
    """
)


def test_two_processes_saving_at_once_lose_nothing(tmp_path: Path) -> None:
    """Writers in two real processes, released together: every file and index line survives."""
    root = tmp_path / "memory"
    count = 25
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SAVER, str(root), tag, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for tag in ("alpha", "beta")
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.close()
        for proc in procs:
            assert proc.wait(timeout=60) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
    store = FolderStore(root)
    names = {doc.name for doc in store.scan(limit=None)}
    assert names == {f"{tag} {i}" for tag in ("alpha", "beta") for i in range(count)}
    index = store.index_path.read_text().splitlines()
    assert len(index) == 2 * count
    assert {line.split("](")[1].split(")")[0] for line in index} == {
        f"{tag}-{i}.md" for tag in ("alpha", "beta") for i in range(count)
    }

"""``asyncrecall memory import`` stopped half-way, run for real in a subprocess."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asyncrecall.memory import FolderStore
from asyncrecall.memory.folder._index import link_target

#: Enough notes that the import, now linear, is still copying when the signal comes after
#: its first tenth, on a busy machine too.
TOTAL = 2000


def _notes(folder: Path) -> None:
    folder.mkdir()
    for i in range(TOTAL):
        (folder / f"note-{i:04d}.md").write_text(
            f"---\nname: Note {i}\ndescription: note {i}\ntype: project\n---\nBody {i}.\n"
        )


@pytest.mark.parametrize(
    ("signum", "status"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)],
    ids=["ctrl-c", "sigterm"],
)
def test_an_import_stopped_half_way_leaves_each_copied_memory_whole_and_listed(
    tmp_path: Path, signum: signal.Signals, status: int
) -> None:
    """Ctrl-C or ``SIGTERM`` during ``memory import`` stops it between two memories:
    ``MEMORY.md`` lists exactly the topic files there are, each of which reads back
    whole; one stderr line says how far it got and how to undo it (exit 130, or 128 +
    the signal's number); and that undo removes every memory the import wrote."""
    _notes(tmp_path / "handed")
    (tmp_path / "project").mkdir()
    memory = tmp_path / "memory"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASYNCRECALL_"))}
    env["ASYNCRECALL_HOME"] = str(tmp_path / "home")
    command = [sys.executable, "-m", "asyncrecall", "memory"]
    where = ["--memory-dir", str(memory)]
    with subprocess.Popen(
        [*command, "import", "--from", str(tmp_path / "handed"), *where],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path / "project",
    ) as child:
        assert child.stderr is not None
        first = child.stderr.readline()  # the first tenth is copied
        assert first == f"importing {TOTAL // 10} of {TOTAL}\n", first
        child.send_signal(signum)
        out, err = child.communicate(timeout=120)
    assert child.returncode == status, (out, err)
    stopped = re.fullmatch(
        rf"asyncrecall: import interrupted after (\d+) of {TOTAL} memories "
        r"\(each one whole and in the index\); undo it with: "
        r"asyncrecall memory revert --write (import:\w+)\n",
        err.splitlines(keepends=True)[-1],
    )
    assert stopped is not None, err
    done = int(stopped.group(1))
    assert TOTAL // 10 <= done < TOTAL

    files = {p.name for p in memory.glob("*.md")} - {"MEMORY.md"}
    lines = (memory / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    assert sorted(link_target(line) or "" for line in lines) == sorted(files)
    assert done <= len(files) <= done + 1  # the signal may come between a save and its count
    assert {d.rel_path for d in FolderStore(memory).scan(limit=None)} == files

    undone = subprocess.run(
        [*command, "revert", "--write", stopped.group(2), *where],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path / "project",
        timeout=120,
    )
    assert undone.returncode == 0, undone.stderr
    assert FolderStore(memory).scan(limit=None) == []
    assert (memory / "MEMORY.md").read_text(encoding="utf-8") == ""


def test_the_first_signal_raises_and_later_ones_wait_until_the_work_has_unwound() -> None:
    """Inside ``unwinding`` the first terminating signal raises ``Ended`` where the work
    is; a second one, or a Ctrl-C, while that unwinds (the batch writing its index) is
    ignored; once the block is left the handlers that were there before are back."""
    code = textwrap.dedent(
        """
        import signal
        from asyncrecall.cli._signals import Ended, unwinding
        before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
        try:
            with unwinding():
                try:
                    signal.raise_signal(signal.SIGTERM)
                except Ended as ended:
                    print("ended", ended.signum == signal.SIGTERM)
                    signal.raise_signal(signal.SIGTERM)
                    signal.raise_signal(signal.SIGINT)
                    print("unwinding")
                    raise
        except Ended:
            print("unwound")
        print((signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["ended True", "unwinding", "unwound", "True", ""]

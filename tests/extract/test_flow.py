"""Trust from where text came from, through the real agent loop over real HTTP: a write
whose text derives from text the user did not type (a file read earlier in the session,
the answer that quoted it, someone else's text inside a user turn) is held, in any
language; a fact the user states in their own words is kept trusted. The cases are in
:mod:`flow_cases`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from asyncrecall.cli._session import Session
from asyncrecall.cli._settings import Settings
from asyncrecall.memory import FolderStore
from asyncrecall.models import FunctionCall
from asyncrecall.testing import LocalServer, Reply

from .conftest import SideModel, wait_until_handed_off_work_is_done
from .flow_cases import CARRIED, ENCODED, PLANTED, STATED, Carried, Encoded, Planted, Stated
from .test_provenance import _ask as ask_and_extract
from .test_provenance import sources


def _save(name: str, content: str, description: str = "kept for later") -> Reply:
    args = {"name": name, "description": description, "type": "project", "content": content}
    return Reply(tool_calls=[FunctionCall("s1", "save_memory", args)])


def _read(path: str) -> Reply:
    return Reply(tool_calls=[FunctionCall("r1", "read_file", {"path": path})])


def _proposal(name: str, content: str, offsets: list[int], description: str = "") -> dict[str, Any]:
    return {
        "action": "create", "path": "", "name": name,
        "description": description or "kept for later", "type": "project",
        "content": content, "source_offsets": offsets,
    }  # fmt: skip


def _held(store: FolderStore, name: str) -> dict[str, Any]:
    """The memory is quarantined; its newest source, which says why."""
    assert store.get(name).quarantined, sources(store, name)
    newest = sources(store, name)[-1]
    assert newest.get("untrusted") is True and not newest.get("attested")
    return newest


def _ids(cases: tuple[Any, ...]) -> list[str]:
    return [f"{c.lang}-{getattr(c, 'shape', c.name)}".replace(" ", "_") for c in cases]


@pytest.mark.parametrize("case", PLANTED, ids=_ids(PLANTED))
async def test_a_file_quoted_in_the_answer_is_held_though_the_request_is_cited(
    case: Planted, session: Session, side: SideModel, local_server: LocalServer,
    store: FolderStore, settings: Settings,
) -> None:  # fmt: skip
    """Extraction citing the user's request AND the assistant's answer that quoted a
    file does not make the file's text the user's: the answer is the model's, and the
    memory's text comes from the file. Held, naming the file, in every language."""
    (settings.project / "notes.md").write_text(case.file, encoding="utf-8")
    local_server.script("main", _read("notes.md"), case.answer)
    side.add(_proposal(case.name, case.content, [0, 1]))
    await ask_and_extract(session, case.ask)
    source = _held(store, case.name)
    assert source["origin"] == "extraction-user"
    assert "read_file(notes.md)" in source["held"]


@pytest.mark.parametrize("via", ["save_memory", "extraction"])
@pytest.mark.parametrize("case", PLANTED, ids=_ids(PLANTED))
async def test_a_file_read_in_one_query_is_held_when_written_in_a_later_one(
    case: Planted, via: str, session: Session, side: SideModel, local_server: LocalServer,
    store: FolderStore, settings: Settings,
) -> None:  # fmt: skip
    """The taint lasts for the session, not the query: a file read in one query, then
    "remember that" in the next, with no tool in that query, is still held, by the
    agent's ``save_memory`` and by extraction citing the new request."""
    (settings.project / "notes.md").write_text(case.file, encoding="utf-8")
    local_server.script("main", _read("notes.md"), case.answer)
    await ask_and_extract(session, case.ask)
    if via == "save_memory":
        local_server.script("main", _save(case.name, case.content), "Saved.")
        await session.agent.ask("ok, remember that for later")
    else:
        local_server.script("main", "Noted.")
        side.add(_proposal(case.name, case.content, [2, 3]))
        await ask_and_extract(session, "ok, remember that for later")
    source = _held(store, case.name)
    assert "read_file(notes.md)" in source["held"]


@pytest.mark.parametrize("via", ["save_memory", "extraction", "extraction in that query"])
@pytest.mark.parametrize("case", ENCODED, ids=_ids(ENCODED))
async def test_what_is_written_after_a_file_in_other_words_is_held(
    case: Encoded, via: str, session: Session, side: SideModel, local_server: LocalServer,
    store: FolderStore, settings: Settings,
) -> None:  # fmt: skip
    """By where text flowed, not by its words: once the model has read a file, a write
    the user's own words do not state is held, though it shares no word with the file
    (the file encoded, reversed or translated it), in a later query or in that one, by
    ``save_memory`` and by extraction citing the user's request."""
    (settings.project / "notes.md").write_text(case.file, encoding="utf-8")
    local_server.script("main", _read("notes.md"), "I read the notes.")
    if via == "extraction in that query":
        side.add(_proposal(case.name, case.content, [0, 1]))
        await ask_and_extract(session, "read notes.md")
        assert _held(store, case.name)["origin"] == "extraction-user"
        return
    await ask_and_extract(session, "read notes.md")
    if via == "save_memory":
        local_server.script("main", _save(case.name, case.content), "Saved.")
        await session.agent.ask("ok, remember that for later")
    else:
        local_server.script("main", "Noted.")
        side.add(_proposal(case.name, case.content, [2]))
        await ask_and_extract(session, "ok, remember that for later")
    _held(store, case.name)


@pytest.mark.parametrize("case", PLANTED, ids=_ids(PLANTED))
async def test_a_file_read_then_saved_in_the_same_query_is_held(
    case: Planted, session: Session, local_server: LocalServer, store: FolderStore,
    settings: Settings,
) -> None:  # fmt: skip
    """``save_memory`` right after the read, in the same query: held, and the reason
    names the file it copies."""
    (settings.project / "notes.md").write_text(case.file, encoding="utf-8")
    local_server.script("main", _read("notes.md"), _save(case.name, case.content), "Saved.")
    await session.agent.ask(case.ask)
    assert "read_file(notes.md)" in _held(store, case.name)["held"]


@pytest.mark.parametrize("via", ["save_memory", "extraction"])
@pytest.mark.parametrize("case", CARRIED, ids=_ids(CARRIED))
async def test_someone_elses_text_in_a_user_turn_is_held(
    case: Carried, via: str, session: Session, side: SideModel, local_server: LocalServer,
    store: FolderStore,
) -> None:  # fmt: skip
    """A user turn carrying someone else's text (a pasted mail, a relayed agent's
    message, "summarise / translate this:", quoted text, look-alike letters, zero-width
    characters), told apart by its shape in any language: what that text asks to be
    remembered is held, saved by the agent or by extraction citing the turn."""
    if via == "save_memory":
        local_server.script("main", _save(case.name, case.content), "Saved.")
        await session.agent.ask(case.turn)
    else:
        local_server.script("main", "Noted.")
        side.add(_proposal(case.name, case.content, [0]))
        await ask_and_extract(session, case.turn)
    source = _held(store, case.name)
    assert "user turn" in source["held"] or "obfuscated" in source["held"]


@pytest.mark.parametrize("via", ["save_memory", "extraction"])
@pytest.mark.parametrize("case", STATED, ids=_ids(STATED))
async def test_a_fact_the_user_states_stays_trusted_after_the_session_read_files(
    case: Stated, via: str, session: Session, side: SideModel, local_server: LocalServer,
    store: FolderStore, settings: Settings,
) -> None:  # fmt: skip
    """A fact the user states in their own words (an editor, a time zone, the test
    runner, a teammate; also after pasting a log) is saved trusted and recalled, even
    in a session whose model read a file before: the user's words attest it, restated
    in the third person or with another form of a word ("I use" / "the user uses", an
    Arabic verb's person)."""
    (settings.project / "notes.md").write_text(PLANTED[0].file, encoding="utf-8")
    local_server.script("main", _read("notes.md"), PLANTED[0].answer)
    await ask_and_extract(session, PLANTED[0].ask)
    if via == "save_memory":
        local_server.script("main", _save(case.name, case.content, case.description), "Saved.")
        await session.agent.ask(case.turn)
    else:
        local_server.script("main", "Noted.")
        side.add(_proposal(case.name, case.content, [2], case.description))
        await ask_and_extract(session, case.turn)
    assert not store.get(case.name).quarantined, sources(store, case.name)
    assert not any(s.get("untrusted") for s in sources(store, case.name))


async def test_a_fact_in_the_users_own_words_is_attested(
    session: Session, side: SideModel, local_server: LocalServer, store: FolderStore
) -> None:
    """A write whose text the user's own typed words state is recorded ``attested``;
    one that adds what the user did not say is not (it stays trusted)."""
    turn = "Remember that our tests run with tox and Jonas Weber does the reviews."
    local_server.script(
        "main",
        _save("Tests", "Our tests run with tox; Jonas Weber does the reviews.", "tests"),
        "Saved.",
    )
    await session.agent.ask(turn)
    local_server.script(
        "main", _save("Guess", "The team probably prefers small pull requests.", "team"), "Saved."
    )
    await session.agent.ask(turn)
    assert sources(store, "Tests")[-1].get("attested") is True
    assert not sources(store, "Guess")[-1].get("attested")
    assert not store.get("Guess").quarantined


def test_run_hands_the_sessions_outside_text_to_the_worker(
    local_server: LocalServer, side: SideModel, tmp_path: Path, memory_dir: Path
) -> None:
    """``run`` hands its extraction to a detached worker: the hand-off carries what the
    model was shown (the file it read), so the worker's extraction, citing the user's
    request and the answer that quoted the file, holds the memory as the session would."""
    from .test_handoff import cli

    case = PLANTED[1]
    (tmp_path / "project").mkdir(parents=True)
    (tmp_path / "project" / "notes.md").write_text(case.file, encoding="utf-8")
    held = threading.Event()  # the worker, not run, gets the extraction's answer
    side.add(_proposal(case.name, case.content, [0, 1]), gate=held)
    local_server.script("main", _read("notes.md"), case.answer)

    done = cli(local_server, tmp_path, "run", case.ask)
    assert done.returncode == 0, done.stderr
    held.set()
    wait_until_handed_off_work_is_done(memory_dir)
    store = FolderStore(memory_dir)
    assert "read_file(notes.md)" in _held(store, case.name)["held"]

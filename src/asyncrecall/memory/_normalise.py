"""Text as a reader takes it: the key that rules and tag checks compare on.

A memory is written by a model from text someone else may have written, and a rule
that matches the characters as written is beaten by characters that read the same:
``%3C`` or ``&lt;`` for ``<``, a Cyrillic ``с`` for ``c``, a zero-width space or a tag
character inside a word, ``é`` for ``e``. So every rule first puts the text through
:func:`normalise`, which undoes, in this order:

1. **escapes** (:func:`decode_escapes`): percent-encoding (UTF-8), HTML character
   references (named, decimal, hexadecimal, with or without ``;``), JSON and Python
   escapes (``\\u003c``, ``\\U0000003c``, ``\\x3c``, ``\\074``, ``\\N{LESS-THAN SIGN}``)
   and a backslash before punctuation (JSON's ``\\/``, Markdown's ``\\<``), repeated
   until nothing changes (``%253C`` is ``<``), at most :data:`MAX_ROUNDS` times;
2. **what a reader does not see**: the default-ignorable code points of Unicode
   (soft hyphen, zero-width characters, bidi controls, variation selectors, the tag
   characters U+E0000-E0FFF, Hangul fillers, ...), the other format characters
   (category Cf) and the control characters that are not white space;
3. **compatibility forms and marks**: each character's compatibility decomposition
   (NFKD: full-width ``＜`` is ``<``, ``ﬁ`` is ``fi``) without its combining marks
   (``é`` is ``e``), case-folded;
4. **look-alikes** (:func:`fold`): a character that is not ASCII and is confusable,
   by Unicode's table (UTS #39), with an ASCII character in either case (Cyrillic
   ``с``, Greek ``Ν``, ``‹``, ``∕``) is that character, before step 3 (the glyph is
   what is read: ``Ν`` is ``n``, its lower case ``ν`` is ``v``), unless its compatibility
   form is ASCII letters or digits (``ſ`` is ``s``, not ``f``); so are the angle brackets
   (``〈``, ``⟨``) for ``<`` and ``>``; a dash of any kind is ``-``. (So steps 2 to 4
   go character by character: :func:`fold`.)

ASCII characters are only lower-cased: the table also maps ``m`` to ``rn`` and ``1``
to ``l``, which would break every pattern written in ASCII. The result is a key to
match on, not text to show: run the literal words of a pattern through
:func:`normalise` too. :func:`skeleton` is the plain UTS #39 skeleton, for telling
whether two names are confusable; :func:`normalise_mapped` (and
:func:`decode_escapes`) keep, for each character of the result, where it came from in
the original, so that a match can be replaced in the text as written;
:func:`decode_text` is step 1 without the offsets, for a first look that is cheap.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from html.entities import html5
from typing import Final

__all__ = [
    "LESS_THAN",
    "MAX_ROUNDS",
    "Mapped",
    "decode_escapes",
    "decode_text",
    "fold",
    "is_ignorable",
    "normalise",
    "normalise_mapped",
    "skeleton",
]

#: Rounds of escape decoding at most (``%25253C`` takes three).
MAX_ROUNDS: Final = 6

#: Every character :func:`fold` reads as ``<`` (every assigned one was tried when the
#: confusables table was generated, by ``tools/gen_confusables.py``; a test checks it).
LESS_THAN: Final = (
    "\u003c\u02c2\u1438\u16b2\u2039\u226e\u2329\u276c"
    "\u276e\u27e8\u3008\u304f\u3050\u31db\ufe3f\ufe64"
    "\uff1c\U0001d236\U00021fe8"
)

# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), as ranges.
_DEFAULT_IGNORABLE: Final = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_IGNORABLE_CODES: Final = frozenset(cp for lo, hi in _DEFAULT_IGNORABLE for cp in range(lo, hi + 1))
_MARKS: Final = frozenset({"Mn", "Me"})
# Prototypes of the table that a model still reads as ASCII: the angle brackets (``〈``,
# ``⟨``, ``❬``) that Unicode confuses with one another but not with ``<`` and ``>``.
_READ_AS: Final = {"\u276c": "<", "\u276d": ">"}


def is_ignorable(char: str) -> bool:
    """Whether a reader sees ``char`` as nothing: a default-ignorable code point, a
    format character (Cf) or a control character that is not white space."""
    if ord(char) in _IGNORABLE_CODES:
        return True
    category = unicodedata.category(char)
    return category == "Cf" or (category == "Cc" and not char.isspace())


# -- escapes --------------------------------------------------------------------------

_ESCAPE: Final = re.compile(
    r"(?P<pct>(?:%[0-9A-Fa-f]{2})+)"
    r"|&(?P<num>#[0-9]{1,8};?|#[xX][0-9A-Fa-f]{1,7};?)"
    r"|&(?P<name>[A-Za-z][A-Za-z0-9]{0,31};?)"
    r"|\\(?:u(?P<hi>[dD][89abAB][0-9A-Fa-f]{2})\\u(?P<lo>[dD][c-fC-F][0-9A-Fa-f]{2})"
    r"|u(?P<u4>[0-9A-Fa-f]{4})|U(?P<u8>[0-9A-Fa-f]{8})|x(?P<x2>[0-9A-Fa-f]{2})"
    r"|N\{(?P<uname>[A-Za-z0-9 \-]{1,88})\}|(?P<oct>[0-7]{1,3})|(?P<punct>[^\w\s]))"
)


@dataclass(frozen=True, slots=True)
class Mapped:
    """A text derived from an original, with where each of its characters came from:
    ``text[i]`` was made from ``original[starts[i]:ends[i]]``."""

    text: str
    starts: Sequence[int]
    ends: Sequence[int]

    @classmethod
    def identity(cls, text: str) -> Mapped:
        """``text`` as its own original."""
        return cls(text, range(len(text)), range(1, len(text) + 1))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original that ``text[start:end]`` (not empty) came from."""
        return self.starts[start], self.ends[end - 1]


def _percent(run: str) -> list[tuple[str, int, int]]:
    """The characters a run of ``%XX`` decodes to (UTF-8), each with the offsets of its
    bytes in the run; a byte that starts no valid character stays as written."""
    data = bytes.fromhex(run.replace("%", ""))
    out: list[tuple[str, int, int]] = []
    i = 0
    while i < len(data):
        lead = data[i]
        size = 1 if lead < 0x80 else 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4
        try:
            char = data[i : i + size].decode("utf-8")
        except UnicodeDecodeError:
            out.extend((c, 3 * i + k, 3 * i + k + 1) for k, c in enumerate(run[3 * i : 3 * i + 3]))
            i += 1
            continue
        out.append((char, 3 * i, 3 * (i + size)))
        i += size
    return out


def _named(name: str) -> tuple[str, int] | None:
    """An HTML named reference's text and how many characters of ``name`` it takes, as a
    browser reads it (the longest known prefix when there is no ``;``)."""
    if name in html5:
        return html5[name], len(name)
    for size in range(len(name) - 1, 1, -1):
        if name[:size] in html5:
            return html5[name[:size]], size
    return None


def _decoded(match: re.Match[str]) -> tuple[str, int] | None:
    """What an escape decodes to and how many characters of the match it takes (``None``:
    it is no escape after all, or one of a lone surrogate)."""
    kind = match.lastgroup
    value = match.group(kind) if kind else ""
    code: int | None = None
    if kind == "num":
        return html.unescape("&" + value), len(match.group())
    if kind == "name":
        found = _named(value)
        return None if found is None else (found[0], found[1] + 1)
    if kind == "lo":
        high, low = int(match.group("hi"), 16), int(value, 16)
        code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
    elif kind in ("u4", "u8", "x2"):
        code = int(value, 16)
    elif kind == "oct":
        code = int(value, 8)
    elif kind == "uname":
        try:
            return unicodedata.lookup(value), len(match.group())
        except KeyError:
            return None
    elif kind == "punct":
        return value, len(match.group())
    if code is None or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return None
    return chr(code), len(match.group())


_BACKSLASHES: Final = re.compile(r"\\+")


def _starts_of_escapes(text: str) -> list[int]:
    """Where an escape may start in ``text`` (a ``%``, ``&`` or backslash), in order."""
    found: list[int] = []
    for char in "%&\\":
        at = text.find(char)
        while at >= 0:
            found.append(at)
            at = text.find(char, at + 1)
    return sorted(found)


def _decode_once(mapped: Mapped) -> Mapped | None:
    """``mapped`` with each escape decoded once, or ``None`` when it holds none."""
    text = mapped.text
    edits: list[tuple[int, int, list[tuple[str, int, int]]]] = []  # begin, end, pieces
    end = 0
    for begin in _starts_of_escapes(text):
        if begin < end:
            continue  # inside an escape decoded already
        run = _BACKSLASHES.match(text, begin) if text.startswith("\\\\", begin) else None
        if run is not None:  # backslashes: one edit, pairs halved
            pairs = (run.end() - begin) // 2
            end = begin + 2 * pairs
            edits.append(
                (begin, end, [("\\", begin + 2 * i, begin + 2 * i + 2) for i in range(pairs)])
            )
            continue  # an odd one left escapes what follows: the next start
        match = _ESCAPE.match(text, begin)
        if match is None:
            continue
        if match.lastgroup == "pct":
            pieces = [(c, begin + lo, begin + hi) for c, lo, hi in _percent(match.group())]
            if all(hi - lo == 1 for _, lo, hi in pieces):
                continue  # no byte of it decodes
            end = match.end()
        else:
            decoded = _decoded(match)
            if decoded is None:
                continue
            value, size = decoded
            end = begin + size
            pieces = [(c, begin, end) for c in value]
        edits.append((begin, end, pieces))
    if not edits:
        return None
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    done = 0  # text[:done] is in out
    for begin, stop, pieces in edits:
        out.append(text[done:begin])
        starts.extend(mapped.starts[done:begin])
        ends.extend(mapped.ends[done:begin])
        for char, lo, hi in pieces:
            out.append(char)
            starts.append(mapped.starts[lo])
            ends.append(mapped.ends[hi - 1])
        done = stop
    out.append(text[done:])
    starts.extend(mapped.starts[done:])
    ends.extend(mapped.ends[done:])
    return Mapped("".join(out), starts, ends)


def decode_escapes(text: str | Mapped) -> Mapped:
    """``text`` with its escapes decoded (percent, HTML, JSON and Python, a backslash
    before punctuation), again until nothing changes or :data:`MAX_ROUNDS` rounds."""
    mapped = text if isinstance(text, Mapped) else Mapped.identity(text)
    for _ in range(MAX_ROUNDS):
        decoded = _decode_once(mapped)
        if decoded is None:
            break
        mapped = decoded
    return mapped


def _decode_text_once(text: str) -> str:
    out: list[str] = []
    done = 0  # text[:done] is in out
    for begin in _starts_of_escapes(text):
        if begin < done:
            continue  # inside an escape decoded already
        run = _BACKSLASHES.match(text, begin) if text.startswith("\\\\", begin) else None
        if run is not None:  # as in _decode_once
            pairs = (run.end() - begin) // 2
            out += [text[done:begin], "\\" * pairs]
            done = begin + 2 * pairs
            continue
        match = _ESCAPE.match(text, begin)
        if match is None:
            continue
        if match.lastgroup == "pct":
            out += [text[done:begin], "".join(c for c, _, _ in _percent(match.group()))]
            done = match.end()
            continue
        decoded = _decoded(match)
        if decoded is not None:
            out += [text[done:begin], decoded[0]]
            done = begin + decoded[1]
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def decode_text(text: str) -> str:
    """``decode_escapes(text).text``, without the offsets (faster)."""
    for _ in range(MAX_ROUNDS):
        decoded = _decode_text_once(text)
        if decoded == text:
            break
        text = decoded
    return text


# -- characters -----------------------------------------------------------------------


@functools.cache
def _prototypes() -> dict[str, str]:
    from asyncrecall.memory._confusables import PROTOTYPES  # 6,000 entries: on first use

    return PROTOTYPES


def skeleton(text: str) -> str:
    """The skeleton of ``text`` (UTS #39): NFD, each character through Unicode's
    confusables table, NFD again. Two strings are confusable when their skeletons are
    equal; it keeps case and marks (``skeleton(normalise(a))`` drops both)."""
    table = _prototypes()
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(table.get(c, c) for c in decomposed))


def _bare(text: str) -> str:
    """``text`` in NFKD without combining marks."""
    return "".join(
        c for c in unicodedata.normalize("NFKD", text) if unicodedata.category(c) not in _MARKS
    )


@functools.cache
def _ascii_by_skeleton() -> tuple[dict[str, str], dict[str, str]]:
    """Each ASCII character's skeleton to the character in lower case, the prototype
    itself first (``l`` rather than ``I``, ``1`` or ``|``), then a letter; and each
    capital letter's skeleton to the letter (``l`` to ``I``), for characters that are
    capitals themselves."""
    found: dict[str, str] = {}
    chars = [chr(cp) for cp in range(0x20, 0x7F)]
    chars.sort(key=lambda c: (skeleton(c) != c, not c.isalpha(), c.isupper()))
    for char in chars:
        found.setdefault(_bare(skeleton(char)), char.lower())
    capitals = {_bare(skeleton(c)): c.lower() for c in map(chr, range(0x41, 0x5B))}
    return found, capitals


def _as_ascii(char: str) -> str | None:
    """The ASCII ``char`` (not ASCII) is confusable with, in either case, or ``None``."""
    if unicodedata.category(char) == "Pd":
        return "-"
    by_skeleton, capitals = _ascii_by_skeleton()
    for variant in (char, char.upper()):
        bare = _bare(skeleton(variant))
        bare = _READ_AS.get(bare, bare)
        if variant.isupper() and bare in capitals:
            return capitals[bare]
        if bare in by_skeleton:
            return by_skeleton[bare]
        if bare and bare.isascii() and bare.isprintable():
            return bare.lower()
    return None


@functools.lru_cache(maxsize=1 << 16)
def fold(char: str) -> str:
    """What one character reads as (steps 2 to 4 of the module's docstring): ``""``
    when it is ignorable or a combining mark; its compatibility form when that is
    ASCII letters or digits (``"Ｓ"`` and ``"ſ"`` are ``"s"``, ``"ﬁ"`` is ``"fi"``);
    else the ASCII it looks like, when it looks like some (``"ѕ"`` and ``"Ν"`` are
    ``"s"`` and ``"n"``, ``"‹"`` is ``"<"``); else its compatibility form without marks,
    case-folded, each character not ASCII of it put through the same (``"é"`` is
    ``"e"``)."""
    if char.isascii():
        return char.lower() if char.isprintable() or char.isspace() else ""
    if is_ignorable(char) or unicodedata.category(char) in _MARKS:
        return ""
    compatible = _bare(char).casefold()
    if compatible.isascii() and compatible.isalnum():
        return compatible  # a form of ASCII letters or digits: "ｓ", "ſ", "ﬁ", "𝐬"
    looks = _as_ascii(char)
    if looks is not None:
        return looks
    out = []
    for c in _bare(_bare(char).casefold()):
        if c.isascii():
            out.append(c.lower() if c.isprintable() or c.isspace() else "")
        elif not is_ignorable(c):
            out.append(_as_ascii(c) or c)
    return "".join(out)


def normalise_mapped(text: str) -> Mapped:
    """:func:`normalise` of ``text`` before its last step (NFC), with, for each of its
    characters, the span of ``text`` it came from."""
    decoded = decode_escapes(text)
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for i, char in enumerate(decoded.text):
        folded = fold(char)
        if folded:
            out.append(folded)
            starts.extend([decoded.starts[i]] * len(folded))
            ends.extend([decoded.ends[i]] * len(folded))
    return Mapped("".join(out), starts, ends)


def normalise(text: str) -> str:
    """``text`` as a reader takes it (see the module's docstring): escapes decoded,
    ignorable characters dropped, compatibility forms and marks undone, case-folded,
    look-alikes of ASCII made ASCII, then NFC. A key to match on, not text to show."""
    decoded = decode_text(text)
    return unicodedata.normalize("NFC", "".join(map(fold, decoded)))

"""Where a memory's text came from: the user's own typed words, or text someone else wrote.

Pure functions, no I/O. Two questions, answered the same way in any language:

**Which parts of a user turn are someone else's text** (:func:`foreign_spans`). Told
apart by their shape, never by their words: a fenced or indented block; ``>`` lines; a
mail's header lines (``Key: value`` at the start of consecutive lines, then a blank
line) and all that follows them; runs of chat or log lines (``name: message``,
``[time] name: ...``, ``<name> ...``, ``[name] ...``); a message copied from a chat
app (its sender and a time alone on a line above it: ``Jonas Weber  14:05``); a
table (a rule line of dashes under a row with ``|``); rows of delimited values (CSV,
TSV: three lines or more with the same number of commas, tabs or semicolons, none
ending as a sentence does); a data literal on one line (``{...: ...}``, ``['...']``); a
data file's block (``key: |`` and the lines indented under it); everything after a
separator line (``-----``, ``____``, ``=====``, "----- Forwarded message -----", one mark said
three times or more: ``* * *``, ``·····``); everything after a short lead-in line that
ends with ``:``, an opening quotation mark, or any arrow or pointing sign ("translate
this:" in any language, "from the vendor 👇", "note →"); text between
quotation marks of any script (``« »``, ``„ “``, ``„ ”``, ``“ ”``, ``” ”``, ``「 」``,
``《 》``, ``״ ״``, ``" "``)
once it is longer than a remark; a paragraph too long to be typed around nothing; and
a paragraph with obfuscation signs (zero-width, tag or bidi control characters, a word
that mixes Latin, Cyrillic or Greek letters). The user's own words
(:func:`own_words`) are the turn minus those spans.

**Whether a write's text derives from a foreign text** (:func:`attribute`). Texts are
folded (:func:`fold`: NFKC, case folded, format characters removed) and cut into
language-independent units: Unicode word tokens, and character pairs in scripts written
without spaces (Chinese, Japanese, Thai, ...). A unit of the write is the user's
(*own*) when the user's own words hold it, or another form of one of their words: one
sharing most of its start (an ending changed) or most of its letter triples (a prefix
or an ending changed: ``use`` and ``uses``, an Arabic verb's person). A write derives
from a foreign text when, leaving out its own units,

- it copies a run of that text: :data:`RUN` consecutive units that stand contiguously
  in it, at least two of them not the user's (a pasted sentence, a URL, a reference
  token); or
- most of what it says beyond the user's words is found in that text, counting only
  units that are rare there (a word a long text uses beside many different words is the
  language's, not the attacker's; one repeated with the same neighbours stays rare).

A write whose text the user's own words state (most of its weight is own units, and it
derives from nothing) is *attested*.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from asyncrecall.memory._scripts import CJK, SPACELESS

__all__ = [
    "ATTEST_SHARE",
    "LONG_PARAGRAPH",
    "PASTED_RUN",
    "RUN",
    "Attribution",
    "Fingerprint",
    "ForeignText",
    "Span",
    "attribute",
    "fold",
    "foreign_spans",
    "own_words",
    "units",
]

#: Consecutive units a write must share with a foreign text to count as copied from it
#: (three: :meth:`Fingerprint.of` reads the runs off each unit's neighbours).
RUN: Final = 3
#: Consecutive units a user turn must share with a held text to count as a paste of it.
PASTED_RUN: Final = 8
#: The share of a write's weight that must be the user's own units for it to be attested.
ATTEST_SHARE: Final = 0.6
#: The share of a write's weight beyond the user's words found (rare) in a foreign text
#: that makes it derived from that text.
DERIVED_SHARE: Final = 0.5
#: A paragraph longer than this (characters) is taken for pasted text.
LONG_PARAGRAPH: Final = 1000
#: Quoted text (between quotation marks) longer than this is someone else's words.
QUOTE_CHARS: Final = 20
#: The weight of rare shared units below which a write is never derived by them alone.
_DERIVED_MIN: Final = 6
#: Two words are forms of one when they share a start this long (and most of each).
_STEM: Final = 4
#: Or when they share this share of their letter triples (Dice), both of at least
#: :data:`_MORPH` letters.
_FORM_SHARE: Final = 0.6
_MORPH: Final = 3
#: Quoted text in a script without spaces holding this many characters is someone else's.
_QUOTE_DENSE: Final = 8
#: A foreign text's unit used in more contexts than this is the language's, not a
#: payload's (:class:`Fingerprint`).
RARE_COUNT: Final = 3

# -- folding and units -------------------------------------------------------------------

# Scripts written without spaces between words: their units are character pairs.
_DENSE = SPACELESS + CJK
# Combining marks that belong inside words (``\w`` leaves them out).
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670"
    "\u06d6-\u06ed\u0900-\u0dff\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
)
_UNIT = re.compile(rf"[{_DENSE}]+|(?:[^\W_{_DENSE}]|[{_MARKS}])+")
_DENSE_RUN = re.compile(rf"[{_DENSE}]")
_DIGIT = re.compile(r"\d")
# Unicode's format characters (category Cf): zero-width, bidi controls, tags, ...
_FORMAT = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]"
)


# What else a reader does not see inside a word: the grapheme joiner, variation
# selectors (U+FE00-FE0F, U+E0100-E01EF).
_INVISIBLE = re.compile("[\u034f\ufe00-\ufe0f\U000e0100-\U000e01ef]")


@functools.cache
def _digits() -> dict[int, str]:
    """Every decimal digit of Unicode that is not ASCII, as its ASCII digit (NFKC keeps
    ``۴`` or ``๔`` as they are)."""
    return {
        cp: str(unicodedata.decimal(chr(cp)))
        for cp in range(0x80, 0x20000)
        if unicodedata.category(chr(cp)) == "Nd"
    }


def fold(text: str) -> str:
    """``text`` for comparison: NFKC, case folded, format characters (zero-width, bidi,
    tag), the grapheme joiner and variation selectors removed, every decimal digit
    ASCII."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    if folded.isascii():
        return folded
    return _INVISIBLE.sub("", _FORMAT.sub("", folded)).translate(_digits())


def units(text: str) -> list[str]:
    """The units of ``text`` (folded first), in order: word tokens, and character pairs
    of a run in a script without spaces (a single character when the run is one)."""
    out: list[str] = []
    for match in _UNIT.finditer(fold(text)):
        token = match.group()
        if _DENSE_RUN.match(token):
            if len(token) == 1:
                out.append(token)
            else:
                out.extend(token[i : i + 2] for i in range(len(token) - 1))
        else:
            out.append(token)
    return out


def _weight(unit: str) -> int:
    """How much a unit says: a character pair counts as two letters; a word its length,
    up to 10; a word of one or two letters almost nothing."""
    if _DENSE_RUN.match(unit):
        return 2
    if len(unit) <= 2 and not _DIGIT.search(unit):
        return 0
    return min(len(unit), 10)


# -- fingerprints ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ForeignText:
    """Text the agent was shown that the user did not type, and what it was (``label``:
    ``read_file(README.md)``, "a quoted block of the user's turn", ...)."""

    label: str
    text: str


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What :func:`attribute` needs of a foreign text: in how many different contexts
    each unit occurs, and the runs of :data:`RUN` consecutive units (hashed). Built once
    per text.

    A unit's ``counts`` are its distinct contexts (the units before and after it), not
    its occurrences: a word the language uses stands beside many others, while a
    payload repeated row after row (rows that differ by an emoji, a flag, a bullet)
    keeps the same neighbours, so repeating it does not make it common."""

    label: str
    counts: Counter[str]
    runs: frozenset[int]

    @classmethod
    def of(cls, foreign: ForeignText) -> Fingerprint:
        seq = units(foreign.text)
        around = ["", *seq, ""]  # no unit is empty: the text's two ends
        # Each unit with its neighbours: its contexts, and (away from the ends) the
        # text's runs of three (RUN) units.
        contexts = set(zip(around, seq, around[2:], strict=False))
        runs = frozenset(hash(c) for c in contexts if c[0] and c[2])
        return cls(foreign.label, Counter(unit for _, unit, _ in contexts), runs)


@dataclass(frozen=True, slots=True)
class _Own:
    """The user's own words as units, the starts of their longer words, and the
    letter triples of every word of three letters or more (:meth:`holds`)."""

    units: frozenset[str]
    starts: frozenset[str]
    #: Each letter triple, with the own words that hold it.
    triples: dict[str, frozenset[str]]

    @classmethod
    def of(cls, texts: Iterable[str], *, copies: Sequence[str] = ()) -> _Own:
        """The units of ``texts``, but for those in a run of :data:`PASTED_RUN` units
        that one of ``copies`` holds too (a paste of it, not a restatement)."""
        pasted: set[tuple[str, ...]] = set()
        for copy in copies:
            seq = units(copy)
            pasted.update(tuple(seq[i : i + PASTED_RUN]) for i in range(len(seq) - PASTED_RUN + 1))
        found: set[str] = set()
        for text in texts:
            seq = units(text)
            copied = [False] * len(seq)
            for i in range(len(seq) - PASTED_RUN + 1):
                if tuple(seq[i : i + PASTED_RUN]) in pasted:
                    copied[i : i + PASTED_RUN] = [True] * PASTED_RUN
            found.update(u for u, c in zip(seq, copied, strict=True) if not c)
        starts = {
            word[:k]
            for word in found
            if len(word) >= _STEM and not _DENSE_RUN.match(word)
            for k in range(max(_STEM, math.ceil(0.7 * len(word))), len(word) + 1)
        }
        triples: dict[str, set[str]] = {}
        for word in found:
            for triple in _triples(word):
                triples.setdefault(triple, set()).add(word)
        frozen = {triple: frozenset(words) for triple, words in triples.items()}
        return cls(frozenset(found), frozenset(starts), frozen)

    def holds(self, unit: str) -> bool:
        """Whether ``unit`` is one of the user's words, or another form of one: it
        shares most of its start with it (an ending changed), or most of its letter
        triples (a prefix or an ending changed: ``use``/``uses``, an Arabic verb's
        person or article)."""
        if unit in self.units:
            return True
        if len(unit) < _MORPH or _DENSE_RUN.match(unit):
            return False
        low = max(_STEM, math.ceil(0.7 * len(unit)))
        if any(unit[:k] in self.starts for k in range(low, len(unit) + 1)):
            return True
        mine = _triples(unit)
        near: Counter[str] = Counter()
        for triple in mine:
            near.update(self.triples.get(triple, ()))
        return any(2 * shared >= _FORM_SHARE * (len(mine) + len(_triples(word)))
                   for word, shared in near.items())  # fmt: skip


def _triples(word: str) -> frozenset[str]:
    """The letter triples of a word of :data:`_MORPH` letters or more (none otherwise,
    nor for a unit of a script written without spaces)."""
    if len(word) < _MORPH or _DENSE_RUN.match(word) or _DIGIT.search(word):
        return frozenset()
    return frozenset(word[i : i + 3] for i in range(len(word) - 2))


@dataclass(frozen=True, slots=True)
class Attribution:
    """What :func:`attribute` found: ``source``, the label of the foreign text the write
    derives from (``None``: none), ``why`` (copied run or shared words), and whether
    the user's own words state the write (``attested``)."""

    source: str | None = None
    why: str = ""
    attested: bool = False
    own_share: float = 0.0
    evidence: tuple[str, ...] = field(default=(), repr=False)


def attribute(
    text: str,
    *,
    own: Iterable[str],
    foreign: Sequence[Fingerprint | ForeignText],
    not_own: Sequence[str] = (),
) -> Attribution:
    """Where ``text`` (a write's name, description and body) came from: the user's own
    words ``own`` or one of ``foreign`` (see the module doc). What ``own`` pastes of a
    ``not_own`` text (runs of :data:`PASTED_RUN` units) is not the user's: a held
    memory's text pasted back into a turn is still that memory's, while the user
    saying it in words of their own is theirs."""
    seq = units(text)
    mine = _Own.of(own, copies=not_own)
    is_own = [mine.holds(u) for u in seq]
    distinct = {u: w for u, w in ((u, _weight(u)) for u in seq)}
    total = sum(distinct.values())
    own_weight = sum(w for u, w in distinct.items() if mine.holds(u))
    beyond = total - own_weight
    own_share = own_weight / total if total else 1.0
    needed = max(_DERIVED_MIN, DERIVED_SHARE * beyond)
    found: dict[str, list[str]] = {}  # each rare shared unit, with the texts it is in
    for item in foreign:
        print_ = item if isinstance(item, Fingerprint) else Fingerprint.of(item)
        copied = _copied_run(seq, is_own, print_)
        if copied is not None:
            return Attribution(print_.label, "copies a run of it", False, own_share, copied)
        rare = [
            u
            for u, w in distinct.items()
            if w and not mine.holds(u) and 0 < print_.counts.get(u, 0) <= RARE_COUNT
        ]
        if beyond and sum(distinct[u] for u in rare) >= needed:
            return Attribution(
                print_.label, "says what it says beyond the user's words", False, own_share,
                tuple(rare),
            )  # fmt: skip
        for unit in rare:
            found.setdefault(unit, []).append(print_.label)
    # Taken a little from each of several texts (a payload split across files).
    if beyond and sum(distinct[u] for u in found) >= needed:
        labels = list(dict.fromkeys(label for where in found.values() for label in where))
        return Attribution(
            " and ".join(labels), "says what it says beyond the user's words, together",
            False, own_share, tuple(found),
        )  # fmt: skip
    return Attribution(None, "", own_share >= ATTEST_SHARE and total > 0, own_share)


def _copied_run(
    seq: Sequence[str], is_own: Sequence[bool], foreign: Fingerprint
) -> tuple[str, ...] | None:
    """The first run of :data:`RUN` units of ``seq`` that stands in ``foreign``, at least
    two of them not the user's and saying something (weight), or ``None``."""
    for i in range(len(seq) - RUN + 1):
        window = seq[i : i + RUN]
        theirs = [u for u, o in zip(window, is_own[i : i + RUN], strict=True) if not o]
        if len(theirs) < 2 or sum(_weight(u) for u in theirs) < 5:
            continue
        if all(foreign.counts.get(u, 0) > RARE_COUNT for u in theirs):
            continue  # common words of that text in a common order
        if hash(tuple(window)) in foreign.runs:
            return tuple(window)
    return None


# -- someone else's text in a user turn --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    """A part of a user turn that is someone else's text: ``[start, end)`` and ``kind``."""

    start: int
    end: int
    kind: str


_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_INDENTED = re.compile(r"^(?: {4}|\t)\S")
_QUOTED_LINE = re.compile(r"^[ \t]*[>|]")
# A mail header: one word (letters, maybe a hyphen) then ':' and a value.
_HEADER = re.compile(r"^[ \t]*[^\W\d_](?:[^\W_]|-){0,23}[ \t]*[:：][ \t]*\S")
# A chat or log line: a name or time (up to four words) then ':' and a message; or a
# name in angle brackets (IRC) or square brackets (two characters or more: not a
# check box) then the message.
_SPEAKER = re.compile(
    r"^[ \t]*(?:[\[(][^\])\n]{1,40}[\])][ \t]*)?[^\s:：][^:：\n]{0,40}[:：][ \t]*\S"
    r"|^[ \t]*<[^<>\s][^<>\n]{0,39}>[ \t]*\S|^[ \t]*\[[^\]\n]{2,40}\][ \t]*[^\s(\[]"
)
# A sender and a time alone on a line, as chat apps show a message's header: one to
# four names, then a time (``14:05``, ``2:05 PM``, ``[09:12]``), nothing after it
# (:func:`_stamped`: each name starts with a capital, or in a script without case).
_STAMPED = re.compile(
    r"^[ \t]*((?:[^\W\d_][^\s:：\d]{0,29}[ \t]+){1,4})"
    r"\[?\d{1,2}[:.]\d{2}(?:[ \t]?[AaPp]\.?[Mm]\.?)?\]?[ \t]*$"
)
_SEPARATOR = re.compile(r"^[ \t]*([-_=~—–─━═＿])\1{2,}")
# A lead-in ends with ':' or an opening quotation mark (or an arrow or pointing sign:
# :func:`_points_on`).
_LEAD_IN = re.compile('[:：«„“‘"「『‹《]$')
# A table's rule line (``---|:--:``), with or without its outer pipes.
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(?:\|[ \t]*:?-{2,}:?[ \t]*)+\|?[ \t]*$")
# A data literal on one line: a mapping or a list of quoted strings or pairs.
_DATA_LINE = re.compile(r"^[ \t]*(?:\{.*[:=].*\}|\[.*[\"'].*\])[ \t,;]*$")
# A YAML key introducing a block of text (``note: |``), its lines indented below it.
_BLOCK_KEY = re.compile(r"^[ \t]*[^\s:：#][^:：\n]{0,40}:[ \t]*[|>][+-]?[ \t]*$")
# Characters a reader does not see: zero-width space and joiners' kin, soft hyphen,
# grapheme joiner, Hangul fillers, invisible operators, bidi controls, deprecated format
# characters, annotation marks, tags (the joiners and variation selectors that scripts
# and emoji need are not here).
_HIDDEN = re.compile(
    "[\u00ad\u034f\u115f\u1160\u180e\u200b\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\u3164\ufeff\uffa0\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
)
_JOINER_IN_LATIN = re.compile("[A-Za-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff][\u200c\u200d]\\w")
_LATIN = "A-Za-z\u00c0-\u024f"
_GREEK = "\u0370-\u03ff"
_CYRILLIC = "\u0400-\u052f"
# Two letters side by side from different look-alike scripts (Latin, Greek, Cyrillic):
# a word that mixes them has such a pair.
_MIXED = re.compile(
    "|".join(f"[{a}][{b}]" for a, b in itertools.permutations((_LATIN, _GREEK, _CYRILLIC), 2))
)
_LEAD_IN_CHARS = 160


@functools.cache
def _turned() -> re.Pattern[str]:
    """Latin letters turned upside down (Unicode's "LATIN ... LETTER TURNED ...": ɐ ǝ ɥ ɯ
    ɹ ʇ ʌ ʍ ʎ ʞ ...), with which text is written upside down (read from Unicode's names
    on first use, not at import)."""
    prefixes = ("LATIN SMALL LETTER TURNED", "LATIN CAPITAL LETTER TURNED")
    found = [
        chr(cp) for cp in range(0x100, 0x2000) if unicodedata.name(chr(cp), "").startswith(prefixes)
    ]
    return re.compile(f"[{''.join(found)}]")


# Full-width forms of ASCII letters, digits and punctuation (U+FF01-U+FF5E).
_FULL_WIDTH = re.compile("[\uff01-\uff5e]")


def _lines(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, line)`` of every line, ``end`` past its line break."""
    out: list[tuple[int, int, str]] = []
    start = 0
    for line in text.splitlines(keepends=True):
        out.append((start, start + len(line), line.rstrip("\r\n")))
        start += len(line)
    return out


def _obfuscated(text: str) -> bool:
    """Hidden characters (zero-width, bidi controls, tags), letters left decomposed into
    base and combining mark, a word that mixes look-alike scripts, letters turned upside
    down (two kinds or more), or full-width forms in text with no CJK character (they
    are how CJK text is typed; elsewhere they hide words from the rules): no one types
    these by hand."""
    if _HIDDEN.search(text) or _JOINER_IN_LATIN.search(text):
        return True
    if not text.isascii() and not unicodedata.is_normalized("NFC", text):
        return True  # letters left decomposed: typed text is composed
    if _FULL_WIDTH.search(text) and not _DENSE_RUN.search(text):
        return True
    if not text.isascii() and len(set(_turned().findall(text))) >= 2:
        return True  # text turned upside down ("ɥsnd-ǝɔɹoɟ")
    return _MIXED.search(text) is not None


def foreign_spans(turn: str) -> tuple[Span, ...]:
    """The parts of a user turn that are someone else's text (see the module doc), in
    order, not overlapping."""
    lines = _lines(turn)
    found: list[Span] = []
    i = 0
    n = len(lines)
    while i < n:
        start, end, line = lines[i]
        stripped = line.strip()
        opened = _FENCE.match(line)
        if opened:
            # Closed by a fence of the same mark at least as long (a longer fence can
            # hold a shorter one: a paste's block holding code).
            closing = re.compile(rf"^[ \t]*{re.escape(opened[1][0])}{{{len(opened[1])},}}[ \t]*$")
            j = i + 1
            while j < n and not closing.match(lines[j][2]):
                j += 1
            found.append(Span(start, lines[min(j, n - 1)][1], "a fenced block"))
            i = j + 1
            continue
        if "|" in line and i + 1 < n and _TABLE_RULE.match(lines[i + 1][2]):
            j = _run(lines, i + 2, lambda s: "|" in s)
            found.append(Span(start, lines[j - 1][1], "a table"))
            i = j
            continue
        if _DATA_LINE.match(line):
            found.append(Span(start, end, "a data literal"))
            i += 1
            continue
        j = _delimited(lines, i)
        if j > i:
            found.append(Span(start, lines[j - 1][1], "rows of delimited values"))
            i = j
            continue
        if _BLOCK_KEY.match(line) and i + 1 < n and lines[i + 1][2][:1] in (" ", "\t"):
            j = _run(lines, i + 1, lambda s: s[:1] in (" ", "\t") or not s.strip())
            found.append(Span(start, lines[j - 1][1], "a block of a data file"))
            i = j
            continue
        if (_SEPARATOR.match(line) or _rule_line(stripped)) and i + 1 < n:
            found.append(Span(start, len(turn), "text after a separator line"))
            break
        if _QUOTED_LINE.match(line):
            j = _run(lines, i, lambda s: bool(_QUOTED_LINE.match(s)))
            found.append(Span(start, lines[j - 1][1], "quoted lines"))
            i = j
            continue
        if _INDENTED.match(line):
            j = _run(lines, i, lambda s: bool(_INDENTED.match(s)) or not s.strip())
            if j - i >= 2:
                found.append(Span(start, lines[j - 1][1], "an indented block"))
                i = j
                continue
        if _HEADER.match(line):
            j = _run(lines, i, lambda s: bool(_HEADER.match(s)))
            if j - i >= 2 and (j == n or not lines[j][2].strip()):
                found.append(Span(start, len(turn), "a mail (header lines and what follows)"))
                break
        if _stamped(line) and i + 1 < n and lines[i + 1][2].strip():
            # A message copied from a chat app: its sender and time on a line of their
            # own, then what was sent, to the next blank line.
            j = _run(lines, i + 1, lambda s: bool(s.strip()))
            found.append(Span(start, lines[j - 1][1], "a chat message (sender and time)"))
            i = j
            continue
        if _SPEAKER.match(line):
            j = _run(lines, i, lambda s: bool(_SPEAKER.match(s)))
            if j - i >= 2:
                j = _run(lines, j, lambda s: bool(s.strip()))  # continuation lines
                found.append(Span(start, lines[j - 1][1], "chat or log lines"))
                i = j
                continue
        if (
            stripped
            and len(stripped) <= _LEAD_IN_CHARS
            and (_LEAD_IN.search(stripped) or _points_on(stripped))
            and any(rest[2].strip() for rest in lines[i + 1 :])
        ):
            # What follows is someone else's: a block of its own shape is found as that
            # block (the user's words after it stay theirs), anything else to the end.
            after = next(k for k in range(i + 1, n) if lines[k][2].strip())
            if not _starts_block(lines, after):
                found.append(Span(end, len(turn), "text after a lead-in line"))
                break
        i += 1
    found.extend(_paragraph_spans(turn, found))
    found.extend(_quotations(turn, found))
    found.extend(_inner_lead_ins(turn, found))
    return _merged(found)


# A lead-in's colon: ':' before white space, or the full-width one (a time, 9:30, and a
# link, https://, have none).
_INLINE_LEAD_IN = re.compile(r":(?=\s)|：")


def _rule_line(stripped: str) -> bool:
    """A line of one punctuation mark or symbol said three times or more, spaced or not
    (``***``, ``* * *``, ``·····``, ``＝＝＝``): a separator (dots aside: a pause)."""
    marks = "".join(stripped.split())
    return (
        len(marks) >= 3
        and len(set(marks)) == 1
        and marks[0] != "."
        and unicodedata.category(marks[0])[0] in "PS"
    )


def _points_on(stripped: str) -> bool:
    """Whether a line ends with an arrow or a pointing sign of any kind (``⇓``, ``👉``,
    ``🔽``: Unicode names them so), an emoji's variation selector aside."""
    last = stripped.rstrip("\ufe0e\ufe0f")[-1:]
    if not last or unicodedata.category(last)[0] != "S":
        return False
    name = unicodedata.name(last, "")
    return "ARROW" in name or "POINTING" in name


def _inner_lead_ins(turn: str, found: Sequence[Span]) -> list[Span]:
    """In a paragraph, the text after a second lead-in colon: a message relayed or pasted
    inline brings its own lead-in after the user's ("Forwarded from X: note this: ...")."""
    out: list[Span] = []
    for start, end in _paragraphs(turn):
        colons = [m.end() for m in _INLINE_LEAD_IN.finditer(turn, start, end)]
        if len(colons) < 2:
            continue
        at = colons[1]
        if turn[at:end].strip() and not any(s.start <= at < s.end for s in found):
            out.append(Span(at, end, "text after a lead-in inside a lead-in"))
    return out


def _starts_block(lines: Sequence[tuple[int, int, str]], i: int) -> bool:
    """Whether line ``i`` opens a block :func:`foreign_spans` finds by its shape."""
    line = lines[i][2]
    if _FENCE.match(line) or _QUOTED_LINE.match(line):
        return True
    nxt = lines[i + 1][2] if i + 1 < len(lines) else ""
    if ("|" in line and _TABLE_RULE.match(nxt)) or _DATA_LINE.match(line):
        return True
    if (_BLOCK_KEY.match(line) and nxt[:1] in (" ", "\t")) or _delimited(lines, i) > i:
        return True
    return any(p.match(line) and p.match(nxt) for p in (_INDENTED, _HEADER, _SPEAKER))


def _stamped(line: str) -> bool:
    """Whether ``line`` is a chat message's header (:data:`_STAMPED`): no name in it
    starts with a lower-case letter, in any script ("środa 9:30" is a note)."""
    found = _STAMPED.match(line)
    return found is not None and not any(name[0].islower() for name in found[1].split())


#: Rows of delimited values (CSV, TSV): at least this many lines in a row with the
#: same number of the same delimiter, two or more, none ending as a sentence does.
_DELIMITED_ROWS: Final = 3
_SENTENCE_END = re.compile(r"[.!?。！？।]\s*$")


def _delimited(lines: Sequence[tuple[int, int, str]], i: int) -> int:
    """The index past the rows of delimited values that start at line ``i`` (``i``
    when none do)."""
    line = lines[i][2]
    for mark in (",", "\t", ";"):
        count = line.count(mark)
        if count < 2:
            continue
        j = _run(
            lines,
            i,
            lambda s, m=mark, n=count: s.count(m) == n and not _SENTENCE_END.search(s),
        )
        if j - i >= _DELIMITED_ROWS:
            return j
    return i


def _run(lines: Sequence[tuple[int, int, str]], i: int, test: object) -> int:
    """The index past the run of lines from ``i`` that pass ``test``."""
    assert callable(test)
    j = i
    while j < len(lines) and test(lines[j][2]):
        j += 1
    return j


def _paragraph_spans(turn: str, found: Sequence[Span]) -> list[Span]:
    """Paragraphs that are too long, or obfuscated, and not already inside a span."""
    out: list[Span] = []
    for start, end in _paragraphs(turn):
        if any(s.start <= start and end <= s.end for s in found):
            continue
        paragraph = turn[start:end]
        if _obfuscated(paragraph):
            out.append(Span(start, end, "obfuscated text"))
        elif len(paragraph) > LONG_PARAGRAPH:
            out.append(Span(start, end, "a long pasted paragraph"))
    return out


_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")


def _paragraphs(turn: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each paragraph (text between blank lines), stripped."""
    at = 0
    for match in (*_BLANK_LINE.finditer(turn), None):
        end = match.start() if match is not None else len(turn)
        chunk = turn[at:end]
        if chunk.strip():
            lead = len(chunk) - len(chunk.lstrip())
            yield at + lead, at + len(chunk.rstrip())
        if match is not None:
            at = match.end()


def _quotations(turn: str, found: Sequence[Span]) -> list[Span]:
    out: list[Span] = []
    for start, end in _quoted(turn):
        inner = turn[start + 1 : end - 1]
        dense = len(_DENSE_RUN.findall(inner))
        if len(inner.strip()) < QUOTE_CHARS and dense < _QUOTE_DENSE:
            continue
        if not any(s.start <= start and end <= s.end for s in found):
            out.append(Span(start, end, "quoted text"))
    return out


#: Quotation marks whose opening and closing marks differ, so they nest.
# Each opening quotation mark and the marks that close it (German „…“, Polish „…”).
_PAIRS: Final = {
    "«": "»", "„": "“”", "“": "”", "‘": "’", "「": "」", "『": "』", "‹": "›", "《": "》",
    "〈": "〉",
}  # fmt: skip
# Marks that open and close alike (Swedish ”…”, Hebrew ״…״), and French »…« inverted.
_PLAIN_QUOTE = re.compile(r"\"[^\"\n]+\"|”[^”\n]+”|״[^״\n]+״|»[^«]+«")


def _quoted(turn: str) -> Iterator[tuple[int, int]]:
    """``[start, end)`` of each outermost quotation: an opening mark to its own closing
    mark, counting the pairs opened inside it (a name quoted within a relayed message
    does not end the message), then the quotations of marks that do not nest."""
    stack: list[tuple[str, int]] = []
    spans: list[tuple[int, int]] = []
    for i, char in enumerate(turn):
        if (
            stack
            and char in _PAIRS[stack[-1][0]]
            and not (
                char == "“" and stack[-1][0] == "“"  # “ closes „ but opens a pair of its own
            )
        ):
            _, at = stack.pop()
            if not stack:
                spans.append((at, i + 1))
        elif char in _PAIRS:
            stack.append((char, i))
    covered = [(a, b) for a, b in spans]
    for match in _PLAIN_QUOTE.finditer(turn):
        a, b = match.span()
        if not any(x <= a and b <= y for x, y in covered):
            spans.append((a, b))
    return iter(sorted(spans))


def _merged(spans: Iterable[Span]) -> tuple[Span, ...]:
    out: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if out and span.start < out[-1].end:
            last = out[-1]
            out[-1] = Span(last.start, max(last.end, span.end), last.kind)
        else:
            out.append(span)
    return tuple(out)


def own_words(turn: str, spans: Sequence[Span] | None = None) -> str:
    """``turn`` minus the spans of someone else's text (each replaced by a line break)."""
    spans = foreign_spans(turn) if spans is None else spans
    parts: list[str] = []
    at = 0
    for span in spans:
        parts.append(turn[at : span.start])
        at = span.end
    parts.append(turn[at:])
    return "\n".join(parts)

"""Forged wrapper tags, generated class by class from Unicode's tables and the escape
encoders: every look-alike a reader takes for ``<system-reminder>`` or
``</system-reminder>``.

Classes (each a list of whole tags, opening and closing alternately):

- ``letters``: each letter of the tag name replaced, all its occurrences, by each
  character Unicode's confusables table holds for it in either case (Cyrillic,
  Greek, Armenian, Cherokee, mathematical letters, ...) or whose compatibility form
  (NFKC) is it (full-width, circled, mathematical alphanumerics);
- ``brackets``, ``slashes``, ``dashes``: the ``<``, ``>``, ``/`` and ``-`` the same way,
  and every dash punctuation character (category Pd) as the separator;
- ``ignorables``: every default-ignorable code point and format character (zero-width,
  bidi controls, variation selectors, tag characters U+E0000-E0FFF, Hangul fillers,
  ...), sixteen at a time between the tag's characters;
- ``marks``: every combining mark (Mn, Me), fifteen at a time on the tag's characters;
- ``escapes``: percent (one level and two), HTML (named, decimal, hexadecimal, with and
  without ``;``, nested in ``&amp;``), JSON and Python (``\\u003c``, ``\\x3c``, ``\\074``,
  ``\\U0000003c``, ``\\N{...}``, ``\\/``, doubled backslashes), Markdown (``\\<``), and
  escapes of look-alikes.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable

from asyncrecall.memory._confusables import PROTOTYPES
from asyncrecall.memory._normalise import is_ignorable

__all__ = ["CLASSES", "WORD", "tag"]

WORD = "system-reminder"


def tag(name: str = WORD, *, closing: bool, lt: str = "<", slash: str = "/", gt: str = ">") -> str:
    return f"{lt}{slash if closing else ''}{name}{gt}"


def _skeleton(text: str) -> str:
    nfd = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(PROTOTYPES.get(c, c) for c in nfd))


@functools.cache
def _compatible() -> dict[str, list[str]]:
    """Each NFKC form of one or two characters, with the characters that have it."""
    found: dict[str, list[str]] = {}
    for cp in range(0x80, 0x110000):
        char = chr(cp)
        if unicodedata.decomposition(char).startswith("<"):
            found.setdefault(unicodedata.normalize("NFKC", char), []).append(char)
    return found


def look_alikes(ascii_char: str) -> list[str]:
    """Characters not ASCII that read as ``ascii_char`` (either case): the same
    skeleton in Unicode's table, or the same compatibility form."""
    targets = {_skeleton(ascii_char), _skeleton(ascii_char.upper())}
    found = {
        c for c, proto in PROTOTYPES.items() if not c.isascii() and _skeleton(proto) in targets
    }
    for form in {ascii_char, ascii_char.upper()}:
        found.update(_compatible().get(form, []))
    return sorted(found)


@functools.cache
def _assigned() -> list[str]:
    """Every assigned character that is not ASCII (and the private-use ones aside)."""
    return [
        c
        for c in map(chr, range(0x80, 0x110000))
        if unicodedata.category(c) not in ("Cn", "Co", "Cs")
    ]


def _every(predicate: Callable[[str], bool]) -> list[str]:
    return [c for c in _assigned() if predicate(c)]


def _interleave(text: str, fillers: list[str]) -> str:
    """``text`` with ``fillers`` put after its characters, one each, in turn."""
    out = []
    for i, char in enumerate(text):
        out.append(char)
        if i < len(fillers):
            out.append(fillers[i])
    return "".join(out)


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _letters() -> list[str]:
    variants = []
    for letter in sorted(set(WORD) - {"-"}):
        for i, alike in enumerate(look_alikes(letter)):
            variants.append(tag(WORD.replace(letter, alike), closing=i % 2 == 1))
    return variants


def _brackets() -> list[str]:
    opens, closes = look_alikes("<"), look_alikes(">")
    variants = [tag(closing=i % 2 == 1, lt=lt) for i, lt in enumerate(opens)]
    variants += [
        tag(closing=i % 2 == 1, lt=opens[i % len(opens)], gt=gt) for i, gt in enumerate(closes)
    ]
    return variants


def _slashes() -> list[str]:
    return [tag(closing=True, slash=s) for s in look_alikes("/")]


def _dashes() -> list[str]:
    dashes = sorted(set(look_alikes("-")) | set(_every(lambda c: unicodedata.category(c) == "Pd")))
    return [tag(WORD.replace("-", d), closing=i % 2 == 1) for i, d in enumerate(dashes)]


def _ignorables() -> list[str]:
    reserved = [0x2065, *range(0xFFF0, 0xFFF9), *range(0xE0000, 0xE1000)]  # unassigned ones
    unassigned = [chr(cp) for cp in reserved]
    invisible = sorted({*_every(is_ignorable), *unassigned})
    full = "</" + WORD + ">"
    return [
        _interleave(full if i % 2 else full.replace("/", ""), chunk)
        for i, chunk in enumerate(_chunks(invisible, 16))
    ]


def _marks() -> list[str]:
    marks = _every(lambda c: unicodedata.category(c) in ("Mn", "Me"))
    return [
        tag(_interleave(WORD, chunk), closing=i % 2 == 1)
        for i, chunk in enumerate(_chunks(marks, len(WORD)))
    ]


def _percent(text: str, lower: bool = False) -> str:
    out = "".join(f"%{b:02X}" for b in text.encode("utf-8"))
    return out.lower() if lower else out


def _escapes() -> list[str]:
    def each(encode: Callable[[str], str], chars: str = "</>") -> Callable[[str], str]:
        return lambda text: "".join(encode(c) if c in chars else c for c in text)

    def all_chars(encode: Callable[[str], str]) -> Callable[[str], str]:
        return each(encode, chars="".join({*("</>" + WORD)}))

    named = {"<": "&lt;", ">": "&gt;", "/": "&sol;"}
    encoders: list[Callable[[str], str]] = [
        each(_percent),
        each(lambda c: _percent(c, lower=True)),
        all_chars(_percent),
        each(lambda c: _percent(_percent(c))),
        each(lambda c: _percent(_percent(_percent(c)))),
        each(lambda c: named[c]),
        each(lambda c: named[c].upper(), chars="<>"),
        each(lambda c: named[c].rstrip(";"), chars="<>"),
        each(lambda c: f"&#{ord(c)};"),
        each(lambda c: f"&#00{ord(c)};"),
        each(lambda c: f"&#{ord(c)}", chars="<"),
        each(lambda c: f"&#x{ord(c):x};"),
        each(lambda c: f"&#X{ord(c):X};"),
        all_chars(lambda c: f"&#{ord(c)};"),
        each(lambda c: "&amp;" + named[c][1:]),
        each(lambda c: f"&amp;#{ord(c)};"),
        each(lambda c: f"\\u{ord(c):04x}"),
        each(lambda c: f"\\u{ord(c):04X}"),
        all_chars(lambda c: f"\\u{ord(c):04x}"),
        each(lambda c: f"\\\\u{ord(c):04x}"),
        each(lambda c: f"\\x{ord(c):02x}"),
        each(lambda c: f"\\{ord(c):03o}"),
        each(lambda c: f"\\U{ord(c):08x}"),
        each(lambda c: "\\N{" + unicodedata.name(c) + "}"),
        each(lambda c: f"\\{c}"),
        each(lambda c: _percent(f"&#{ord(c)};")),
        each(lambda c: f"&#92;u{ord(c):04x}"),
        each(lambda c: _percent("\uff1c" if c == "<" else c)),
        each(lambda c: "&#65308;" if c == "<" else c),
        each(lambda c: "\\u2039" if c == "<" else c),
    ]
    variants = []
    for i, encode in enumerate(encoders):
        variants += [encode(tag(closing=True)), encode(tag(closing=False))]
        variants.append(encode(tag(WORD.replace("s", "\u0455"), closing=i % 2 == 1)))
    variants.append(tag(WORD.replace("s", "&#1109;"), closing=True))
    variants.append(tag(WORD.replace("e", "\\u0435"), closing=False))
    variants.append(tag(WORD.replace("y", "%D1%83"), closing=True))
    return variants


CLASSES: dict[str, Callable[[], list[str]]] = {
    name: functools.cache(make)
    for name, make in {
        "letters": _letters,
        "brackets": _brackets,
        "slashes": _slashes,
        "dashes": _dashes,
        "ignorables": _ignorables,
        "marks": _marks,
        "escapes": _escapes,
    }.items()
}

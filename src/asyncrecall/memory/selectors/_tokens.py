"""The lexical selector's tokens, in any language (issue 24, point 2).

Every text is first normalised: NFKC (full-width ``ＡＢＣ１２３`` is ``ABC123``,
half-width katakana are full-width, ligatures are letters) and case-folded (``Straße``
is ``strasse``). Pure ASCII text, by far the most common, is only lower-cased (the same
thing, cheaper). Then:

- **Chinese, Japanese, Korean** have no spaces between words: a run of Han, kana or
  Hangul is cut where the script changes, its hiragana dropped (Japanese particles and
  endings: ``設定ファイルを開く`` -> ``設定``, ``ファ``, ``ァイ``, ``イル``,
  ``開``), its Han cut at function and question words and pronouns as at a space
  (``我的车什么时候要年检`` -> ``车``, ``年检``), and each piece becomes overlapping
  character bigrams (``数据库`` -> ``数据``, ``据库``), as Lucene's CJK analyser and Qwen
  Code do; a one-character piece is a unigram (``车``), and so is the last character of
  a Han piece right before hiragana (a verb's stem: ``読んで`` -> ``読``).
- **Cyrillic** words: the Snowball Russian stemmer, Russian stop words, ``ё`` as ``е``.
- **Latin-script** words: the stop words and Snowball stemmer of the text's language
  (English, French, German, Spanish, Italian, Dutch, Portuguese, Polish or Turkish),
  chosen from its stop words (``de``, ``le``, ``est`` ... against ``the``, ``of``,
  ``is`` ..., ``los``, ``della``, ``het``, ``não``, ``się``, ``için`` ...) and, failing
  those, the letters it holds most of a language's (``é``, ``ß``, ``ñ``, ``ò``, ``ã``,
  ``ł``, ``ı`` ...); the later languages' stop words that English writes as words of its
  own (``come``, ``per``, ``door``, ``AI``; ``to``, ``my``, ``her``) do not count towards
  them, so an English text is not read as Italian, Dutch or Polish. The word is stemmed
  without its accents (``réunions`` -> ``reunion``, ``Größe`` -> ``gross``, ``niños`` ->
  ``nin``), so a query typed without them still matches.
- Other scripts (Greek, Arabic, Hebrew, Devanagari...): the normalised word, unstemmed.

English in ASCII tokenises exactly as before this module (the Snowball English stemmer,
the same stop words, the same words): the LoCoMo figures do not move.

A document's Latin-script language is one per document (:func:`analyse`). A query is
short and may carry no stop words, so it is read in the languages of the documents it
is matched against (:func:`analyse_query`): each of its Latin-script words carries its
stem in each of them, the query's own language first, and the selector keeps the first
that some document holds. A folder of English notes thus reads every query as English
(as before); a French folder reads "docker compose" the French way, as its notes were.
A memory's name and description are short, their language seldom told:
:func:`field_terms` stems their words in English, French and German and in the
language they are told to be in, :func:`field_query` a query's in its own and in those
three.
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeAlias

from asyncrecall.memory.selectors._words import (
    ACCENTS,
    CALENDAR,
    HAN_STOP_CHARACTERS,
    HAN_STOP_WORDS,
    STOP_CYRILLIC,
    STOP_WORDS,
    TELLS,
)

__all__ = [
    "LANGUAGES",
    "QueryTerms",
    "analyse",
    "analyse_query",
    "field_query",
    "named_terms",
    "normalise",
    "stemmers_loaded",
    "tokenize",
]

#: The Latin-script languages told apart (stop words, stemmer); the first is the default.
LANGUAGES: Final = ("en", "fr", "de", "es", "it", "nl", "pt", "pl", "tr")
_SNOWBALL: Final = {
    "en": "english",
    "fr": "french",
    "de": "german",
    "es": "spanish",
    "it": "italian",
    "nl": "dutch",
    "pt": "portuguese",
    "pl": "polish",
    "tr": "turkish",
    "ru": "russian",
}

# Han (with 々 and 〇, the extensions and the compatibility ideographs), kana, Hangul: the
# scripts written without spaces, told apart by code point (a regular expression's
# class of them takes milliseconds to compile).
_HAN_RANGES: Final = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x3005, 0x3005),
    (0x3007, 0x3007),
    (0xF900, 0xFAFF),
    (0x20000, 0x2FA1F),
)
_SCRIPTS: Final = (
    ("hira", ((0x3040, 0x309F),)),
    ("kata", ((0x30A0, 0x30FF), (0x31F0, 0x31FF))),
    ("han", _HAN_RANGES),
    ("hang", ((0xAC00, 0xD7AF), (0x1100, 0x11FF), (0x3130, 0x318F))),
)
#: The lowest code point of those scripts: a text below it has none of them.
_CJK_FIRST: Final = "\u1100"
#: Languages that capitalise every noun.
_NOUNS_CAPITALISED: Final = frozenset({"de"})
_LIGATURES: Final = str.maketrans({"œ": "oe", "æ": "ae", "ø": "o", "ł": "l", "đ": "d"})
_STEM_CACHE_MAX: Final = 200_000
#: The languages a field query's words are stemmed in besides its own (:func:`field_query`).
_FIELD_QUERY_LANGUAGES: Final = ("en", "fr", "de")
#: The stemmer of each language's field terms: the others' stems are kept apart
#: (``es:nin``; a word never holds ``:``).
_FIELD_KEYS: Final = {
    code: code if code in _FIELD_QUERY_LANGUAGES else f"{code}:" for code in LANGUAGES
}
#: The words a text's language is told from (its first ones: plenty for stop words).
_SAMPLE_WORDS: Final = 200


# The two private records below are named tuples, not dataclasses: a frozen dataclass
# costs about 0.5 ms to create at import (its methods are generated and compiled), and
# every command imports this module (``asyncrecall.memory``) on its main thread.
class _Patterns(NamedTuple):
    ascii_word: re.Pattern[str]
    run: re.Pattern[str]
    han_breaks: re.Pattern[str]


@functools.cache
def _patterns() -> _Patterns:
    """The tokeniser's regular expressions, compiled on first use (with the stemmers:
    in the warm-up thread, not at every command's import)."""
    # Combining marks are part of a word (Python's ``\w`` leaves them out): the dot of
    # a folded ``İ``, and the vowel signs of the Indic scripts (Devanagari to Sinhala).
    marks = "\u0300-\u036f" + "".join(
        c for c in map(chr, range(0x0900, 0x0E00)) if unicodedata.category(c)[0] == "M"
    )
    return _Patterns(
        # A word of ASCII text (see :func:`_is_word`).
        ascii_word=re.compile(r"[^\W_]{2,}|\d"),
        # A run of letters and digits of any script (``_`` is made a space first, so
        # snake_case splits: one class matches several times faster than two).
        run=re.compile(rf"[\w{marks}]+"),
        han_breaks=re.compile(
            "|".join(sorted(HAN_STOP_WORDS.split(), key=len, reverse=True))
            + f"|[{HAN_STOP_CHARACTERS}]+"
        ),
    )


def _script(character: str) -> str | None:
    """``han``, ``hira``, ``kata`` or ``hang`` for a character of those scripts."""
    code = ord(character)
    for name, ranges in _SCRIPTS:
        for low, high in ranges:
            if low <= code <= high:
                return name
    return None


def _is_word(text: str) -> bool:
    """Two or more letters or digits, or a single digit ("worker 3", "note 7": ports,
    versions and counts are what people remember)."""
    return len(text) > 1 or text.isdigit()


#: What a text splits into: a word, or a CJK run as its pieces ``(script, text)``.
_Item: TypeAlias = str | list[tuple[str, str]]


def _items(normal: str) -> list[_Item]:
    """The words and CJK runs of a normalised text, in order."""
    items: list[_Item] = []
    for run in _patterns().run.findall(normal.replace("_", " ")):
        if run.isascii() or max(run) < _CJK_FIRST:
            if len(run) > 1 or run.isdigit():  # _is_word, inlined: the common case
                items.append(run)
            continue
        cjk: list[tuple[str, str]] | None = None
        for kind, characters in itertools.groupby(run, _script):
            text = "".join(characters)
            if kind is None:
                cjk = None
                if _is_word(text):
                    items.append(text)
            else:
                if cjk is None:
                    cjk = []
                    items.append(cjk)
                cjk.append((kind, text))
    return items


def normalise(text: str) -> str:
    """``text`` in NFKC, case-folded (ASCII: lower-cased, which is the same)."""
    if text.isascii():
        return text.lower()
    # Folding may leave a decomposed letter (``ǰ``): composed again, as the query's are.
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def _fold(word: str) -> str:
    """``word`` without accents (``réunion`` -> ``reunion``, ``œuvre`` -> ``oeuvre``)."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFD", word.translate(_LIGATURES))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


class _Stemmer:
    """One Snowball stemmer behind a word cache (thread-safe); ``fold``: stems the word
    without its accents (Latin script: ``données`` and ``donnees`` are one stem);
    ``prefix``: put before every stem."""

    def __init__(self, stem_word: Callable[[str], Any], *, fold: bool, prefix: str = "") -> None:
        self._stem_word = stem_word
        self._fold = fold
        self._prefix = prefix
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(self, word: str) -> str:
        stem = self._cache.get(word)
        if stem is None:
            with self._lock:
                if len(self._cache) > _STEM_CACHE_MAX:
                    self._cache.clear()
                stem = self._prefix + str(self._stem_word(_fold(word) if self._fold else word))
                self._cache[word] = stem
        return stem


def _snowball(language: str) -> Callable[[str], Any]:
    """PyStemmer's ``stemWord`` (C), else ``snowballstemmer``'s (pure Python)."""
    try:
        import Stemmer  # type: ignore[import-not-found]  # PyStemmer
    except ImportError:
        import snowballstemmer  # type: ignore[import-untyped]

        return snowballstemmer.stemmer(language).stemWord  # type: ignore[no-any-return]
    return Stemmer.Stemmer(language).stemWord  # type: ignore[no-any-return]


_stemmers: dict[str, _Stemmer] | None = None
_stemmers_lock = threading.Lock()


def _loaded() -> dict[str, _Stemmer]:
    global _stemmers
    stemmers = _stemmers
    if stemmers is None:
        with _stemmers_lock:  # a warm-up thread and the loop may both be first
            if _stemmers is None:
                _patterns()
                loaded = {
                    code: _Stemmer(_snowball(name), fold=code != "ru")
                    for code, name in _SNOWBALL.items()
                }
                for code, key in _FIELD_KEYS.items():  # a stemmer of its own: not shared
                    if key != code:
                        loaded[key] = _Stemmer(_snowball(_SNOWBALL[code]), fold=True, prefix=key)
                _stemmers = loaded
            stemmers = _stemmers
    return stemmers


def stemmers_loaded() -> bool:
    """Whether tokenising would import and compile nothing (stemmers, patterns)."""
    return _stemmers is not None


def _is_latin(word: str) -> bool:
    first = word[0]
    return first < "\u0250" or "\u1e00" <= first <= "\u1eff"


def _is_cyrillic(word: str) -> bool:
    return "\u0400" <= word[0] <= "\u04ff"


@functools.cache
def _told_by() -> dict[str, tuple[str, ...]]:
    """Each word that tells a language: the languages it tells (:data:`TELLS`)."""
    told: dict[str, tuple[str, ...]] = {}
    for code in LANGUAGES:
        for word in TELLS[code]:
            told[word] = (*told.get(word, ()), code)
    return told


def _tells_counted(words: Iterable[str]) -> Counter[str]:
    """How many of ``words`` (folded) tell each language: one look-up a word, for every
    language at once (a document's first words)."""
    told = map(_told_by().get, words, itertools.repeat(()))
    return Counter(itertools.chain.from_iterable(told))


def _language(words: Iterable[str], candidates: Sequence[str] = LANGUAGES) -> str:
    """The language among ``candidates`` whose stop words ``words`` (normalised Latin
    words) hold most; ties go to the language of which they hold the most letters
    (:data:`ACCENTS`), then to the first candidate."""
    if len(candidates) == 1:
        return candidates[0]
    words = list(words)
    told, hits = _told_by(), dict.fromkeys(candidates, 0)
    for word in words:  # a few words: cheaper than a Counter
        for code in told.get(word if word.isascii() else _fold(word), ()):
            if code in hits:
                hits[code] += 1
    best = max(hits.values())
    leaders = [code for code in candidates if hits[code] == best]
    if len(leaders) > 1:
        letters = set().union(*(word for word in words if not word.isascii()))
        held = {code: len(ACCENTS.get(code, frozenset()) & letters) for code in leaders}
        most = max(held.values())
        if most:
            return next(code for code in leaders if held[code] == most)
    return leaders[0]


class _Piece(NamedTuple):
    """A piece of a CJK run: its terms (bigrams, or a unigram; stop ones included) and,
    per character, the terms that hold it and whether it needs all of them."""

    terms: list[str]
    cover: list[tuple[tuple[int, ...], bool]]


def _cjk(run: list[tuple[str, str]]) -> list[_Piece]:
    """The pieces of a CJK run, cut where its script changes (see the module's
    docstring).

    A katakana character counts as found only when every bigram holding it is (a
    loanword's bigrams such as ``イン`` recur in unrelated words: ``ログイン``,
    ``オンライン``); a Han character when any is. A Han piece right before hiragana also
    yields its last character alone: a verb's or adjective's stem (``今読んで`` ->
    ``今読``, ``読``), as a one-character piece does (``読む`` -> ``読``).
    """
    pieces: list[_Piece] = []
    breaks = _patterns().han_breaks
    for number, (kind, text) in enumerate(run):
        if kind == "hira":
            continue  # particles and endings
        stem = kind == "han" and number + 1 < len(run) and run[number + 1][0] == "hira"
        parts = [p for p in breaks.split(text) if p] if kind == "han" else [text]
        for index, part in enumerate(parts):
            size = len(part)
            if size == 1:
                pieces.append(_Piece([part], [((0,), False)]))
                continue
            terms = [part[i : i + 2] for i in range(size - 1)]
            holding = [tuple(j for j in (i - 1, i) if 0 <= j < size - 1) for i in range(size)]
            if stem and index == len(parts) - 1:
                terms.append(part[-1])
                holding[-1] += (len(terms) - 1,)
            every = kind == "kata"
            pieces.append(_Piece(terms, [(h, every) for h in holding]))
    return pieces


def analyse(text: str) -> tuple[list[str], str]:
    """A document's tokens and its Latin-script language (one of :data:`LANGUAGES`)."""
    stemmers = _loaded()
    normal = normalise(text)
    patterns = _patterns()
    if normal.isascii():  # most notes: words alone, as fast as English-only tokens were
        words = patterns.ascii_word.findall(normal)
    else:
        runs: list[str] = patterns.run.findall(normal.replace("_", " "))
        words = [run for run in runs if len(run) > 1 or run.isdigit()]
        if not all(map(str.isascii, words)):  # not just dashes and quotes
            return _analyse(normal)
    language, most = LANGUAGES[0], 0
    counts = _tells_counted(words[:_SAMPLE_WORDS])
    for code in LANGUAGES:
        hits = counts[code]
        if hits > most:
            language, most = code, hits
    stop, stem = STOP_WORDS[language], stemmers[language]
    return [stem(word) for word in words if word not in stop], language


def _analyse(normal: str) -> tuple[list[str], str]:
    """:func:`analyse` of a normalised text with words beyond ASCII."""
    stemmers = _loaded()
    items = _items(normal)
    latin = (w for w in items if isinstance(w, str) and _is_latin(w))
    language = _language(itertools.islice(latin, _SAMPLE_WORDS))
    stop, stem = STOP_WORDS[language], stemmers[language]
    tokens: list[str] = []
    for word in items:
        if not isinstance(word, str):
            for piece in _cjk(word):
                tokens += piece.terms
        elif word.isascii():
            if word not in stop:
                tokens.append(stem(word))
        elif _is_latin(word):
            if _fold(word) not in stop:
                tokens.append(stem(word))
        elif _is_cyrillic(word):
            word = word.replace("ё", "е")
            if word not in STOP_CYRILLIC:
                tokens.append(stemmers["ru"](word))
        else:
            tokens.append(word)
    return tokens, language


def tokenize(text: str) -> list[str]:
    """The tokens of a document's ``text`` (see the module's docstring)."""
    return analyse(text)[0]


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """A query read in the languages of the documents it is matched against.

    ``groups``: the distinct terms, each as its alternatives (a Latin-script word's
    stem in the query's language first, then in the documents' other languages).
    ``units``: what coverage counts, each the groups that may cover it and how many of
    them must occur (a word: its own group; a CJK character: the bigrams holding it,
    any of them, or all for katakana). ``named``: the groups of the
    things the query names (capitalised words after the first; in German, where every
    noun is capitalised, its nouns: ``nouns_capitalised`` says so).
    """

    language: str
    #: Whether the query is English: its Latin-script words read as English, and no
    #: word in another script.
    english: bool
    groups: tuple[tuple[str, ...], ...]
    units: tuple[tuple[tuple[int, ...], int], ...]
    named: tuple[tuple[int, ...], ...]
    #: Whether the query is written in a language that capitalises every noun (read
    #: among every language, not only the documents'), so that ``named`` holds nouns.
    nouns_capitalised: bool = False


def analyse_query(query: str, languages: Sequence[str] = ("en",)) -> QueryTerms:
    """``query``'s terms for documents in ``languages`` (most common first; see
    :class:`QueryTerms`)."""
    return _query_terms(query, tuple(languages) or ("en",), None)


def field_query(query: str) -> QueryTerms:
    """``query``'s terms for :func:`field_terms`: its language told among every one of
    :data:`LANGUAGES`, each Latin-script word stemmed in it, then in English, French and
    German.

    A stem of a later language (Spanish ... Turkish) is kept apart (``es:nin``): it
    meets only a field word's stem in the same language, which a field has only when it
    is told to be written in that language. Stemmed in every language and mixed with
    the others, the later four's stems of short English fields met English questions'
    by chance (``attendees`` -> ``attend``: more fields matched for 31 of LoCoMo's 1,347
    questions), and a field held twice as many terms.
    """
    return _query_terms(query, LANGUAGES, _FIELD_QUERY_LANGUAGES)


def _query_terms(query: str, candidates: Sequence[str], field: Sequence[str] | None) -> QueryTerms:
    """:func:`analyse_query` (``field`` is ``None``) or :func:`field_query` (``field``:
    the languages stemmed after the query's own)."""
    stemmers = _loaded()
    normal = normalise(query)
    items = _items(normal)
    language = _language((w for w in items if isinstance(w, str) and _is_latin(w)), candidates)
    stop = STOP_WORDS[language]
    if field is None:
        order = (language, *(code for code in candidates if code != language))
    else:
        order = (_FIELD_KEYS[language], *(code for code in field if code != language))
    groups: dict[tuple[str, ...], int] = {}
    units: list[tuple[tuple[int, ...], int]] = []

    def group(alternatives: tuple[str, ...]) -> int:
        return groups.setdefault(alternatives, len(groups))

    foreign = False
    for word in items:
        if not isinstance(word, str):
            foreign = True
            for piece in _cjk(word):
                ids = [group((t,)) for t in piece.terms]
                for holding, every in piece.cover:
                    held = tuple(ids[j] for j in holding)
                    units.append((held, len(held) if every else 1))
        else:
            foreign = foreign or not _is_latin(word)
            alternatives = _word_terms(word, stop, order, stemmers)
            if alternatives and alternatives not in groups:
                units.append(((group(alternatives),), 1))
    named: list[tuple[int, ...]] = []
    for alternatives in _named(query, stop, order, stemmers):
        found = groups.get(alternatives)
        if found is not None:
            named.append((found,))
    english = language == "en" and not foreign
    nouns = bool(named) and (
        language in _NOUNS_CAPITALISED
        or _language(w for w in items if isinstance(w, str) and _is_latin(w)) in _NOUNS_CAPITALISED
    )
    return QueryTerms(language, english, tuple(groups), tuple(units), tuple(named), nouns)


def _word_terms(
    word: str, stop: frozenset[str], order: Sequence[str], stemmers: dict[str, _Stemmer]
) -> tuple[str, ...]:
    """A normalised word's alternatives (none for a stop word)."""
    if _is_latin(word):
        if _fold(word) in stop:
            return ()
        if len(order) == 1:  # a folder in one language: most of them
            return (stemmers[order[0]](word),)
        return tuple(dict.fromkeys(stemmers[code](word) for code in order))
    if _is_cyrillic(word):
        word = word.replace("ё", "е")
        return () if word in STOP_CYRILLIC else (stemmers["ru"](word),)
    return (word,)


def _named(
    query: str, stop: frozenset[str], order: Sequence[str], stemmers: dict[str, _Stemmer]
) -> list[tuple[str, ...]]:
    words = [w for w in _items(query) if isinstance(w, str)]
    named = []
    for word in words[1:]:
        if word[0].isupper():
            normal = normalise(word)
            if normal not in CALENDAR:
                alternatives = _word_terms(normal, stop, order, stemmers)
                if alternatives:
                    named.append(alternatives)
    return named


def named_terms(query: str) -> list[list[str]]:
    """The tokens of each thing an English ``query`` names: a capitalised word that is
    not its first word, not a month or weekday and not a stop word."""
    stemmers = _loaded()
    return [list(a) for a in _named(query, STOP_WORDS["en"], ("en",), stemmers)]


def field_terms(text: str) -> frozenset[str]:
    """Every term a short field (a memory's name or description) may be matched by: each
    Latin-script word stemmed in English, French and German (a name is too short to
    tell its language by), and in a later language too (Spanish ... Turkish) when its
    stop words or accents tell it is written in that language (those stems kept apart,
    see :func:`field_query`); a Cyrillic word in Russian, CJK runs as their bigrams and
    unigrams. Stop words of a language are left out of that language's stems; a name's
    dashes and underscores split words."""
    stemmers = _loaded()
    terms: set[str] = set()
    items = _items(normalise(text.replace("-", " ")))
    latin = [w for w in items if isinstance(w, str) and _is_latin(w)]
    language = _language(latin[:_SAMPLE_WORDS]) if latin else LANGUAGES[0]
    codes: tuple[str, ...] = _FIELD_QUERY_LANGUAGES
    if language not in codes:
        codes = (*codes, language)
    for word in items:
        if not isinstance(word, str):
            for piece in _cjk(word):
                terms.update(piece.terms)
            for _, characters in word:
                terms.update(characters)
        elif _is_latin(word):
            folded = _fold(word)
            for code in codes:
                if folded not in STOP_WORDS[code]:
                    terms.add(stemmers[_FIELD_KEYS[code]](word))
        elif _is_cyrillic(word):
            word = word.replace("ё", "е")
            if word not in STOP_CYRILLIC:
                terms.add(stemmers["ru"](word))
        else:
            terms.add(word)
    return frozenset(terms)

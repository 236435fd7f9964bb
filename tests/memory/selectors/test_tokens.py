"""The lexical selector's tokens in any language: normalisation,
CJK bigrams, accents, stemming per language, and queries read in their folder's
languages. English keeps the tokens of ``test_lexical.py``."""

from __future__ import annotations

import pytest

from asyncrecall.memory import LexicalSelector
from asyncrecall.memory.selectors._lexical import tokenize

from ..conftest import memory_doc as _doc


def test_full_width_forms_are_their_ascii_letters_and_digits() -> None:
    """NFKC: what a Japanese or Chinese keyboard types in full width is the same word."""
    assert tokenize("ＰＯＳＴＧＲＥＳ　１６") == tokenize("postgres 16") == ["postgr", "16"]
    assert tokenize("ﾃﾞｰﾀﾍﾞｰｽ") == tokenize("データベース")  # half-width katakana
    assert tokenize("ﬁle") == ["file"]  # a ligature


def test_case_folding_makes_sharp_s_a_double_s() -> None:
    assert tokenize("Straße") == tokenize("STRASSE") == tokenize("strasse")
    assert tokenize("Meet at the Hauptstraße") == tokenize("MEET AT THE HAUPTSTRASSE")
    assert tokenize("ΟΔΟΣ") == tokenize("οδος")  # final sigma
    assert tokenize("İstanbul") == tokenize("istanbul") == ["istanbul"]


def test_accents_are_dropped_before_stemming() -> None:
    """``réunions`` and ``reunions`` are one word; French stop words go (``les``, ``de``)."""
    assert tokenize("Les réunions de l'équipe") == ["reunion", "equip"]
    assert tokenize("les reunions de l'equipe") == ["reunion", "equip"]
    assert tokenize("Die Rechnung wurde gelöscht") == tokenize("die rechnung wurde geloscht")


def test_latin_words_are_stemmed_in_their_texts_language() -> None:
    assert tokenize("Les tables de faits") == ["tabl", "fait"]  # French: stop words, -s
    assert tokenize("Die Rechnungen wurden gelöscht") == ["rechnung", "geloscht"]  # German
    # English keeps English stop words and stems, "die" and "son" included.
    assert tokenize("The dog will die; her son ran") == ["dog", "die", "son", "ran"]


def test_cyrillic_words_get_the_russian_stemmer() -> None:
    assert tokenize("базы данных") == tokenize("база данные") == ["баз", "дан"]
    assert tokenize("Ёлка") == tokenize("елка")
    assert tokenize("Что мы не едим") == ["ед"]  # Russian stop words


def test_chinese_becomes_character_bigrams_cut_at_function_words() -> None:
    assert tokenize("数据库迁移") == ["数据", "据库", "库迁", "迁移"]
    # 的, 什么, 时候, 要 cut like spaces; a one-character piece is a unigram.
    assert tokenize("我的车什么时候要年检？") == ["车", "年检"]


def test_japanese_drops_hiragana_and_keeps_verb_stems() -> None:
    assert tokenize("設定ファイルを開く") == ["設定", "ファ", "ァイ", "イル", "開"]
    # 今読 is a bigram across two words; 読 alone matches "読む" in a note.
    assert tokenize("今読んでいる本") == ["今読", "読", "本"]
    assert tokenize("読む") == ["読"]


def test_mixed_scripts_split_where_the_script_changes() -> None:
    assert tokenize("用 Docker 部署API服务") == ["用", "docker", "部署", "api", "服务"]
    assert tokenize("ｗｅｂｈｏｏｋ の リトライ") == ["webhook", "リト", "トラ", "ライ"]
    assert tokenize("Сервер на Go и Redis") == ["сервер", "go", "redi"]


def test_other_scripts_keep_whole_words_with_their_marks() -> None:
    """Combining marks (Devanagari vowel signs) belong to the word, which Python's
    ``\\w`` alone would split."""
    assert tokenize("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]


def test_a_chinese_question_finds_its_note() -> None:
    docs = [
        _doc("car.md", "家里的车每年十月要做年检，保险买的是平安。", name="车辆信息"),
        _doc("rent.md", "房租每月 6500 元，每月 5 号之前转给房东。", name="房租"),
        _doc("cat.md", "家里的猫每年三月打疫苗。", name="宠物猫"),
    ]
    chosen = LexicalSelector().rank("我的车什么时候要年检？", docs, limit=1)
    assert [d.rel_path for d in chosen] == ["car.md"]


def test_a_japanese_question_finds_its_note() -> None:
    docs = [
        _doc("read.md", "村上春樹の新刊を読んでいる途中。寝る前に本を少し読む。", name="読書"),
        _doc("dog.md", "柴犬を飼っている。散歩は朝と夕方の二回。", name="ペット"),
        _doc("tea.md", "コーヒーより緑茶派。", name="お茶"),
    ]
    chosen = LexicalSelector().rank("今読んでいる本は誰の作品？", docs, limit=1)
    assert [d.rel_path for d in chosen] == ["read.md"]


def test_a_katakana_bigram_alone_does_not_make_a_loanword_known() -> None:
    """``ログイン`` shares only ``イン`` with ``オンライン``: coverage counts a katakana
    character only when every bigram holding it occurs, so the selector abstains."""
    docs = [_doc("english.md", "オンライン英会話を週三回受けている。", name="英会話")]
    assert LexicalSelector().rank("ログイン", docs, limit=5) == []
    assert LexicalSelector(abstain=False).rank("ログイン", docs, limit=5) != []
    chosen = LexicalSelector().rank("オンライン英会話", docs, limit=5)
    assert [d.rel_path for d in chosen] == ["english.md"]


def test_a_query_is_read_in_its_folders_language() -> None:
    """A French folder's notes were stemmed the French way (``docker`` -> ``dock``): a
    query without any French stop word still finds them."""
    docs = [
        _doc("ops.md", "Les conteneurs tournent sous docker compose sur le serveur."),
        _doc("db.md", "La base de données est une instance PostgreSQL gérée."),
    ]
    assert [d.rel_path for d in LexicalSelector().rank("docker", docs, limit=1)] == ["ops.md"]
    assert [d.rel_path for d in LexicalSelector().rank("données", docs, limit=1)] == ["db.md"]
    assert [d.rel_path for d in LexicalSelector().rank("donnees", docs, limit=1)] == ["db.md"]


def test_a_query_word_matches_a_note_in_another_language_of_the_folder() -> None:
    """In a folder of English and French notes, an English query word stemmed the
    English way that no note holds is tried the French way (and the other way round)."""
    from asyncrecall.memory.selectors._tokens import analyse_query

    terms = analyse_query("serveurs", ("en", "fr"))
    assert terms.language == "en" and terms.groups == (("serveur",),)
    terms = analyse_query("Quels serveurs utilisent docker ?", ("en", "fr"))
    assert terms.language == "fr" and ("dock", "docker") in terms.groups
    docs = [
        _doc("fr.md", "Les conteneurs tournent sous docker compose sur le serveur."),
        _doc("en.md", "The staging database is a managed PostgreSQL instance."),
    ]
    chosen = LexicalSelector().rank("which docker compose", docs, limit=1)
    assert [d.rel_path for d in chosen] == ["fr.md"]


def test_a_term_two_query_words_resolve_to_is_scored_once() -> None:
    """In a folder of French and English notes, ``testing`` is tried as ``testing``
    (French) then ``test`` (English), which ``tests`` also is: the term scores once, as a
    word repeated in an English query always did."""
    from asyncrecall.memory.selectors._tokens import analyse_query

    docs = [
        _doc("fr.md", "Les tests tournent sur le serveur de la base."),
        _doc("deploy.md", "Le déploiement passe par la recette."),
        _doc("en.md", "The staging database is managed."),
    ]
    assert analyse_query("testing tests", ("fr", "en")).groups == (("testing", "test"), ("test",))
    selector = LexicalSelector()
    assert selector.scores("testing tests", docs) == selector.scores("tests", docs)
    assert selector.scores("tests", docs)[0] > 0


def test_a_german_query_naming_no_known_noun_selects_nothing() -> None:
    """German capitalises every noun: the names gate then reads "none of the nouns is
    known" (kept: on our German set it holds the hybrid's false injection at 0.05)."""
    docs = [_doc("miete.md", "Die Warmmiete beträgt 1.240 € und wird am Monatsersten abgebucht.")]
    # Half the terms are known (abgebucht), so coverage alone would answer; no noun is.
    assert LexicalSelector().rank("Wann wird das Auto abgebucht?", docs, limit=5) == []
    assert LexicalSelector(min_coverage=0.0).names_unknown("Wann wird das Auto abgebucht?", docs)
    chosen = LexicalSelector().rank("Wann wird die Warmmiete abgebucht?", docs, limit=5)
    assert [d.rel_path for d in chosen] == ["miete.md"]


def test_dashes_and_curly_quotes_change_no_word() -> None:
    """Text beyond ASCII whose words are ASCII (an em dash, typographic quotes) gives
    the tokens of its ASCII spelling, snake_case split and language told alike."""
    assert tokenize("The snake_case_names — don’t “say”") == tokenize(
        'The snake_case_names - don\'t "say"'
    )
    assert tokenize("Les tables de faits — à jour") == ["tabl", "fait", "jour"]


@pytest.mark.parametrize(
    "text",
    ["What did the Tests of snake_case_names say?", "Worker 3 listens on port 8080, v2"],
)
def test_english_in_ascii_tokenises_as_before(text: str) -> None:
    """The tokens LoCoMo's figures were measured with: the plain English path."""
    import re

    from asyncrecall.memory.selectors._words import STOP_WORDS

    stemmer_module = pytest.importorskip("Stemmer")
    stem = stemmer_module.Stemmer("english").stemWord
    words = re.findall(r"[^\W_]{2,}|\d", text.lower())
    assert tokenize(text) == [stem(w) for w in words if w not in STOP_WORDS["en"]]


@pytest.mark.parametrize(
    ("language", "snowball", "text", "singular", "function_words"),
    [
        (
            "es",
            "spanish",
            "Los niños salen del colegio a las 16:30; los martes los recoge la abuela.",
            "El niño tiene piano los sábados.",
            {"los", "del", "las", "la"},
        ),
        (
            "it",
            "italian",
            "I libri della biblioteca si rinnovano online con la tessera.",
            "Il libro è sul tavolo della cucina.",
            {"della", "si", "con", "la"},
        ),
        (
            "nl",
            "dutch",
            "De boeken van de bibliotheek moeten voor vrijdag terug.",
            "Het boek ligt op de keukentafel.",
            {"de", "van", "voor"},
        ),
        (
            "pt",
            "portuguese",
            "Os filhos da vizinha não têm a chave do prédio.",
            "O meu filho vai ao médico com a avó.",
            {"os", "da", "nao", "tem", "do"},
        ),
        (
            "pl",
            "polish",
            "Klucze od piwnicy są w szufladzie przy drzwiach.",
            "Klucz od garażu wisi na haczyku.",
            {"od", "sa", "przy"},
        ),
        (
            "tr",
            "turkish",
            "Kitaplar rafta ve masanın üstünde duruyor, bu akşam da kütüphaneye gidecek.",
            "Bu kitap çok eski.",
            {"ve", "bu", "da"},
        ),
    ],
)
def test_later_languages_are_read_as_themselves(
    language: str, snowball: str, text: str, singular: str, function_words: set[str]
) -> None:
    """A note in Spanish, Italian, Dutch, Portuguese, Polish or Turkish is told as such
    (not as French, English or German): its function words are dropped and its own
    stemmer runs on the rest, accents dropped, so a plural finds its singular
    (``niños``/``niño``, ``libri``/``libro``, ``boeken``/``boek``, ``filhos``/``filho``,
    ``klucze``/``klucz``, ``kitaplar``/``kitap``: another language's stemmer keeps them
    apart)."""
    import re

    from asyncrecall.memory.selectors._tokens import _fold, analyse

    stemmer_module = pytest.importorskip("Stemmer")
    stem = stemmer_module.Stemmer(snowball).stemWord
    tokens, read_as = analyse(text)
    assert read_as == language
    words = [_fold(w) for w in re.findall(r"[^\W_]{2,}|\d", text.lower())]
    assert not function_words & set(tokens)
    assert tokens == [stem(w) for w in words if w not in function_words | _own_stop(language)]
    singular_tokens, singular_as = analyse(singular)
    assert singular_as == language
    assert tokens[0] == singular_tokens[0]  # the plural and the singular are one term


def _own_stop(language: str) -> frozenset[str]:
    from asyncrecall.memory.selectors._words import STOP_WORDS

    return frozenset(STOP_WORDS[language])


@pytest.mark.parametrize(
    "text",
    [
        "Come per day: is it in the plan? Do come, die hard",
        "come per day",
        "The CI pipeline runs per commit, AI review",
        "Ben's van: door repair parts",
        "Dashboards: grafana.example.com, feeds: socket.io",
        "Do you know what to do? I go to my gym on Monday, one or two times",
        "Her dog and her cat: we've a plan to go, ya know",
    ],
)
def test_english_with_other_languages_function_words_stays_english(text: str) -> None:
    """``come``, ``per``, ``die``, ``ben``, ``van``, ``door``, ``CI``, ``AI``, ``com``
    are function words in Italian, Spanish, Dutch or Portuguese and everyday English
    words, as are ``to``, ``do``, ``go``, ``my``, ``one`` in Polish and ``her``, ``ve``
    (of ``we've``), ``ya`` in Turkish: they do not count towards those languages, so an
    English text that holds more of them than English stop words is still read, and
    stemmed, as English."""
    from asyncrecall.memory.selectors._tokens import LANGUAGES, analyse, analyse_query
    from asyncrecall.memory.selectors._words import STOP_WORDS

    stemmer_module = pytest.importorskip("Stemmer")
    stem = stemmer_module.Stemmer("english").stemWord
    import re

    tokens, read_as = analyse(text)
    assert read_as == "en"
    words = re.findall(r"[^\W_]{2,}|\d", text.lower())
    assert tokens == [stem(w) for w in words if w not in STOP_WORDS["en"]]
    assert analyse_query(text, LANGUAGES).language == "en"


_MIXED_FOLDER = (
    ("es.md", "Los niños salen del colegio a las 16:30; los martes los recoge la abuela."),
    ("it.md", "La bolletta della luce arriva per email a chi è intestatario."),
    ("nl.md", "Het aquarium wordt elke twee weken schoongemaakt, de filter maandelijks."),
    ("en.md", "The boiler is serviced every November by the plumber."),
)


@pytest.mark.parametrize(
    ("question", "wanted"),
    [
        ("¿A qué hora sale el niño del colegio?", "es.md"),
        ("Quando arrivano le bollette della luce?", "it.md"),
        ("Wanneer wordt het aquarium schoongemaakt?", "nl.md"),
        ("When is the boiler serviced?", "en.md"),
    ],
)
def test_a_folder_of_several_languages_reads_each_question_in_its_own(
    question: str, wanted: str
) -> None:
    """In a folder of Spanish, Italian, Dutch and English notes each question finds its
    note alone: read as French, ``niño`` missed ``niños`` and ``del`` was a term that
    the Spanish note holds too."""
    docs = [_doc(path, body) for path, body in _MIXED_FOLDER]
    assert [d.rel_path for d in LexicalSelector().rank(question, docs, limit=5)] == [wanted]


def test_a_question_sharing_only_function_words_with_a_note_gets_nothing() -> None:
    """An Italian question whose only words in common with the folder are Italian
    function words (``per``, ``chi``, ``della``) gets nothing: read as French, they were
    terms, three of five known."""
    docs = [_doc(path, body) for path, body in _MIXED_FOLDER]
    assert LexicalSelector().rank("Per chi è la torta della nonna?", docs, limit=5) == []


def test_a_fields_stem_in_a_later_language_meets_only_a_query_in_that_language() -> None:
    """A memory's name and description are stemmed in English, French and German, and
    in Spanish, Italian, Dutch or Portuguese only when they are told to be written in
    it; such a stem is matched only by a query in that language. So an English
    question matches the fields it matched before (the Spanish stemmer would make an
    English name's ``attendees`` ``attend``; a Spanish name's ``partido`` is ``part``
    to it), and a Spanish question's ``recogen`` finds a Spanish name's ``recogida``
    (``recog`` in Spanish alone)."""
    from asyncrecall.memory.selectors._fields import FieldIndex
    from asyncrecall.memory.selectors._tokens import field_query, field_terms

    party = field_terms("Gaming party\nNate hosted a gaming party with 7 attendees")
    groups = field_query("When did Nate attend a cooking show?").groups
    assert ("attend",) in groups and "attend" not in party
    docs = [
        _doc("party.md", "", name="Gaming party", description="Nate hosted 7 attendees"),
        _doc("school.md", "", name="Recogida de los niños", description="a las 16:30"),
        _doc("match.md", "", name="El partido de los sábados", description="a las 10"),
    ]
    assert FieldIndex().matches("Who will attend?", docs) == []
    assert FieldIndex().matches("Which part broke?", docs) == []
    assert FieldIndex().matches("¿Cuándo los recogen?", docs) == [1]


_POLISH_TURKISH_FOLDER = (
    ("pl.md", "Rachunki za prąd płacimy przelewem do dziesiątego dnia miesiąca."),
    ("tr.md", "Arabanın sigortası için her yıl mart ayında bir hatırlatma geliyor."),
    ("en.md", "The boiler is serviced every November by the plumber."),
)


@pytest.mark.parametrize(
    ("question", "wanted"),
    [
        ("Ile dni na rachunki?", ["pl.md"]),
        ("Sigortası ne zaman?", ["tr.md"]),
        ("Hatırlatmalar ne zaman geliyor?", ["tr.md"]),  # a plural finds its singular
        ("A za to?", []),  # Polish function words alone
        ("Ne için?", []),  # Turkish ones
        ("Bir de bu ne için?", []),
    ],
)
def test_polish_and_turkish_questions_find_their_note_and_function_words_find_nothing(
    question: str, wanted: list[str]
) -> None:
    """Polish and Turkish are read as themselves: a question finds its note through its
    content words alone, its function words (``ile``, ``na``; ``ne``) no longer diluting
    them, and a Turkish plural meets its singular (``hatırlatmalar``/``hatırlatma``); a
    question whose only words in common with the folder are Polish or Turkish function
    words (``za``; ``için``, ``bir``) gets nothing. Read as another language, every one
    of these went the other way."""
    docs = [_doc(path, body) for path, body in _POLISH_TURKISH_FOLDER]
    found = LexicalSelector().rank(question, docs, limit=5)
    assert [d.rel_path for d in found] == wanted

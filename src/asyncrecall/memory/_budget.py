"""Recall's budgets, the same for every store and selector.

Where each is applied:

- **files per user message** (``limit``, default 5): :class:`~asyncrecall.prefetch.RecallPrefetcher`
  counts the instant pass and the model pick together;
- **bytes per session** (:data:`SESSION_BYTES`, 60 KB): the prefetcher too; once a
  block no longer fits, recall stops for the conversation until it is reset;
- **per file** (:data:`FILE_CHARS` characters, :data:`FILE_LINES` lines): the memory
  block (:func:`~asyncrecall.memory.format_memory_block`), with a note naming the file;
- **the model selector's manifest** (:data:`MANIFEST_FILES` candidates,
  :data:`MANIFEST_BYTES` bytes): :class:`~asyncrecall.memory.ModelSelector`;
- **nothing to recall** (:func:`nothing_to_recall`: one word, a bare "yes"/"ok"): the
  manager and the prefetcher start no recall.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from asyncrecall.memory._scripts import SPACELESS

__all__ = [
    "FILE_CHARS",
    "FILE_LINES",
    "MANIFEST_BYTES",
    "MANIFEST_FILES",
    "SESSION_BYTES",
    "nothing_to_recall",
]

#: Bytes of memory blocks one conversation receives before recall stops (UTF-8).
SESSION_BYTES: Final = 60_000
#: Characters of a body put in the block; the rest stays in the file (the contract's 1,200).
FILE_CHARS: Final = 1200
#: Lines of a body put in the block.
FILE_LINES: Final = 200
#: Candidates the model selector's manifest lists at most (the newest first).
MANIFEST_FILES: Final = 200
#: Bytes (UTF-8) of the model selector's manifest at most.
MANIFEST_BYTES: Final = 25_000

#: Replies that carry no question of their own, after case folding and without
#: punctuation ("yes", "ok", "好的", "はい", ...): a prompt that is only one of them.
_ACKNOWLEDGEMENTS: Final = frozenset(
    {
        "yes", "yeah", "yep", "ok", "okay", "k", "sure", "no", "nope", "thanks",
        "thank you", "thx", "ty", "go", "go on", "go ahead", "continue", "next", "done",
        "y", "n", "hi", "hello", "hey", "please", "lgtm", "sounds good", "ok thanks",
        "oui", "non", "merci", "d'accord", "ja", "nein", "danke", "да", "нет",
        "спасибо", "хорошо", "ок", "好", "好的", "是", "是的", "对", "嗯", "行", "可以",
        "谢谢", "继续", "はい", "いいえ", "うん", "ええ", "了解", "ありがとう", "続けて",
        "ครับ", "ค่ะ", "ใช่", "โอเค", "ขอบคุณ", "ขอบคุณครับ", "ขอบคุณค่ะ",
    }
)  # fmt: skip


#: Longer than any acknowledgement with its punctuation: a question, never skipped.
_LONGEST: Final = 40


def _is_cjk(character: str) -> bool:
    """A letter of a script written without spaces between words: wide (Han, kana,
    Hangul), or Thai, Lao, Myanmar or Khmer. Each one counts as a word."""
    if not character.isalpha():
        return False
    return unicodedata.east_asian_width(character) in "WF" or bool(_SPACELESS.match(character))


_SPACELESS: Final = re.compile(f"[{SPACELESS}]")


def _words(text: str) -> int:
    """Words in ``text``: whitespace-separated runs of letters or digits, where every
    letter of a script without spaces between words (CJK, Thai ...) counts as one."""
    count = 0
    for run in text.split():
        cjk = sum(1 for c in run if _is_cjk(c))
        rest = any(c.isalnum() and not _is_cjk(c) for c in run)
        count += cjk + (1 if rest else 0)
    return count


def nothing_to_recall(query: str) -> bool:
    """Whether ``query`` holds nothing a memory could answer: blank, one word (``deploy?``,
    one CJK character), or only an acknowledgement (``yes``, ``ok thanks``, ``好的``).

    Text is compared after NFKC and case folding, with punctuation and symbols dropped,
    so ``OK!``, ``Ｏｋ`` and ``ok.`` are all ``ok``.
    """
    if len(query) > _LONGEST and len(query.split()) > 1:
        return False  # the common case: a sentence (no acknowledgement is this long)
    normal = unicodedata.normalize("NFKC", query).casefold()
    kept = "".join(
        c if not unicodedata.category(c).startswith(("P", "S")) or c == "'" else " " for c in normal
    )
    bare = " ".join(kept.split())
    return _words(bare) <= 1 or bare in _ACKNOWLEDGEMENTS

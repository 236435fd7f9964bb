"""Scripts written without spaces between words, as regular-expression ranges: where a
word cannot be told by spaces, each letter (recall's word count) or each pair of
letters (attribution's units) stands in for one."""

from __future__ import annotations

from typing import Final

__all__ = ["CJK", "SPACELESS"]

#: Thai and Lao, Myanmar, Khmer: not wide, so not CJK, but without spaces all the same.
SPACELESS: Final = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"
#: Han, kana, bopomofo and their radicals and extensions (Hangul is written with spaces).
CJK: Final = (
    "\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3190-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\U00020000-\U0003134f"
)

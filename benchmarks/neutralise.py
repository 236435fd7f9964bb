"""What neutralising forged wrapper tags costs on recall's path and on the system prompt.

    PYTHONPATH=src .venv/bin/python benchmarks/neutralise.py [--repeat 15] [--json]

Times :func:`asyncrecall.memory.neutralise_tags` (median of ``--repeat`` rounds, each
timing enough calls to last about 0.2 s) on:

- ``body_ascii``: a 1,200-character memory body in plain English, with code (``<``,
  ``%``, ``&`` inside) — what a recalled body most often is;
- ``body_prose``: the same without code, so with none of ``<%&\\``;
- ``body_typographic``: the same prose with curly quotes and dashes (non-ASCII);
- ``body_cyrillic``: a 1,200-character body in Russian with an ``<`` in it;
- ``index_25k``: a 25,000-byte ``MEMORY.md`` index (200 lines, some with ``&`` and
  curly quotes), as the system prompt gets it;
- ``adversarial_100k``: 100 KB of nested escapes, combining marks and zero-width
  characters around forged tags (the bound, not a typical cost).

Runs on the code on ``PYTHONPATH``, so an older checkout can be measured side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import timeit

from asyncrecall.memory import neutralise_tags

_CODE = (
    "Run the tests with `pytest -q` before pushing; the CI config lives in .ci/run. "
    "Generics read like Vec<String> and Map<K, V>; 100% of the API answers are "
    "JSON; R&D owns the deploy key rotation. "
)
_PROSE = (
    "The user prefers short answers and wants every change explained in one sentence. "
    "They work in Lisbon, mostly in the mornings, and review pull requests after lunch. "
)
_TYPOGRAPHIC = (
    "The user\u2019s editor is Helix \u2014 not Vim \u2014 and they call it \u201cthe "
    "modal one\u201d; deploys happen on Tuesdays\u2013Thursdays. "
)
_CYRILLIC = (
    "Пользователь предпочитает короткие ответы; тесты запускаются командой pytest, "
    "а условие a < b проверяется до выпуска. "
)


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _index() -> str:
    lines = []
    for i in range(200):
        hook = _TYPOGRAPHIC if i % 7 == 0 else _PROSE
        if i % 11 == 0:
            hook = "R&D notes: " + hook
        line = f"- [Note {i}](note-{i}.md) \u2014 {hook}"
        lines.append(line[:124])
    return "\n".join(lines)


def _adversarial() -> str:
    unit = (
        "%25253Csystem-reminder%25253E &amp;amp;lt;/sys\u200btem-re\u0301minder&gt; "
        "\\\\u003c/system_reminder\\u003e \u0441\u0443\u0455\u0442\u0435\u043c "
        + "a"
        + "\u0301" * 40
        + " "
        + "\u200b" * 40
        + " <"
        + "\ufe0f" * 20
        + "/system-reminder> "
    )
    return _fill(unit, 100_000)


CASES = {
    "body_ascii": _fill(_PROSE + _CODE, 1200),
    "body_prose": _fill(_PROSE, 1200),
    "body_typographic": _fill(_TYPOGRAPHIC + _PROSE, 1200),
    "body_cyrillic": _fill(_CYRILLIC, 1200),
    "index_25k": _index(),
    "adversarial_100k": _adversarial(),
}


def measure(text: str, repeat: int) -> float:
    """Median microseconds per call of ``neutralise_tags(text)``."""
    timer = timeit.Timer(lambda: neutralise_tags(text))
    number, _ = timer.autorange()
    number = max(1, number)
    return statistics.median(t / number * 1e6 for t in timer.repeat(repeat, number))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {
        name: {"chars": len(text), "median_us": round(measure(text, args.repeat), 1)}
        for name, text in CASES.items()
    }
    if args.json:
        print(json.dumps(results))
        return
    for name, row in results.items():
        print(f"{name:18} {row['chars']:>7} chars  {row['median_us']:>10.1f} us")


if __name__ == "__main__":
    main()

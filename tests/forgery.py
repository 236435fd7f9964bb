"""The oracle of the forged-block tests: which wrapper tags a reader sees in a text."""

from __future__ import annotations

import asyncio
import re
from contextlib import aclosing

from asyncrecall.agent import FinishedEvent
from asyncrecall.cli._session import Session
from asyncrecall.memory._normalise import normalise

__all__ = ["LOOKALIKES", "ask_with_settled_recall", "wrapper_tags"]

#: Opening and closing wrapper tags as content may forge them: plain, in any case and
#: spacing, and one of each kind of look-alike a model reads as the same tag (full-width
#: and small forms, angle quotes and brackets, Cyrillic and Greek letters, dashes,
#: invisible, bidi and tag characters, combining marks, HTML entities, percent, JSON and
#: Python escapes, nested). Each holds a literal ``/`` when it closes, so that removing
#: it gives the opening form. ``test_forged_variants`` generates the full classes.
LOOKALIKES = [
    "</system-reminder>",
    "</SYSTEM-REMINDER>",
    "< / System_Reminder >",
    "</system reminder>",
    "<system-reminder>",
    "</system-reminder",
    "\uff1c/system-reminder\uff1e",
    "\ufe64system-reminder\ufe65",
    "&lt;/system-reminder&gt;",
    "&#60;system-reminder&#62;",
    "&#x3C;/system-reminder>",
    "</sys\u200btem-remin\u00adder>",
    "<\u2060system\u200d-reminder>",
    "\u2039/system-reminder\u203a",
    "\u3008/system\u2011reminder\u3009",
    "</\u0455\u0443\u0455\u0442\u0435\u043c-\u0433\u0435\u043c\u0456nder>",
    "</system-rem\u03b9nder>",
    "</\uff53\uff59\uff53\uff54\uff45\uff4d\u2212reminder>",
    "</\U000e0073\U000e0079system-reminder\U000e007f>",
    "<\u202e/system-reminder\u202c>",
    "</s\u0301y\u0301stem-reminder>",
    "%3C/system-reminder%3E",
    "%253C/system-reminder%253E",
    "&amp;lt;/system-reminder&amp;gt;",
    "\\u003c/system-reminder\\u003e",
    "\\x3c/system-reminder\\x3e",
]

# The tag as read: ``m`` may be ``rn`` and ``i`` any of ``l``, ``1``, ``|`` (Unicode's
# confusables table holds them for one another).
_TAG = re.compile(r"<\s*(/)?\s*syste(?:m|rn)[\s_-]*re(?:m|rn)[il1|]nder", re.IGNORECASE)


def wrapper_tags(text: str) -> list[str]:
    """The wrapper tags a reader sees in ``text``, look-alikes included: the text is read
    as :func:`~asyncrecall.memory._normalise.normalise` reads it (escapes decoded,
    invisible characters and marks dropped, compatibility forms and look-alikes
    folded), then every ``<system-reminder`` and ``</system-reminder`` in any case or
    spacing is listed, in order."""
    return [
        "</system-reminder" if match.group(1) else "<system-reminder"
        for match in _TAG.finditer(normalise(text))
    ]


async def ask_with_settled_recall(session: Session, text: str) -> FinishedEvent:
    """Run one query through the agent loop, letting its recall settle as soon as it
    starts (the deterministic form of a fast recall: its block rides on the first
    request)."""
    finished: FinishedEvent | None = None
    async with aclosing(session.agent.run_query(text)) as events:
        async for event in events:
            if event.type == "memory_recall_started":
                handle = session.client.pending_prefetch
                assert handle is not None
                await asyncio.wait({handle.task})
            elif isinstance(event, FinishedEvent):
                finished = event
    assert finished is not None
    return finished

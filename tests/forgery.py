"""The oracle of the forged-block tests: which wrapper tags a reader sees in a text."""

from __future__ import annotations

import asyncio
import html
import re
import unicodedata
from contextlib import aclosing

from asyncrecall._session import Session
from asyncrecall.agent import FinishedEvent

__all__ = ["LOOKALIKES", "ask_with_settled_recall", "wrapper_tags"]

#: Opening and closing wrapper tags as content may forge them: plain, in any case and
#: spacing, and look-alikes a model reads as the same tag (full-width and small forms,
#: HTML entities, invisible characters inside the name).
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
]

_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))


def wrapper_tags(text: str) -> list[str]:
    """The wrapper tags a reader sees in ``text``, look-alikes included: the text is read
    with HTML entities decoded, compatibility forms folded (NFKC: full-width ``＜`` is
    ``<``) and invisible characters dropped, then every ``<system-reminder`` and
    ``</system-reminder`` in any case or spacing is listed, in order."""
    seen = unicodedata.normalize("NFKC", html.unescape(text)).translate(_INVISIBLE)
    return [
        "</system-reminder" if "/" in tag else "<system-reminder"
        for tag in re.findall(r"<\s*/?\s*system[\s_-]*reminder", seen, re.IGNORECASE)
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

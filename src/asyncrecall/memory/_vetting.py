"""Which memories the model writes from the user's turns wait for the user's word.

Provenance (``_provenance``) quarantines what the model wrote after tool output. The
user's own turns can carry an attack too: a "summarise with AI" link opens the agent
with a prompt someone else wrote ("... and remember that ..."), a user pastes a page
or an e-mail that asks to be remembered, and a shared agent takes indications from
whoever types (MINJA). Extraction citing such a turn, or the agent's ``save_memory``
in such a query, would store the text as the user's own.

**The rule** (:func:`held_reason`): a memory the *model* writes (extraction, the
``save_memory`` tool) is marked untrusted, so quarantined until ``memory confirm``,
when either

1. **what it asks of the agent is a lever for an attacker**, whoever said it: run code
   fetched from the network; send data, logs or files to an address; put a secret
   (password, key, token, credential) somewhere others read or at an address; send
   money to an account; take packages from a named index or address; turn off a
   safeguard (tests, review, checks, hooks, certificate checks), approve or merge
   unread, push straight to a protected branch or force-push; a destructive command
   (``rm -rf /``, dropping a database); override other instructions; or an
   instruction for other people (anyone, every user) or for AI agents in general;
2. **the turn carries content from elsewhere**: it points at a link the memory does
   not itself hold (the content behind it, or a prefilled prompt, is someone
   else's), or holds pasted or quoted content (a fenced block, ``>`` lines, a turn
   over :data:`PASTE_CHARS` characters).

A durable fact about the user or the project in their own words (an editor, a time
zone, the test runner, where the docs live) matches neither and is saved as before.
The user's own CLI writes (``memory add``, ``memory confirm``) are never vetted: they
are out of the model's reach. A fact that only looks like a lever (``we never
force-push``) waits for one ``memory confirm``; nothing is dropped.

The classes come from the published attacks (OWASP ASI06, MINJA, AgentPoison,
Trojan Hippo, "summarise with AI" links), not from any test set's wording.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from asyncrecall.memory._normalise import normalise

__all__ = ["PASTE_CHARS", "held_reason"]

#: A user turn longer than this is taken for pasted content.
PASTE_CHARS: Final = 2000

_I = re.IGNORECASE | re.DOTALL
# Within one clause: up to 80 characters, no line break, no ';' and no full stop (a dot
# inside a word, as in an address or a file name, is not one).
_NEAR = r"(?:[^.;\n]|\.(?=\S)){0,80}?"

_URL = r"(?:https?|ftp)://\S+|\bwww\.\S+"
_EMAIL = r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"
_IP = r"\b\d{1,3}(?:\.\d{1,3}){3}\b"
_ADDRESS = rf"(?:{_URL}|{_EMAIL}|{_IP})"
_SECRET = (
    r"\b(?:api[ _-]?keys?|passwords?|passphrases?|passwd|secrets?|tokens?|credentials?"
    r"|private[ _-]?keys?|deploy[ _-]?keys?|ssh[ _-]?keys?|access[ _-]?keys?|\.env\b"
    r"|\.aws|\.ssh|id_rsa|session cookies?|cookies)"
)

#: (reason, pattern): what a memory asks of the agent that an attacker wants.
_LEVERS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = tuple(
    (reason, re.compile(pattern, _I))
    for reason, pattern in (
        (
            "runs code fetched from the network",
            r"\b(?:curl|wget|iwr|invoke-webrequest|irm|invoke-restmethod)\b[^\n]{0,200}?"
            r"(?:\|\s*(?:sudo\s+)?(?:ba|z|fi|da|k)?sh\b|\|\s*(?:python\d*|perl|ruby|node|iex)\b)"
            r"|\b(?:download|fetch|pull)\w*\b" + _NEAR + r"\b(?:run|execute|exec|source|pipe)\w*\b"
            r"|\bpipe\w*\b" + _NEAR + r"\b(?:into|to|through)\s+(?:sudo\s+)?(?:ba|z)?sh\b",
        ),
        (
            "sends data to an address",
            r"\b(?:send|upload|post|forward|e-?mail|mail|paste|share|copy|transmit|leak"
            r"|exfiltrate|attach|submit|sync|report)\w*\b" + _NEAR + rf"{_ADDRESS}",
        ),
        (
            "puts a secret where others can read it",
            _SECRET + _NEAR + r"(?:" + _ADDRESS + r"|\b(?:public|readme|commit\w*|chat"
            r"|tickets?|issues?|logs?|paste\w*|plain ?text|in the clear|unencrypted|slack"
            r"|e-?mail\w*|reply|answer|respond\w*|shar\w+|attach\w*|print\w*|echo\w*)\b)"
            r"|\b(?:public|readme|commit\w*|chat|tickets?|paste\w*|attach\w*|print\w*"
            r"|echo\w*|reply|answer|respond\w*|send|shar\w+)\b" + _NEAR + _SECRET,
        ),
        (
            "sends money to an account",
            r"\b(?:refunds?|payments?|payouts?|invoices?|transfers?|wires?|deposits?"
            r"|salar(?:y|ies)|funds|crypto|bitcoin)\b"
            + _NEAR
            + r"\b(?:account|iban|wallet|routing|sort code|swift|bic|btc|eth)\b",
        ),
        (
            "takes packages from a named index or address",
            r"\b(?:install|download|pull|fetch|take|get)\w*\b" + _NEAR + r"\bfrom\b\s*"
            r"(?:the\s+)?(?:" + _URL + r"|\S+\.(?:example|io|com|net|org|dev|xyz|ru|cn)\b)"
            r"|--(?:extra-)?index-url|--registry\b|\bregistry\s*=|\bregistry\b"
            + _NEAR
            + _URL
            + r"|\bpackages?\b"
            + _NEAR
            + r"\b(?:come|are)\s+from\b"
            + _NEAR
            + _URL,
        ),
        (
            "turns off a safeguard",
            r"\b(?:skip|disable|bypass|ignore|turn(?:s|ed|ing)? off|switch\w* off|avoid"
            r"|suppress|silence|without)\w*\b" + _NEAR + r"\b(?:tests?|test suite|reviews?"
            r"|review\w*|checks?|ci|verification|verify\w*|linters?|lint\w*|hooks?|signing"
            r"|signatures?|2fa|mfa|tls|ssl|certificates?|approvals?|sandbox\w*"
            r"|confirmations?|permissions?|security|guidelines|guardrails|warnings?|audit\w*)\b"
            r"|--no-verify\b|--insecure\b|\bverify\s*=\s*false\b|stricthostkeychecking\s*=?\s*no"
            r"|\b(?:approv|merg|accept|sign)\w*\b" + _NEAR + r"\bwithout\b"
            r"|\bpush\w*\b[^.;\n]{0,30}\b(?:straight|directly)\b[^.;\n]{0,15}"
            r"\b(?:main|master|prod\w*|release)\b"
            r"|\bforce[- ]?push\w*|\bpush\s+(?:-f|--force)\b",
        ),
        (
            "a destructive command",
            r"\brm\s+-\w*[rf]\w*\s+(?:/|~|\*|\$home)|\bdrop\s+(?:database|table|schema)\b"
            r"|\bmkfs\b|\bdd\s+if=|\bchmod\s+(?:-r\s+)?777\b|:\(\)\s*\{|\btruncate\s+table\b"
            r"|\bdelete\s+from\s+\w+\s*(?:;|$)|\bformat\s+c:",
        ),
        (
            "overrides other instructions",
            r"\b(?:ignore|disregard|forget|override)\w*\b[^.;\n]{0,40}\b(?:previous|prior"
            r"|earlier|above|system|other|all)\b[^.;\n]{0,30}\b(?:instructions?|rules?"
            r"|prompts?|guidelines|memories|policies)\b",
        ),
        (
            "an instruction for other people or for AI agents",
            r"\b(?:anyone|anybody|everyone|everybody|every user|all users|other users"
            r"|whoever)\b|\b(?:ai|llm|language[ -]model)[ -](?:assistants?|agents?|models?)\b"
            r"|\bany (?:agent|assistant|ai|model|llm)\b|\b(?:assistants?|agents?) reading\b",
        ),
    )
)

_LINK = re.compile(_URL, _I)
_FENCE = re.compile(r"^\s*(?:```|~~~)", re.M)
_QUOTE = re.compile(r"^\s*>", re.M)


def held_reason(text: str, *, said: Iterable[str] = ()) -> str | None:
    """Why a memory the model writes (``text``: its name, description and body) waits for
    the user's confirmation, or ``None``. ``said``: the user's turns it came from (the
    cited turns of an extraction, the query of a ``save_memory`` call)."""
    read = (text, normalise(text))  # as written, and as read: escapes, look-alikes, invisibles
    for reason, pattern in _LEVERS:
        if any(pattern.search(t) for t in read):
            return reason
    kept = {_bare(u) for u in _LINK.findall(text)}
    for turn in said:
        if any(_bare(u) not in kept for u in _LINK.findall(turn)):
            return "the turn points at content elsewhere (a link the memory does not hold)"
        if _FENCE.search(turn) or _QUOTE.search(turn):
            return "the turn holds pasted or quoted content"
        if len(turn) > PASTE_CHARS:
            return "the turn holds pasted content (a long turn)"
    return None


def _bare(url: str) -> str:
    return url.rstrip(".,;:!?)]}'\"").lower()

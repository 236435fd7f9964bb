"""Which memories the model writes wait for the user's word.

Provenance (``_provenance``) quarantines what the model wrote after tool output. The
user's own turns can carry an attack too: a "summarise with AI" link opens the agent
with a prompt someone else wrote ("... and remember that ..."), a user pastes a page,
an e-mail or another agent's message that asks to be remembered, and a shared agent
takes indications from whoever types (MINJA). And text the agent read earlier in the
session (a file, a command's output) can come back in a later write.

**The rule** (:func:`vet`): a memory the *model* writes (extraction, the
``save_memory`` tool) is held (marked untrusted, so quarantined until ``memory
confirm``) when

1. **its text derives from text the user did not type** (the first line, by where text
   came from, in any language: :mod:`asyncrecall.memory._attribution`): the session's
   tool output, the answers the model wrote after it, a recalled memory that is itself
   held, and the parts of the user's turns that are someone else's text (a pasted or
   quoted block, a mail, a chat log, text after "translate this:", obfuscated text),
   unless the user's own typed words say the same. A turn with obfuscated text
   (hidden or look-alike characters) holds every write its own words do not state;
2. **the turn points at content elsewhere**: a link the memory does not itself hold
   (the content behind it, or a prefilled prompt, is someone else's);
3. **what it asks of the agent is a lever for an attacker**, whoever said it (the
   second line, by words, English only: :func:`held_reason`): run code fetched from
   the network; send data, logs or files to an address; put a secret (password, key,
   token, credential) somewhere others read or at an address; send money to an
   account; take packages from a named index or address; turn off a safeguard (tests,
   review, checks, hooks, certificate checks), approve or merge unread, push straight
   to a protected branch or force-push; a destructive command (``rm -rf /``, dropping
   a database); override other instructions; or an instruction for other people
   (anyone, every user) or for AI agents in general. Where money goes is also read by
   its shape, in any language: an IBAN whose check digits hold, an IFSC code, a card
   number that passes Luhn's check, a Bitcoin or Ethereum address.

A durable fact about the user or the project in their own words (an editor, a time
zone, the test runner, where the docs live) matches none and is saved as before; when
their own words state it, the write is *attested* (:class:`Verdict`). The user's own
CLI writes (``memory add``, ``memory confirm``) are never vetted: they are out of the
model's reach. A fact that only looks like a lever (``we never force-push``) waits for
one ``memory confirm``; nothing is dropped.

The lever classes come from the published attacks (OWASP ASI06, MINJA, AgentPoison,
Trojan Hippo, "summarise with AI" links), not from any test set's wording.
"""

from __future__ import annotations

import codecs
import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from asyncrecall.memory._attribution import (
    Fingerprint,
    ForeignText,
    attribute,
    foreign_spans,
    own_words,
)
from asyncrecall.memory._normalise import normalise
from asyncrecall.memory._types import MemoryDoc

__all__ = ["Verdict", "held_reason", "held_text", "vet"]

_I = re.IGNORECASE | re.DOTALL
# Within one clause: up to 80 characters, no line break, no ';' and no full stop (a dot
# inside a word, as in an address or a file name, is not one).
_NEAR = r"(?:[^.;\n]|\.(?=\S)){0,80}?"

_URL = r"(?:(?:https?|ftp)://\S+|\bwww\.\S+)"
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
            # A package manager pointed at an address ("point pip at ...", "set uv to
            # use ...").
            + r"|\b(?:pip3?|pipx|uv|poetry|conda|npm|pnpm|yarn|bun|cargo|gem|bundler|goproxy"
            r"|nuget|composer|maven|mvn|gradle|apt|apt-get|brew|helm|docker)\b"
            + _NEAR
            + r"\b(?:at|to|via|through|using|use|uses)\b\s*"
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
            r"|\bforce[- ]?push\w*|\bpush\s+(?:-f|--force)\b"
            r"|\bpush\b[^\n;|&]{0,80}\s\+[\w./-]*:"  # a refspec with '+' forces
            r"|\bpush\b[^\n;|&]{0,80}\s(?:-f|--force(?:-with-lease)?)\b",
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
_SCHEME = re.compile(r"^(?:https?|ftp)://")
_OBFUSCATED = "obfuscated text"


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`vet` decided of a write: ``held``, why it waits for the user's word
    (``""``: it does not); ``attested``, the user's own typed words state its text."""

    held: str = ""
    attested: bool = False


def vet(
    text: str,
    *,
    said: Iterable[str] = (),
    context: Iterable[str] = (),
    foreign: Sequence[Fingerprint | ForeignText] = (),
    partial: bool = False,
    held: Sequence[ForeignText] = (),
) -> Verdict:
    """Whether a write the model makes (``text``: its name, description and body) waits
    for the user's word (see the module doc).

    ``said``: the user's turns it answers (the query of a ``save_memory`` call, the
    turns an extraction was shown); ``context``: the session's other user turns (their
    own words count, their pasted parts are foreign, their links do not hold it);
    ``foreign``: the other text the model was shown (tool output, ...); ``partial``:
    some of that was not kept, so a write the user's words do not state is held;
    ``held``: the held memories the write changes, whose text is someone else's even
    where a user turn repeats it (pasting a held memory back does not confirm it: only
    ``memory confirm`` or the user's own words do)."""
    said, context = list(said), list(context)
    lever = _lever(text)
    if lever is None:
        lever = _link(text, said)
    own: list[str] = []
    pasted: list[ForeignText] = []
    obfuscated = False
    for turn in (*context, *said):
        spans = foreign_spans(turn)
        own.append(own_words(turn, spans))
        for span in spans:
            pasted.append(ForeignText(f"{span.kind} in a user turn", turn[span.start : span.end]))
            obfuscated = obfuscated or span.kind == _OBFUSCATED
    found = attribute(
        text, own=own, foreign=[*pasted, *foreign, *held], not_own=[h.text for h in held]
    )
    if lever is not None:
        return Verdict(lever)
    if found.source is not None:
        return Verdict(
            f"its text comes from {found.source} ({found.why}), not the user's own words"
        )
    if not found.attested and obfuscated:
        return Verdict("the user's turn carries obfuscated text (hidden or look-alike characters)")
    if not found.attested and partial:
        return Verdict("the session showed the model more outside text than was kept to check it")
    return Verdict("", found.attested)


def held_text(doc: MemoryDoc | None) -> tuple[ForeignText, ...]:
    """``doc``'s body as someone else's text when it is a held memory (nothing
    otherwise): the ``held`` of :func:`vet` for a write that changes it (whose name
    and description are that memory's own by design)."""
    if doc is None or not doc.quarantined:
        return ()
    return (ForeignText(f"the held memory {doc.rel_path}", doc.body),)


def held_reason(text: str, *, said: Iterable[str] = ()) -> str | None:
    """Why a memory the model writes (``text``: its name, description and body) waits for
    the user's confirmation, or ``None``: :func:`vet` with the user's turns ``said`` it
    came from and no other outside text."""
    return vet(text, said=said).held or None


# Single characters each followed by the same separator ("f o r c e", "c.u.r.l"), the spaces
# around a dash, and the wider gaps between spelled-out words: how a word is spelled out
# so that a rule reads it no more.
_SPELLED_OUT = re.compile(r"(?<!\w)\w([ \t._*·'`-])(?:\w\1)*\w(?!\w)")
_SPACED_DASH = re.compile(r"[ \t]+-[ \t]+")
_SPACES = re.compile(r"[ \t]{2,}")
# Digits and signs written for the letters they look like ("cur1", "p4ssw0rd", "$kip"),
# a "1" read as an "l" in one key and as an "i" in the other.
_DIGIT_LETTERS = (
    str.maketrans("0134578$", "oleastbs"),
    str.maketrans("0134578$!", "oieastbsi"),
)


@functools.cache
def _letter_forms() -> dict[int, str]:
    """Letters written as other symbols that Unicode's tables do not fold: small
    capitals (``ᴄᴜʀʟ``) and regional indicators (``🇫🇴🇷🇨🇪``), as ASCII letters."""
    forms = {0x1F1E6 + i: chr(ord("a") + i) for i in range(26)}
    small = [*range(0x1D00, 0x1D2C), 0x0262, 0x026A, 0x0274, 0x0280, 0x028F, 0x0299, 0x029C]
    for cp in [*small, 0x029F, 0xA730, 0xA731]:
        name = unicodedata.name(chr(cp), "")  # "LATIN LETTER SMALL CAPITAL C", one letter
        if name.startswith("LATIN LETTER SMALL CAPITAL ") and len(name) == 28:
            forms[cp] = name[-1].lower()
    return forms


def _spelled(text: str) -> tuple[str, ...]:
    """``text`` (normalised) with spelled-out words joined, small capitals and regional
    indicators as letters, and digits read as letters: more keys for the rules, beside
    the text as written and as normalised."""
    text = text.translate(_letter_forms())
    joined = _SPELLED_OUT.sub(lambda m: m.group().replace(m.group(1), ""), text)
    joined = _SPACES.sub(" ", _SPACED_DASH.sub("-", joined))
    return tuple(joined.translate(table) for table in _DIGIT_LETTERS)


def _lever(text: str) -> str | None:
    read_as = normalise(text)  # escapes, look-alikes, invisibles undone
    # Also as its reader may be told to read it: backwards, or in ROT13.
    read = (text, read_as, *_spelled(read_as), read_as[::-1], codecs.encode(read_as, "rot13"))
    for reason, pattern in _LEVERS:
        if any(pattern.search(t) for t in read):
            return reason
    if _pays_to(text, read_as):
        return _PAYS_TO
    return None


_PAYS_TO: Final = "names where money goes (a bank account, a card or a wallet)"
# Where money goes, told by its shape and check digits, in any language: an IBAN (ISO
# 13616, mod 97), an Indian bank's IFSC code, a card number (Luhn; not after a "+": a
# phone number in international form), a Bitcoin or Ethereum address.
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b")
_IFSC = re.compile(r"\b[A-Z]{4}0[A-Z0-9]{6}\b")
_CARD = re.compile(r"(?<![\d+-])(?<!\d[ -])\d(?:[ -]?\d){12,18}(?![\d-])")
_WALLET = re.compile(r"\b(?:bc1[02-9ac-hj-np-z]{25,87}|0x[0-9a-fA-F]{40})\b")


def _pays_to(text: str, read_as: str) -> bool:
    """Whether ``text`` (``read_as``: normalised, case folded) names where money goes."""
    if _IFSC.search(unicodedata.normalize("NFKC", text)) or _WALLET.search(read_as):
        return True
    for match in _IBAN.finditer(read_as.upper()):
        code = match[0].replace(" ", "")
        if 15 <= len(code) <= 34:
            moved = code[4:] + code[:4]
            if int("".join(str(int(c, 36)) for c in moved)) % 97 == 1:
                return True
    return any(_luhn(re.sub(r"\D", "", m[0])) for m in _CARD.finditer(read_as))


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        n = int(char) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0 and len(set(digits)) > 1


def _link(text: str, said: Iterable[str]) -> str | None:
    """Held when a turn names a link whose address the memory does not hold (with or
    without its scheme: a model writes ``docs.example/team`` for the user's
    ``https://docs.example/team``)."""
    folded = text.lower()
    for turn in said:
        if any(_address(u) not in folded for u in _LINK.findall(turn)):
            return "the turn points at content elsewhere (a link the memory does not hold)"
    return None


def _address(url: str) -> str:
    """A link's address as a memory may write it: no scheme, no closing punctuation or
    final slash, lower case."""
    bare = url.rstrip(".,;:!?)]}'\"").lower()
    return _SCHEME.sub("", bare).rstrip("/")

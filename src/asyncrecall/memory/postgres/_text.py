"""Values and text of the PostgreSQL store: what a change is, namespaces, URLs, rows.

Pure helpers of ``_store`` and its parts: nothing here touches a connection.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._document import checked_text
from asyncrecall.memory._provenance import is_quarantined, origin_label, parse_provenance
from asyncrecall.memory._store import StoreChange
from asyncrecall.memory._types import MemoryDoc

__all__ = [
    "Announcer",
    "StoreChange",
    "check_text",
    "default_namespace",
    "describe",
    "namespace_key",
    "notify_key",
    "query_text",
    "redact_url",
    "row_doc",
    "text_array",
]

_MAX_QUERY_WORDS: Final = 32
_WORD: Final = re.compile(r"[^\W_]+")


def notify_key(salt: str, namespace: str) -> str:
    """The key of one namespace's notification digests, derived from the database's
    secret (``_rls.KEYS_VIEW`` derives the same in SQL, for the roles bound to it)."""
    text = "\x00".join((salt, "namespace-key", namespace))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Announcer:
    """What a namespace's notifications carry instead of names.

    ``LISTEN`` is open to any role that can connect, even one denied every table, so a
    notification says which namespace and which memory changed only as digests keyed by
    the namespace's own key (:func:`notify_key`: from the database's secret,
    ``asyncrecall_schema.notify_salt``, readable only by the roles granted that table;
    a role that row-level security binds to namespaces gets the keys of those alone):
    the stores of one deployment compute the same digests, an outsider cannot tell a
    namespace or a name from them, nor test a guess, and a tenant cannot either beyond
    its own namespaces."""

    key: str
    namespace: str

    @property
    def namespace_key(self) -> str:
        return self._digest("namespace", self.namespace)

    def memory_id(self, name: str) -> str:
        """The digest a notification about the memory ``name`` carries."""
        return self._digest("memory", self.namespace, name)

    def lock_key(self, rel_path: str) -> int:
        """The advisory lock a save of ``rel_path`` holds: 64 bits of an HMAC keyed by the
        namespace's key. ``pg_locks`` shows every role the keys held, so an unkeyed digest
        of the path would let any role test guesses of other namespaces' file names."""
        text = "\x00".join(("rel_path", self.namespace, rel_path)).encode("utf-8")
        digest = hmac.new(self.key.encode("utf-8"), text, hashlib.sha256).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def _digest(self, *parts: str) -> str:
        text = "\x00".join((self.key, *parts))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def default_namespace(project: Path) -> str:
    """The namespace of a project when none is given: its canonical root folder."""
    from asyncrecall.memory._location import canonical_project_root

    return str(canonical_project_root(project))


def redact_url(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def check_text(what: str, value: str) -> None:
    """:class:`MemoryStoreError` when ``value`` holds a NUL character or a lone surrogate
    (neither can be sent: the driver would raise a bare ``UnicodeEncodeError``)."""
    if "\x00" in value:
        raise MemoryStoreError(f"{what} holds a NUL character, which a database cannot store")
    checked_text(what, value)


def namespace_key(namespace: str) -> str:
    """A short digest of a namespace: its rows' paths and its notifications carry it."""
    return hashlib.sha1(namespace.encode("utf-8"), usedforsecurity=False).hexdigest()[:16]


def query_text(query: str) -> str:
    """The query's first 32 distinct words (letters and digits only), for ``to_tsvector``;
    the lexemes it yields are joined by ``or`` in SQL, so no ``websearch`` operator can
    come from the user (and the text is still sent as a parameter)."""
    words = list(dict.fromkeys(_WORD.findall(query.lower())))
    return " ".join(words[:_MAX_QUERY_WORDS])


def text_array(items: Iterable[str]) -> str:
    """A PostgreSQL ``text[]`` literal of ``items`` (each quoted, ``\\`` and ``"`` escaped)."""
    quoted = (item.replace("\\", "\\\\").replace('"', '\\"') for item in items)
    return "{" + ",".join(f'"{item}"' for item in quoted) + "}"


def describe(exc: BaseException) -> str:
    """The first line of an error's message (its type's name when it has none)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def row_doc(root: Path, row: Iterable[Any]) -> MemoryDoc:
    """A memory from a row of the store's SQL (name, rel_path, description, type, body,
    size, version, mtime, revision, and provenance when the query reads it); its path is
    ``root / rel_path``."""
    name, rel, description, kind, body, size, _version, mtime, revision, *more = row
    sources = parse_provenance(more[0]) if more else ()
    return MemoryDoc(
        path=root / rel,
        rel_path=rel,
        name=name,
        description=description,
        type=kind,
        body=body,
        mtime=float(mtime),
        size=int(size),
        revision=int(revision),
        origin=origin_label(sources),
        quarantined=is_quarantined(sources),
    )

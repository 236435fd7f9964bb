"""The PostgreSQL store's writes: a save's checks and row, a forget's transaction.

A save is one statement (``UPSERT_SQL``: the upsert and its ``NOTIFY``, one
transaction); its checks are the folder's (a non-empty name, a known type, a rendered
document of at most 1 MiB) plus no NUL character. A forget locks the row it finds,
deletes it and notifies, in one transaction.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, LiteralString

from psycopg import Connection
from psycopg.types.json import Jsonb

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._document import (
    checked_fields,
    name_in_any_case,
    render_document,
    safe_file_stem,
)
from asyncrecall.memory._limits import MAX_FILE_BYTES
from asyncrecall.memory._provenance import (
    PROVENANCE_KEY,
    SOURCE_OFFSETS_KEY,
    Source,
    merge_sources,
    parse_provenance,
    parse_source_offsets,
    provenance_json,
)
from asyncrecall.memory._types import MemoryDoc, MemoryType
from asyncrecall.memory.postgres._schema import CHANNEL
from asyncrecall.memory.postgres._sql import (
    DELETE_SQL,
    FOLD_SQL,
    GET_BY_NAME_SQL,
    GET_SQL,
    NOTIFY_SQL,
    fold_params,
)
from asyncrecall.memory.postgres._text import Announcer, check_text, row_doc

__all__ = [
    "REL_PATH_KEY",
    "delete_memory",
    "find_memory",
    "save_row",
    "second_rel_path",
]

#: The unique constraint a save runs into when another name owns its file name.
REL_PATH_KEY: Final = "asyncrecall_memories_namespace_rel_path_key"
_STANDARD_KEYS: Final = frozenset({"name", "description", "type"})


def save_row(
    name: str,
    description: str,
    type: MemoryType | str,
    content: str,
    *,
    updated_at: float | None,
    created_at: float | None = None,
    extra: Mapping[str, Any] | None = None,
    namespace: str,
    announce: Announcer,
    source: str,
    sources: Sequence[Source] = (),
    exact: bool = False,
) -> dict[str, Any]:
    """The parameters of a save's SQL (``UPSERT_SQL``, ``SAVE_NEW_SQL``, ``SAVE_IF_SQL``),
    or :class:`MemoryStoreError` (an empty name, an unknown type, a NUL character, over
    1 MiB rendered, front matter that is not JSON).

    ``extra`` is the folder's: front matter keys beyond name, description and type.
    Its ``source_offsets`` (provenance) goes to ``asyncrecall_sources``, the other keys
    to the row's ``front_matter``. ``sources`` (the write's own last), with those of a
    ``provenance`` key of ``extra`` (an import's), are added to the row's ``provenance``
    as ``after_write`` places them (those carried before the row's, the write's own
    after); ``exact`` (a
    revert): they replace it, so a version comes back with the provenance it had.
    """
    name, description, kind = checked_fields(name, description, type)
    for what, value in (("the name", name), ("the description", description)):
        check_text(f"memory {what}", value)
    check_text(f"memory {name!r}", content)
    body = content.strip("\n")
    keys = {k: v for k, v in (extra or {}).items() if k not in _STANDARD_KEYS}
    # The write's own source is the last of ``sources``; the ones before it, with an
    # import's ``provenance`` key, are carried and go before the row's (``after_write``).
    own = tuple(sources[-1:])
    carried = merge_sources(parse_provenance(keys.pop(PROVENANCE_KEY, None)), sources[:-1])
    text = render_document(name=name, description=description, type=kind, body=body, extra=keys)
    size = len(text.encode("utf-8"))
    if size > MAX_FILE_BYTES:
        raise MemoryStoreError(f"memory {name!r} is over 1 MiB; save a shorter one")
    cited = None
    if SOURCE_OFFSETS_KEY in keys:
        offsets = parse_source_offsets(keys.pop(SOURCE_OFFSETS_KEY))
        cited = Jsonb({k: sorted(set(v)) for k, v in offsets.items()})
    rel = f"{safe_file_stem(name)}.md"
    return {
        "channel": CHANNEL,
        "key": announce.namespace_key,
        "mid": announce.memory_id(name),
        "src": source,
        "ns": namespace,
        "name": name,
        "rel": rel,
        "lock": announce.lock_key(rel),
        "description": description,
        "type": kind,
        "body": body,
        "size": size,
        "at": updated_at,
        "created": created_at,
        "extra": Jsonb(_json_value(name, keys)) if keys else None,
        "sources": cited,
        "provenance": Jsonb(provenance_json(merge_sources(carried, own)))
        if carried or own
        else None,
        "carried": Jsonb(provenance_json(carried)) if carried else None,
        "own": Jsonb(provenance_json(own)) if own else None,
        "exact": exact,
    }


def _json_value(name: str, keys: dict[str, Any]) -> Any:
    """Front matter as JSON: YAML's dates and times become ISO 8601 text."""
    try:
        text = json.dumps(keys, default=_iso, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MemoryStoreError(
            f"memory {name!r}: front matter a database cannot hold ({exc})"
        ) from exc
    if "\\u0000" in text:
        raise MemoryStoreError(f"memory {name!r}: its front matter holds a NUL character")
    return json.loads(text)


def _iso(value: Any) -> str:
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def second_rel_path(row: dict[str, Any], announce: Announcer) -> None:
    """Give a save's row the file name of its name for when another name owns the plain
    one ("Foo bar" and "foo-bar"): the stem and a digest of the name (and its lock)."""
    name = row["name"]
    digest = hashlib.sha1(name.encode("utf-8"), usedforsecurity=False).hexdigest()
    row["rel"] = f"{safe_file_stem(name)}-{digest[:8]}.md"
    row["lock"] = announce.lock_key(row["rel"])


def find_memory(
    conn: Connection[Any], key: str, *, namespace: str, where: str, lock: bool = False
) -> tuple[Any, ...] | None:
    """The row of the memory ``key`` names, ``FOR UPDATE`` when ``lock`` (then inside
    the caller's transaction), or ``None`` when it names none.

    A key names a memory by its exact relative path, else by its exact name, else by
    its name in another case (``casefold``) when exactly one memory has it; several
    raise :class:`MemoryStoreError` listing them. Never by a file-name stem: "C# tips"
    is not "C++ tips" for sharing the file name ``c-tips.md``.
    """
    suffix: LiteralString = " FOR UPDATE" if lock else ""
    params: dict[str, Any] = {"ns": namespace, "key": key}
    row = conn.execute(GET_SQL + suffix, params).fetchone()
    if row is not None:
        return tuple(row)
    rows = conn.execute(FOLD_SQL, fold_params(namespace, key)).fetchall()
    name = name_in_any_case(key, (n for (n,) in rows), where=where)
    if name is None:
        return None
    found = conn.execute(GET_BY_NAME_SQL + suffix, {"ns": namespace, "key": name}).fetchone()
    return tuple(found) if found is not None else None


def delete_memory(
    conn: Connection[Any],
    key: str,
    *,
    namespace: str,
    announce: Announcer,
    source: str,
    root: Path,
    where: str,
    exact: bool = False,
) -> tuple[MemoryDoc, int] | None:
    """Delete the memory ``key`` names (:func:`find_memory`; with ``exact``, only the
    memory of that exact name) and notify, in one transaction; what was removed and its
    version, or ``None`` when there is none."""
    with conn.transaction():
        if exact:
            row = conn.execute(GET_BY_NAME_SQL + " FOR UPDATE", {"ns": namespace, "key": key})
            found = row.fetchone()
        else:
            found = find_memory(conn, key, namespace=namespace, where=where, lock=True)
        if found is None:
            return None
        doc = row_doc(root, found)
        conn.execute(DELETE_SQL, {"ns": namespace, "name": doc.name})
        payload = {"ns": announce.namespace_key, "op": "forget"}
        payload |= {"id": announce.memory_id(doc.name), "v": found[6], "src": source}
        conn.execute(NOTIFY_SQL, (CHANNEL, json.dumps(payload)))
        return doc, int(found[6])

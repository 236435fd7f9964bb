"""The PostgreSQL store's writes: a save's checks and row, a forget's transaction.

A save is one statement (``UPSERT_SQL``: the upsert and its ``NOTIFY``, one
transaction); its checks are the folder's (a non-empty name, a known type, a rendered
document of at most 1 MiB) plus no NUL character. A forget locks the row it finds,
deletes it and notifies, in one transaction.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Final

from psycopg import Connection

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.memory._document import checked_fields, render_document, safe_file_stem
from asyncrecall.memory._postgres_schema import CHANNEL
from asyncrecall.memory._postgres_sql import DELETE_SQL, GET_SQL, NOTIFY_SQL
from asyncrecall.memory._postgres_text import check_text, row_doc
from asyncrecall.memory._scan import MAX_FILE_BYTES
from asyncrecall.memory._types import MemoryDoc, MemoryType

__all__ = ["REL_PATH_KEY", "delete_memory", "save_row", "second_rel_path"]

#: The unique constraint a save runs into when another name owns its file name.
REL_PATH_KEY: Final = "asyncrecall_memories_namespace_rel_path_key"


def save_row(
    name: str,
    description: str,
    type: MemoryType | str,
    content: str,
    *,
    updated_at: float | None,
    namespace: str,
    ns_key: str,
    source: str,
) -> dict[str, Any]:
    """The parameters of ``UPSERT_SQL`` for a save, or :class:`MemoryStoreError` (an
    empty name, an unknown type, a NUL character, over 1 MiB rendered)."""
    name, description, kind = checked_fields(name, description, type)
    for what, value in (("the name", name), ("the description", description)):
        check_text(f"memory {what}", value)
    check_text(f"memory {name!r}", content)
    body = content.strip("\n")
    text = render_document(name=name, description=description, type=kind, body=body)
    size = len(text.encode("utf-8"))
    if size > MAX_FILE_BYTES:
        raise MemoryStoreError(f"memory {name!r} is over 1 MiB; save a shorter one")
    return {
        "channel": CHANNEL,
        "key": ns_key,
        "src": source,
        "ns": namespace,
        "name": name,
        "rel": f"{safe_file_stem(name)}.md",
        "description": description,
        "type": kind,
        "body": body,
        "size": size,
        "at": updated_at,
    }


def second_rel_path(name: str) -> str:
    """The file name of ``name`` when another name owns its plain one ("Foo bar" and
    "foo-bar"): the stem and a digest of the name."""
    digest = hashlib.sha1(name.encode("utf-8"), usedforsecurity=False).hexdigest()
    return f"{safe_file_stem(name)}-{digest[:8]}.md"


def delete_memory(
    conn: Connection[Any],
    key: str,
    *,
    namespace: str,
    ns_key: str,
    source: str,
    root: Path,
) -> tuple[MemoryDoc, int] | None:
    """Delete the memory with this relative path or name and notify, in one
    transaction; what was removed and its version, or ``None`` when there is none."""
    params = {"ns": namespace, "key": key, "stem": f"{safe_file_stem(key)}.md"}
    with conn.transaction():
        found = conn.execute(GET_SQL + " FOR UPDATE", params).fetchone()
        if found is None:
            return None
        doc = row_doc(root, found)
        conn.execute(DELETE_SQL, {"ns": namespace, "name": doc.name})
        payload = {"ns": ns_key, "op": "forget", "name": doc.name[:200]}
        payload |= {"v": found[6], "src": source}
        conn.execute(NOTIFY_SQL, (CHANNEL, json.dumps(payload)))
        return doc, int(found[6])

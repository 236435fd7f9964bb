"""The SQL of the PostgreSQL store, and the knobs of its candidate query.

Every statement is constant text (``LiteralString``): names, namespaces, bodies and
queries travel only as parameters. See ``_store`` for what each one serves and
``_schema`` for the table.
"""

from __future__ import annotations

from typing import Final, LiteralString

__all__ = [
    "CANDIDATES_SQL",
    "COMMON_REFRESH_S",
    "COMMON_ROWS",
    "COMMON_SAMPLE",
    "COMMON_SQL",
    "DELETE_SQL",
    "FOLD_SQL",
    "FORGET_IF_SQL",
    "FRONT_MATTER_SQL",
    "GET_BY_NAME_SQL",
    "GET_SQL",
    "INDEX_SQL",
    "LISTEN_SQL",
    "MATCHES",
    "MATCH_CAP",
    "NAMESPACE_SIZE_SQL",
    "NEWEST_FILL",
    "NOTIFY_SQL",
    "PENDING_SQL",
    "PROVENANCE_SQL",
    "QUARANTINED_SQL",
    "SAVE_IF_SQL",
    "SAVE_NEW_SQL",
    "SCAN_SQL",
    "UPSERT_SQL",
    "fold_params",
]

#: Newest memories added to the full-text matches of a large namespace.
NEWEST_FILL: Final = 20
#: Rows matched by full-text search that are ranked at most (a bound on recall's cost).
MATCH_CAP: Final = 1000
#: Full-text matches offered from a large namespace (beside the newest): fewer than a
#: folder's 200, since each offered memory costs the selector (BM25 tokenises it).
MATCHES: Final = 60
#: A lexeme expected in more rows than this does not select candidates (it would
#: match an arbitrary share of a large namespace).
COMMON_ROWS: Final = 1000
COMMON_REFRESH_S: Final = 600.0
#: The namespace's newest memories whose lexemes are counted to judge which are common.
COMMON_SAMPLE: Final = 2000

# Judged per namespace (another tenant's bulk insert must not make a word common here):
# the namespace's size, then the lexemes of its newest COMMON_SAMPLE memories that,
# at the sample's rate, would be in over COMMON_ROWS of its rows. ``ts_stat`` takes the
# text of a query: the namespace is quoted into it by the server (``format``'s ``%L``).
NAMESPACE_SIZE_SQL: Final[LiteralString] = """
SELECT count(*) FROM asyncrecall_memories WHERE namespace = %(ns)s
"""
COMMON_SQL: Final[LiteralString] = """
SELECT word FROM ts_stat(format(
    'SELECT search FROM asyncrecall_memories WHERE namespace = %%L'
    ' ORDER BY updated_at DESC LIMIT %%s', %(ns)s::text, %(sample)s::integer))
WHERE ndoc::float8 * %(size)s / least(%(size)s, %(sample)s) > %(rows)s
"""

CANDIDATES_SQL: Final[LiteralString] = """
WITH newest AS (
    SELECT name FROM asyncrecall_memories
    WHERE namespace = %(ns)s AND rel_path <> ALL(%(ex)s)
    ORDER BY updated_at DESC, name LIMIT %(small)s
), small AS (SELECT count(*) < %(small)s AS yes FROM newest
), terms AS (
    -- The query's lexemes but the namespace's common ones (expected in over 1,000 of
    -- its rows, from a sample of it): rare terms decide, the rows to rank stay few. ``q``: any
    -- of them; ``q_all``: all of them.
    SELECT websearch_to_tsquery('simple', string_agg(lexeme, ' or ')) AS q,
           websearch_to_tsquery('simple', string_agg(lexeme, ' ')) AS q_all
    FROM unnest(tsvector_to_array(to_tsvector('english', %(q)s))) AS lexeme
    WHERE lexeme <> ALL(%(common)s::text[])
)
(SELECT 0, name, rel_path, description, type, body, size, version,
        extract(epoch FROM updated_at)::float8, xmin::text::bigint, provenance
 FROM asyncrecall_memories
 WHERE namespace = %(ns)s AND name IN (SELECT name FROM newest) AND (SELECT yes FROM small)
 ORDER BY updated_at DESC, name)
UNION ALL
(SELECT 1, name, rel_path, description, type, body, size, version,
        extract(epoch FROM updated_at)::float8, xmin::text::bigint, provenance
 -- The rows holding every rare term first, then those holding some: of each at most
 -- ``cap`` are ranked, so a row that holds them all is never cut for an arbitrary one
 -- holding one of them.
 FROM ((SELECT m.*, m.xmin, terms.q, 0 AS tier
        FROM asyncrecall_memories m, terms
        WHERE m.namespace = %(ns)s AND m.search @@ terms.q_all AND m.rel_path <> ALL(%(ex)s)
          AND NOT (SELECT yes FROM small)
        LIMIT %(cap)s)
       UNION ALL
       (SELECT m.*, m.xmin, terms.q, 1 AS tier
        FROM asyncrecall_memories m, terms
        WHERE m.namespace = %(ns)s AND m.search @@ terms.q AND NOT m.search @@ terms.q_all
          AND m.rel_path <> ALL(%(ex)s) AND NOT (SELECT yes FROM small)
        LIMIT %(cap)s)) AS hits
 ORDER BY tier, ts_rank(search, q) DESC, updated_at DESC LIMIT %(matches)s)
UNION ALL
(SELECT 2, name, rel_path, description, type, body, size, version,
        extract(epoch FROM updated_at)::float8, xmin::text::bigint, provenance
 FROM asyncrecall_memories
 WHERE namespace = %(ns)s AND rel_path <> ALL(%(ex)s) AND NOT (SELECT yes FROM small)
 ORDER BY updated_at DESC, name LIMIT %(fill)s)
"""

SCAN_SQL: Final[LiteralString] = """
SELECT name, rel_path, description, type, body, size, version,
       extract(epoch FROM updated_at)::float8, xmin::text::bigint, provenance
FROM asyncrecall_memories WHERE namespace = %(ns)s
ORDER BY updated_at DESC, name LIMIT %(limit)s
"""

# A key names a memory by its exact relative path, else its exact name (the path
# first); a case-insensitive match is ``FOLD_SQL``'s, never a file-name stem.
GET_SQL: Final[LiteralString] = """
SELECT name, rel_path, description, type, body, size, version,
       extract(epoch FROM updated_at)::float8, xmin::text::bigint, provenance
FROM asyncrecall_memories
WHERE namespace = %(ns)s AND (rel_path = %(key)s OR name = %(key)s)
ORDER BY rel_path = %(key)s DESC
LIMIT 1
"""

GET_BY_NAME_SQL: Final[LiteralString] = """
SELECT name, rel_path, description, type, body, size, version,
       extract(epoch FROM updated_at)::float8, xmin::text::bigint, provenance
FROM asyncrecall_memories WHERE namespace = %(ns)s AND name = %(key)s
"""

# The names that may equal the key in another case, the caller comparing them with
# Python's casefold(): an ASCII name's casefold is its lower case (``COLLATE "C"``:
# ASCII only, whatever the database's locale), so those whose lower case is the key's
# casefold (``STRASSE`` for ``Straße``); and every name holding a non-ASCII character,
# as PostgreSQL's lower() may not fold those as Python does (a namespace has few). Each
# half reads an index of its own (schema version 5), never every name of the namespace.
FOLD_SQL: Final[LiteralString] = """
SELECT name FROM asyncrecall_memories
WHERE namespace = %(ns)s AND lower(name COLLATE "C") = %(folded)s
UNION
SELECT name FROM asyncrecall_memories
WHERE namespace = %(ns)s AND octet_length(name) > length(name)
ORDER BY name
"""


def fold_params(namespace: str, key: str) -> dict[str, str]:
    """:data:`FOLD_SQL`'s parameters for ``key`` in ``namespace``."""
    return {"ns": namespace, "folded": key.casefold()}


_ROW: Final[LiteralString] = """
    RETURNING name, rel_path, description, type, body, size, version,
              extract(epoch FROM updated_at)::float8 AS mtime, xmin::text::bigint AS revision,
              provenance
"""


def _announced(op: LiteralString, cte: LiteralString) -> LiteralString:
    """A write (the ``saved`` CTE), the provenance a save carries (``%(sources)s``, when
    not NULL, written in the same statement) and the write's NOTIFY (sent at commit)."""
    return (
        "WITH saved AS ("
        + cte
        + _ROW
        + """)
, provenance AS (
    INSERT INTO asyncrecall_sources AS s (namespace, name, sources)
    SELECT %(ns)s, name, %(sources)s::jsonb FROM saved WHERE %(sources)s::jsonb IS NOT NULL
    ON CONFLICT (namespace, name) DO UPDATE SET sources = EXCLUDED.sources
)
SELECT name, rel_path, description, type, body, size, version, mtime, revision,
       provenance, pg_notify(%(channel)s::text, json_build_object(
           'ns', %(key)s::text, 'op', '"""
        + op
        + """', 'id', %(mid)s::text,
           'v', version, 'src', %(src)s::text)::text)
FROM saved
"""
    )


# A new row of a save, produced under a transaction-scoped advisory lock on
# (namespace, rel_path) (``%(lock)s``, see ``_text.Announcer.lock_key``), taken
# before the insert looks for a conflict. Without it, two inserts of one new name
# deadlock: each puts its entry into both unique indexes (the name's, which is the
# arbiter, and the file name's); the one waits on the other's file name entry while
# the other waits on its name entry, and PostgreSQL aborts one (40P01). Under the
# lock the second insert starts after the first committed, and finds the name.
_INSERT: Final[LiteralString] = """
    INSERT INTO asyncrecall_memories AS m
        (namespace, name, rel_path, description, type, body, size, front_matter,
         provenance, created_at, updated_at)
    SELECT %(ns)s, %(name)s, %(rel)s, %(description)s, %(type)s, %(body)s, %(size)s,
           %(extra)s::jsonb, %(provenance)s::jsonb,
           coalesce(to_timestamp(%(created)s::float8), to_timestamp(%(at)s::float8),
                    clock_timestamp()),
           coalesce(to_timestamp(%(at)s::float8), clock_timestamp())
    FROM (SELECT pg_advisory_xact_lock(%(lock)s::bigint)) AS rel_path_lock
"""

_SET: Final[LiteralString] = """
        description = %(description)s, type = %(type)s, body = %(body)s, size = %(size)s,
        front_matter = %(extra)s::jsonb, version = m.version + 1,
        provenance = CASE WHEN %(exact)s::boolean THEN %(provenance)s::jsonb
                          ELSE coalesce(%(carried)s::jsonb, '[]'::jsonb)
                               || coalesce(m.provenance, '[{"origin": "user"}]'::jsonb)
                               || coalesce(%(own)s::jsonb, '[]'::jsonb) END,
        created_at = coalesce(to_timestamp(%(created)s::float8), m.created_at),
        updated_at = coalesce(to_timestamp(%(at)s::float8), clock_timestamp())
"""

# A save: one statement, so one transaction and one round trip. A conflict on
# (namespace, name) updates the whole row.
UPSERT_SQL: Final[LiteralString] = _announced(
    "save", _INSERT + "ON CONFLICT (namespace, name) DO UPDATE SET" + _SET
)

# ``save_if`` of a name that must not exist: the insert does nothing (no row) if it does.
SAVE_NEW_SQL: Final[LiteralString] = _announced(
    "save", _INSERT + "ON CONFLICT (namespace, name) DO NOTHING"
)

# ``save_if`` of an existing name: an update of the row only while its revision (the
# ``xmin`` of the row version, which every insert or update renews) is the expected
# one. A concurrent writer's update makes this one wait for its commit, then check
# the condition again on the new row version, where it fails: of two writers with
# the same expected revision exactly one writes.
SAVE_IF_SQL: Final[LiteralString] = _announced(
    "save",
    "UPDATE asyncrecall_memories AS m SET"
    + _SET
    + "WHERE namespace = %(ns)s AND name = %(name)s AND xmin::text::bigint = %(expected)s",
)

# ``forget_if``: the delete of the name at the expected revision only (its provenance
# goes too: ON DELETE CASCADE).
FORGET_IF_SQL: Final[LiteralString] = (
    """
WITH gone AS (
    DELETE FROM asyncrecall_memories
    WHERE namespace = %(ns)s AND name = %(name)s AND xmin::text::bigint = %(expected)s
"""
    + _ROW
    + """)
SELECT name, rel_path, description, type, body, size, version, mtime, revision,
       provenance, pg_notify(%(channel)s::text, json_build_object(
           'ns', %(key)s::text, 'op', 'forget', 'id', %(mid)s::text, 'v', version,
           'src', %(src)s::text)::text)
FROM gone
"""
)

DELETE_SQL: Final[LiteralString] = """
DELETE FROM asyncrecall_memories WHERE namespace = %(ns)s AND name = %(name)s
"""

# The rows with an untrusted source: held or not is then decided by
# ``memory._provenance.is_quarantined`` on their sources in write order, the one rule
# every store and every reader applies.
QUARANTINED_SQL: Final[LiteralString] = """
SELECT rel_path, provenance FROM asyncrecall_memories
WHERE namespace = %(ns)s AND provenance @> '[{"untrusted": true}]'::jsonb
"""

PENDING_SQL: Final[LiteralString] = """
SELECT name FROM asyncrecall_memories
WHERE namespace = %(ns)s AND front_matter -> 'pending' IS NOT NULL
"""

FRONT_MATTER_SQL: Final[LiteralString] = """
SELECT front_matter FROM asyncrecall_memories WHERE namespace = %(ns)s AND name = %(name)s
"""

PROVENANCE_SQL: Final[LiteralString] = """
SELECT provenance FROM asyncrecall_memories WHERE namespace = %(ns)s AND name = %(name)s
"""

INDEX_SQL: Final[LiteralString] = """
SELECT name, rel_path, description, count(*) OVER (),
       sum(octet_length(name) + octet_length(rel_path) + octet_length(description) + 10) OVER ()
FROM asyncrecall_memories WHERE namespace = %(ns)s
ORDER BY created_at, name LIMIT %(lines)s
"""

NOTIFY_SQL: Final[LiteralString] = "SELECT pg_notify(%s, %s)"
LISTEN_SQL: Final[LiteralString] = "LISTEN asyncrecall_memories"

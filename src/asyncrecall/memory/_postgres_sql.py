"""The SQL of the PostgreSQL store, and the knobs of its candidate query.

Every statement is constant text (``LiteralString``): names, namespaces, bodies and
queries travel only as parameters. See ``_postgres`` for what each one serves and
``_postgres_schema`` for the table.
"""

from __future__ import annotations

from typing import Final, LiteralString

__all__ = [
    "CANDIDATES_SQL",
    "COMMON_REFRESH_S",
    "COMMON_ROWS",
    "COMMON_SQL",
    "DELETE_SQL",
    "GET_SQL",
    "INDEX_SQL",
    "LISTEN_SQL",
    "MATCHES",
    "MATCH_CAP",
    "NEWEST_FILL",
    "NOTIFY_SQL",
    "SCAN_SQL",
    "UPSERT_SQL",
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

COMMON_SQL: Final[LiteralString] = """
SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples
FROM pg_stats s JOIN pg_class c ON c.oid = 'asyncrecall_memories'::regclass
WHERE s.schemaname = current_schema() AND s.tablename = 'asyncrecall_memories'
  AND s.attname = 'search'
"""

CANDIDATES_SQL: Final[LiteralString] = """
WITH newest AS (
    SELECT name FROM asyncrecall_memories
    WHERE namespace = %(ns)s AND rel_path <> ALL(%(ex)s)
    ORDER BY updated_at DESC, name LIMIT %(small)s
), small AS (SELECT count(*) < %(small)s AS yes FROM newest
), terms AS (
    -- The query's lexemes but the common ones (expected in over 1,000 rows, from
    -- ANALYZE's statistics), any of them: rare terms decide, the rows to rank stay few.
    SELECT websearch_to_tsquery('simple', string_agg(lexeme, ' or ')) AS q
    FROM unnest(tsvector_to_array(to_tsvector('english', %(q)s))) AS lexeme
    WHERE lexeme <> ALL(%(common)s::text[])
)
(SELECT 0, name, rel_path, description, type, body, size, version,
        extract(epoch FROM updated_at)::float8, xmin::text::bigint
 FROM asyncrecall_memories
 WHERE namespace = %(ns)s AND name IN (SELECT name FROM newest) AND (SELECT yes FROM small)
 ORDER BY updated_at DESC, name)
UNION ALL
(SELECT 1, name, rel_path, description, type, body, size, version,
        extract(epoch FROM updated_at)::float8, xmin::text::bigint
 FROM (SELECT m.*, m.xmin, terms.q
       FROM asyncrecall_memories m, terms
       WHERE m.namespace = %(ns)s AND m.search @@ terms.q AND m.rel_path <> ALL(%(ex)s)
         AND NOT (SELECT yes FROM small)
       LIMIT %(cap)s) AS hits
 ORDER BY ts_rank(search, q) DESC, updated_at DESC LIMIT %(matches)s)
UNION ALL
(SELECT 2, name, rel_path, description, type, body, size, version,
        extract(epoch FROM updated_at)::float8, xmin::text::bigint
 FROM asyncrecall_memories
 WHERE namespace = %(ns)s AND rel_path <> ALL(%(ex)s) AND NOT (SELECT yes FROM small)
 ORDER BY updated_at DESC, name LIMIT %(fill)s)
"""

SCAN_SQL: Final[LiteralString] = """
SELECT name, rel_path, description, type, body, size, version,
       extract(epoch FROM updated_at)::float8, xmin::text::bigint
FROM asyncrecall_memories WHERE namespace = %(ns)s
ORDER BY updated_at DESC, name LIMIT %(limit)s
"""

GET_SQL: Final[LiteralString] = """
SELECT name, rel_path, description, type, body, size, version,
       extract(epoch FROM updated_at)::float8, xmin::text::bigint
FROM asyncrecall_memories
WHERE namespace = %(ns)s
  AND (rel_path = %(key)s OR name = %(key)s OR lower(name) = lower(%(key)s)
       OR rel_path = %(stem)s)
ORDER BY CASE WHEN rel_path = %(key)s THEN 0 WHEN name = %(key)s THEN 1
              WHEN lower(name) = lower(%(key)s) THEN 2 ELSE 3 END, name
LIMIT 1
"""

# One statement, so one transaction and one round trip: the upsert and its NOTIFY
# (delivered at commit). A conflict on (namespace, name) updates the whole row.
UPSERT_SQL: Final[LiteralString] = """
WITH saved AS (
    INSERT INTO asyncrecall_memories AS m
        (namespace, name, rel_path, description, type, body, size, created_at, updated_at)
    VALUES (%(ns)s, %(name)s, %(rel)s, %(description)s, %(type)s, %(body)s, %(size)s,
            coalesce(to_timestamp(%(at)s::float8), clock_timestamp()),
            coalesce(to_timestamp(%(at)s::float8), clock_timestamp()))
    ON CONFLICT (namespace, name) DO UPDATE SET
        description = EXCLUDED.description, type = EXCLUDED.type, body = EXCLUDED.body,
        size = EXCLUDED.size, version = m.version + 1,
        updated_at = coalesce(to_timestamp(%(at)s::float8), clock_timestamp())
    RETURNING name, rel_path, description, type, body, size, version,
              extract(epoch FROM updated_at)::float8 AS mtime, xmin::text::bigint AS revision
)
SELECT name, rel_path, description, type, body, size, version, mtime, revision,
       pg_notify(%(channel)s::text, json_build_object(
           'ns', %(key)s::text, 'op', 'save', 'name', left(name, 200), 'v', version,
           'src', %(src)s::text)::text)
FROM saved
"""

DELETE_SQL: Final[LiteralString] = """
DELETE FROM asyncrecall_memories WHERE namespace = %(ns)s AND name = %(name)s
"""

INDEX_SQL: Final[LiteralString] = """
SELECT name, rel_path, description, count(*) OVER (),
       sum(octet_length(name) + octet_length(rel_path) + octet_length(description) + 10) OVER ()
FROM asyncrecall_memories WHERE namespace = %(ns)s
ORDER BY created_at, name LIMIT %(lines)s
"""

NOTIFY_SQL: Final[LiteralString] = "SELECT pg_notify(%s, %s)"
LISTEN_SQL: Final[LiteralString] = "LISTEN asyncrecall_memories"

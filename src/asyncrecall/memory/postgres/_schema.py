"""The PostgreSQL store's schema: created and migrated forward by the store itself.

``asyncrecall_schema`` holds one row, the schema version. Opening a store reads the
version first, without any DDL: a current schema is used as it is, so an application
role granted only the data (see :data:`GRANTS`) opens the store. A schema that is behind
(or missing) is migrated under a transaction-scoped advisory lock (so eight workers
starting at once migrate once): the version read again, the missing migrations applied
in order and the new version recorded, all in one transaction; a role that may not do
that is told to run ``asyncrecall memory migrate --store URL`` as the schema's owner. A
database whose version is newer than :data:`SCHEMA_VERSION` is refused with a clear
error: older code never writes to a schema it does not know.

Version 1::

    asyncrecall_memories
        namespace    text         the project, an end user, any string the app passes
        name         text         the memory's name (its title)
        rel_path     text         a file name, as in the folder (unique per namespace)
        description  text
        type         text         user | feedback | project | reference
        body         text
        size         integer      bytes of the rendered topic file (front matter + body)
        version      bigint       1, +1 on every update: last write wins, never torn
        created_at   timestamptz
        updated_at   timestamptz  the "modification time" recall and the prompt show
        search       tsvector     generated: name (A), description (B), body (C)
        PRIMARY KEY (namespace, name), UNIQUE (namespace, rel_path)
        GIN (search); btree (namespace, updated_at DESC); btree (namespace, created_at)

Version 2 (extraction and consolidation, ``_extraction``)::

    asyncrecall_extraction         one row per (namespace, session)
        processed    bigint       the cursor: the first transcript offset not processed
        journal      jsonb        the pending writes of an extraction (NULL: none)
        updated_at   timestamptz
    asyncrecall_sources            a memory's provenance, {session: [offsets]}
        (namespace, name) references asyncrecall_memories, ON DELETE CASCADE
    asyncrecall_consolidation      one row per namespace
        last_at, sessions          when the last consolidation ran, sessions since
        locked_at, locked_by       the run in progress (stale after an hour)

Version 3 (an import or export copies everything a memory carries)::

    asyncrecall_memories
        front_matter jsonb        a topic file's front matter keys beyond name,
                                  description, type and source_offsets (NULL: none)

Version 4 (every write kept, each undoable; ``_history``)::

    asyncrecall_history             namespace, name, seq: every save and forget of a
                                    name, with op, rel_path, at, origin, write_id and
                                    the memory's text before and after

Version 5 (a key in another case is looked up through indexes, not by
reading every name of the namespace)::

    asyncrecall_memories
        btree (namespace, lower(name COLLATE "C"))   ASCII lower case, in any locale
        btree (namespace) WHERE octet_length(name) > length(name)   the non-ASCII names

Version 6 (notifications carry no names)::

    asyncrecall_schema
        notify_salt  text         a random secret, made once: notifications carry
                                  digests of namespace and name keyed by it

Version 7 (where each memory came from; ``memory._provenance``)::

    asyncrecall_memories
        provenance   jsonb        the list of sources (origin, session, offsets, at,
                                  untrusted); every save appends its own; NULL: a
                                  memory from before, the user's own

Version 8 (a tenant learns no other namespace's notification digests)::

    no change to the tables: notifications' digests are keyed per namespace
    (``_text.notify_key``), so a role row-level security binds to namespaces gets
    their keys (``_rls``) and not the secret; older code computed other digests

Every statement here is constant text: user data only ever travels as parameters.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg
from psycopg import Connection

from asyncrecall._exceptions import ConfigError
from asyncrecall.memory.postgres._history import HISTORY_TABLE_SQL
from asyncrecall.memory.postgres._text import describe

__all__ = ["CHANNEL", "GRANTS", "SCHEMA_VERSION", "TABLE", "ensure_schema", "notify_salt"]

TABLE: Final = "asyncrecall_memories"
#: The ``LISTEN/NOTIFY`` channel saves and forgets announce themselves on.
CHANNEL: Final = "asyncrecall_memories"

# An arbitrary constant key for pg_advisory_xact_lock: "asyncrecall schema".
_LOCK_KEY: Final = 0x4153_5243_5343_4831

_VERSION_TABLE: Final = """
CREATE TABLE IF NOT EXISTS asyncrecall_schema (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version integer NOT NULL
)
"""

# Migration N takes the schema from version N-1 to N. Append only; never edit one.
_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    (
        """
        CREATE TABLE asyncrecall_memories (
            namespace text NOT NULL CHECK (namespace <> ''),
            name text NOT NULL CHECK (name <> ''),
            rel_path text NOT NULL,
            description text NOT NULL DEFAULT '',
            type text NOT NULL CHECK (type IN ('user', 'feedback', 'project', 'reference')),
            body text NOT NULL,
            size integer NOT NULL,
            version bigint NOT NULL DEFAULT 1,
            created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            search tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('english'::regconfig, name), 'A')
                || setweight(to_tsvector('english'::regconfig, description), 'B')
                || setweight(to_tsvector('english'::regconfig, left(body, 100000)), 'C')
            ) STORED,
            PRIMARY KEY (namespace, name),
            UNIQUE (namespace, rel_path)
        )
        """,
        "CREATE INDEX asyncrecall_memories_search ON asyncrecall_memories USING gin (search)",
        """CREATE INDEX asyncrecall_memories_newest
           ON asyncrecall_memories (namespace, updated_at DESC)""",
        """CREATE INDEX asyncrecall_memories_created
           ON asyncrecall_memories (namespace, created_at, name)""",
    ),
    (  # 2: extraction and consolidation state (see _extraction)
        """
        CREATE TABLE asyncrecall_extraction (
            namespace text NOT NULL,
            session text NOT NULL,
            processed bigint NOT NULL DEFAULT 0 CHECK (processed >= 0),
            journal jsonb,
            updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
            PRIMARY KEY (namespace, session)
        )
        """,
        """
        CREATE TABLE asyncrecall_sources (
            namespace text NOT NULL,
            name text NOT NULL,
            sources jsonb NOT NULL,
            PRIMARY KEY (namespace, name),
            FOREIGN KEY (namespace, name) REFERENCES asyncrecall_memories (namespace, name)
                ON DELETE CASCADE
        )
        """,
        """
        CREATE TABLE asyncrecall_consolidation (
            namespace text PRIMARY KEY,
            last_at timestamptz,
            sessions integer NOT NULL DEFAULT 0,
            locked_at timestamptz,
            locked_by text
        )
        """,
    ),
    (  # 3: the extra front matter of a memory; no table rewrite
        "ALTER TABLE asyncrecall_memories ADD COLUMN IF NOT EXISTS front_matter jsonb",
    ),
    (HISTORY_TABLE_SQL,),  # 4: every write kept, undoable (_history)
    (  # 5: what a key in another case looks up, indexed (_sql.FOLD_SQL)
        """CREATE INDEX IF NOT EXISTS asyncrecall_memories_folded
           ON asyncrecall_memories (namespace, lower(name COLLATE "C"))""",
        """CREATE INDEX IF NOT EXISTS asyncrecall_memories_wide
           ON asyncrecall_memories (namespace) WHERE octet_length(name) > length(name)""",
    ),
    (  # 6: the secret notifications' digests are keyed by (_text.Announcer)
        """ALTER TABLE asyncrecall_schema ADD COLUMN IF NOT EXISTS notify_salt text NOT NULL
           DEFAULT (gen_random_uuid()::text || gen_random_uuid()::text)""",
    ),
    (  # 7: each memory's sources (memory._provenance); no table rewrite
        "ALTER TABLE asyncrecall_memories ADD COLUMN IF NOT EXISTS provenance jsonb",
    ),
    # 8: notification digests keyed per namespace (_text.notify_key). No DDL:
    # the version keeps older code, whose digests differ, from running alongside.
    (),
    # 9: saves' advisory lock keys keyed by the namespace's key (_text.Announcer.lock_key).
    # No DDL: older code, whose keys differ, would not wait for newer code's saves.
    (),
)

#: The schema version this code reads and writes.
SCHEMA_VERSION: Final = len(_MIGRATIONS)

#: What an application role needs to use a migrated schema (``{role}``: yours): no
#: CREATE anywhere; the schema's owner runs ``asyncrecall memory migrate``.
GRANTS: Final = (
    "GRANT SELECT ON asyncrecall_schema TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON asyncrecall_memories, asyncrecall_history,"
    " asyncrecall_sources, asyncrecall_extraction, asyncrecall_consolidation TO {role}",
)


def ensure_schema(conn: Connection[Any], *, where: str) -> int:
    """Create or migrate the schema to :data:`SCHEMA_VERSION`; returns the version found.
    ``conn`` is in autocommit mode. A current schema costs one read and no DDL.

    Raises :class:`ConfigError` when the database's schema is newer than this code, or
    behind it and this role may not migrate it.
    """
    try:
        row = conn.execute("SELECT version FROM asyncrecall_schema").fetchone()
    except psycopg.errors.UndefinedTable:
        row = None
    except psycopg.errors.InsufficientPrivilege:
        raise ConfigError(
            f"this role may not read the memory schema of {where}: grant it the "
            "tables (the README's PostgreSQL section lists the grants)"
        ) from None
    found = int(row[0]) if row is not None else 0
    if found == SCHEMA_VERSION:
        return found
    try:
        return _migrate(conn, where=where)
    except psycopg.errors.InsufficientPrivilege as exc:
        reason = describe(exc)
        raise ConfigError(
            f"the memory database {where} has schema version {found}, this asyncrecall "
            f"needs {SCHEMA_VERSION}, and this role may not migrate it ({reason}): run "
            "`asyncrecall memory migrate --store URL` as the schema's owner"
        ) from None


def _migrate(conn: Connection[Any], *, where: str) -> int:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(_VERSION_TABLE)
        row = conn.execute("SELECT version FROM asyncrecall_schema").fetchone()
        found = int(row[0]) if row is not None else 0
        if found > SCHEMA_VERSION:
            raise ConfigError(
                f"the memory database {where} has schema version {found}, newer than this "
                f"asyncrecall knows ({SCHEMA_VERSION}): upgrade asyncrecall"
            )
        for migration in _MIGRATIONS[found:]:
            for statement in migration:
                conn.execute(statement)
        if found == 0:
            conn.execute("INSERT INTO asyncrecall_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
        elif found < SCHEMA_VERSION:
            conn.execute("UPDATE asyncrecall_schema SET version = %s", (SCHEMA_VERSION,))
    return found


def notify_salt(conn: Connection[Any]) -> str:
    """The database's secret for notification digests (schema version 6)."""
    row = conn.execute("SELECT notify_salt FROM asyncrecall_schema").fetchone()
    assert row is not None  # ensure_schema has written the one row
    return str(row[0])

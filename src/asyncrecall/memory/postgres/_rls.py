"""Row-level security per namespace, an option the schema's owner turns on.

The store keeps every tenant apart in its own queries (each names its namespace). A
deployment that wants the database to enforce it as well, a role per tenant that can
read or write nothing of another's even with its own SQL, runs as the tables' owner:

- :func:`enable_row_security`: ``asyncrecall_tenants`` (role, namespace) and a
  policy on every table of memories, history, provenance and extraction state: a role
  bound to namespaces (rows of ``asyncrecall_tenants`` naming it) sees and writes only
  those; a role bound to none (the fleet's own application role) sees all, as before.
  Each role sees only its own bindings (that table has a policy too). The owner is
  not subject to the policies (PostgreSQL's rule for a table's owner), so
  ``memory migrate`` and administration are unchanged;
- :func:`bind_role`: bind a role to a namespace (it still needs the data grants,
  ``_schema.GRANTS``).

Opt-in, not a migration: the policy is one more filter on every query of a bound
role. Idempotent. Every statement is constant text; names travel as identifiers or
parameters.
"""

from __future__ import annotations

from typing import Any, Final

from psycopg import Connection, sql

__all__ = ["RLS_TABLES", "bind_role", "enable_row_security"]

#: The tables holding a ``namespace`` column, each under the policy.
RLS_TABLES: Final = (
    "asyncrecall_memories",
    "asyncrecall_history",
    "asyncrecall_sources",
    "asyncrecall_extraction",
    "asyncrecall_consolidation",
)

_TENANTS: Final = """
CREATE TABLE IF NOT EXISTS asyncrecall_tenants (
    role name NOT NULL,
    namespace text NOT NULL,
    PRIMARY KEY (role, namespace)
)
"""

_POLICY: Final = """
CREATE POLICY asyncrecall_namespace ON {table}
USING (
    NOT EXISTS (SELECT 1 FROM asyncrecall_tenants)
    OR namespace IN (SELECT t.namespace FROM asyncrecall_tenants t)
)
"""


def enable_row_security(conn: Connection[Any]) -> None:
    """Turn the policies on (see the module), in one transaction, as the tables' owner."""
    with conn.transaction():
        conn.execute(_TENANTS)
        conn.execute("ALTER TABLE asyncrecall_tenants ENABLE ROW LEVEL SECURITY")
        conn.execute("DROP POLICY IF EXISTS asyncrecall_own ON asyncrecall_tenants")
        conn.execute(
            "CREATE POLICY asyncrecall_own ON asyncrecall_tenants USING (role = current_user)"
        )
        conn.execute("GRANT SELECT ON asyncrecall_tenants TO PUBLIC")  # own rows only
        for name in RLS_TABLES:
            table = sql.Identifier(name)
            conn.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(table))
            conn.execute(sql.SQL("DROP POLICY IF EXISTS asyncrecall_namespace ON {}").format(table))
            conn.execute(sql.SQL(_POLICY).format(table=table))


def bind_role(conn: Connection[Any], *, role: str, namespace: str) -> None:
    """Bind ``role`` to ``namespace`` (after :func:`enable_row_security`)."""
    conn.execute(
        "INSERT INTO asyncrecall_tenants (role, namespace) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        (role, namespace),
    )

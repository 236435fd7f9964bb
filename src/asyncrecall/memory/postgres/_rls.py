"""Row-level security per namespace, an option the schema's owner turns on.

The store keeps every tenant apart in its own queries (each names its namespace). A
deployment that wants the database to enforce it as well, a role per tenant that can
read or write nothing of another's even with its own SQL, runs as the tables' owner:

- :func:`enable_row_security`: ``asyncrecall_tenants`` (role, namespace),
  ``asyncrecall_fleet`` (role) and a policy on every table of memories, history,
  provenance and extraction state. It fails closed: a role sees and writes only the
  namespaces it is bound to (its rows of ``asyncrecall_tenants``), every namespace
  only when it is bound to all (its row of ``asyncrecall_fleet``: the fleet's own
  application role), and nothing at all when bound to nothing, so a role forgotten or
  misspelt at binding time is locked out rather than let in. "All namespaces" is a
  table of its own, not a reserved namespace name: any string is a namespace. Each
  role sees only its own bindings (both tables have a policy too). The owner is not
  subject to the policies (PostgreSQL's rule for a table's owner), so ``memory
  migrate`` and administration are unchanged;
- :func:`bind_role`: bind a role to a namespace, or to all (it still needs the data
  grants, ``_schema.GRANTS``); a role the database does not know is refused, and one
  the policies cannot hold (superuser, ``BYPASSRLS``, the tables' owner) is reported;
- the notification secret (``asyncrecall_schema.notify_salt``) is taken from every role
  bound to namespaces only: with it, it could test guessed names of any namespace's
  memories against the notifications it may ``LISTEN`` to. Such a role reads the keys
  of its own namespaces (``_text.notify_key``) from :data:`KEYS_VIEW` instead.

Opt-in, not a migration: the policy is one more filter on every query of a bound
role. Idempotent: run again on a database with an older policy (before, a role bound
to nothing saw every namespace), it replaces that policy. Every statement is constant
text; names travel as identifiers or parameters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, LiteralString

from psycopg import Connection, sql

from asyncrecall._exceptions import ConfigError

__all__ = ["KEYS_VIEW", "NOTIFY_KEY_SQL", "RLS_TABLES", "bind_role", "enable_row_security"]

#: The tables holding a ``namespace`` column, each under the policy.
RLS_TABLES: Final = (
    "asyncrecall_memories",
    "asyncrecall_history",
    "asyncrecall_sources",
    "asyncrecall_extraction",
    "asyncrecall_consolidation",
)

#: The bindings: each table readable by all, each role seeing only its own rows.
_BINDINGS: Final[tuple[tuple[str, LiteralString], ...]] = (
    (
        "asyncrecall_tenants",
        """CREATE TABLE IF NOT EXISTS asyncrecall_tenants (
            role name NOT NULL,
            namespace text NOT NULL,
            PRIMARY KEY (role, namespace)
        )""",
    ),
    (
        "asyncrecall_fleet",
        """CREATE TABLE IF NOT EXISTS asyncrecall_fleet (
            role name PRIMARY KEY
        )""",
    ),
)

_OWN_ROWS: Final = "CREATE POLICY asyncrecall_own ON {table} USING (role = current_user)"

# The role is named in the policy itself, not left to the bindings' own policies: the
# rule must not depend on a second one being in place.
_POLICY: Final = """
CREATE POLICY asyncrecall_namespace ON {table}
USING (
    namespace IN (SELECT t.namespace FROM asyncrecall_tenants t WHERE t.role = current_user)
    OR EXISTS (SELECT 1 FROM asyncrecall_fleet f WHERE f.role = current_user)
)
"""


#: The notification keys of the namespaces the role is bound to (``_text.notify_key``,
#: the same derivation): what such a role gets instead of the secret, which it may not
#: read. A security barrier: a query's own conditions (a function that leaks what it
#: sees) run only on the rows the view lets through.
KEYS_VIEW: Final = """
CREATE OR REPLACE VIEW asyncrecall_notify_keys WITH (security_barrier) AS
SELECT t.namespace, encode(sha256(
           convert_to(s.notify_salt, 'UTF8') || decode('00', 'hex')
           || convert_to('namespace-key', 'UTF8') || decode('00', 'hex')
           || convert_to(t.namespace, 'UTF8')
       ), 'hex') AS key
FROM asyncrecall_tenants t CROSS JOIN asyncrecall_schema s
WHERE t.role = current_user
"""

#: A namespace's notification key, for a role that may not read the secret.
NOTIFY_KEY_SQL: Final = "SELECT key FROM asyncrecall_notify_keys WHERE namespace = %s"

# The roles bound to namespaces but not to all, that the policies hold: they must not
# read the secret (its column is all they lose of asyncrecall_schema).
_TENANT_ROLES: Final = """
SELECT DISTINCT t.role::text FROM asyncrecall_tenants t JOIN pg_roles r ON r.rolname = t.role
WHERE NOT (r.rolsuper OR r.rolbypassrls)
  AND r.oid <> (SELECT relowner FROM pg_class WHERE oid = 'asyncrecall_schema'::regclass)
  AND NOT EXISTS (SELECT 1 FROM asyncrecall_fleet f WHERE f.role = t.role)
ORDER BY 1
"""

_FLEET_ROLES: Final = """
SELECT f.role::text FROM asyncrecall_fleet f JOIN pg_roles r ON r.rolname = f.role ORDER BY 1
"""


def enable_row_security(
    conn: Connection[Any], *, bind: Iterable[tuple[str, str | None]] = ()
) -> list[str]:
    """Turn the policies on (see the module; an older policy is replaced) and bind each
    (role, namespace) of ``bind`` (``None``: all namespaces), in one transaction, as the
    tables' owner: a role refused by :func:`bind_role` leaves everything as it was.
    The warnings to show: roles the policies do not hold, and no role bound to all
    namespaces (then every role but the owner sees only its own namespaces, the fleet's
    included)."""
    warnings: list[str] = []
    with conn.transaction():
        for name, create in _BINDINGS:
            table = sql.Identifier(name)
            conn.execute(create)
            conn.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(table))
            conn.execute(sql.SQL("DROP POLICY IF EXISTS asyncrecall_own ON {}").format(table))
            conn.execute(sql.SQL(_OWN_ROWS).format(table=table))
            conn.execute(sql.SQL("GRANT SELECT ON {} TO PUBLIC").format(table))  # own rows only
        for name in RLS_TABLES:
            table = sql.Identifier(name)
            conn.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(table))
            conn.execute(sql.SQL("DROP POLICY IF EXISTS asyncrecall_namespace ON {}").format(table))
            conn.execute(sql.SQL(_POLICY).format(table=table))
        for role, namespace in bind:
            warning = bind_role(conn, role=role, namespace=namespace)
            if warning is not None:
                warnings.append(warning)
        conn.execute(KEYS_VIEW)
        conn.execute("GRANT SELECT ON asyncrecall_notify_keys TO PUBLIC")  # own rows only
        warnings += _keep_the_secret(conn)
        if conn.execute("SELECT 1 FROM asyncrecall_fleet LIMIT 1").fetchone() is None:
            warnings.append(
                "no role is bound to all namespaces: every role but the owner sees only the "
                "namespaces it is bound to (bind the fleet's role with --bind-all ROLE)"
            )
    return warnings


def bind_role(conn: Connection[Any], *, role: str, namespace: str | None) -> str | None:
    """Bind ``role`` to ``namespace``, or to every namespace when it is ``None`` (after
    :func:`enable_row_security`). :class:`ConfigError` when the database has no role of
    that exact name (a binding of a misspelt role would protect nothing and leave the
    real one locked out); a warning to show when the policies do not apply to it."""
    found = conn.execute(
        """SELECT r.rolsuper, r.rolbypassrls, r.oid = c.relowner
           FROM pg_roles r, pg_class c
           WHERE r.rolname = %s AND c.oid = 'asyncrecall_memories'::regclass""",
        (role,),
    ).fetchone()
    if found is None:
        raise ConfigError(
            f"no role {role!r} in this database (names are case-sensitive): nothing was bound"
        )
    if namespace is None:
        conn.execute(
            "INSERT INTO asyncrecall_fleet (role) VALUES (%s) ON CONFLICT DO NOTHING", (role,)
        )
    else:
        conn.execute(
            "INSERT INTO asyncrecall_tenants (role, namespace) VALUES (%s, %s)"
            " ON CONFLICT DO NOTHING",
            (role, namespace),
        )
    superuser, bypass, owner = found
    if superuser:
        why = "is a superuser"
    elif bypass:
        why = "has BYPASSRLS"
    elif owner:
        why = "owns the tables"
    else:
        return None
    return f"role {role!r} {why}: row-level security does not apply to it, it sees every namespace"


def _keep_the_secret(conn: Connection[Any]) -> list[str]:
    """Take the secret's column from every role bound to namespaces only (with it, it
    could test guessed names of any namespace's memories against the notifications),
    give the whole table back to the roles bound to all (one bound to a namespace
    before lost it), and warn of a role that can still read it: granted through PUBLIC
    or a role it belongs to. Run at every :func:`enable_row_security`: it repairs a
    later ``GRANT SELECT ON asyncrecall_schema`` to such a role."""
    warnings = []
    for (role,) in conn.execute(_TENANT_ROLES).fetchall():
        name = sql.Identifier(role)
        conn.execute(sql.SQL("REVOKE SELECT ON asyncrecall_schema FROM {}").format(name))
        conn.execute(
            sql.SQL("GRANT SELECT (singleton, version) ON asyncrecall_schema TO {}").format(name)
        )
        readable = conn.execute(
            "SELECT has_column_privilege(%s, 'asyncrecall_schema', 'notify_salt', 'SELECT')",
            (role,),
        ).fetchone()
        if readable == (True,):
            warnings.append(
                f"role {role!r} can still read asyncrecall_schema.notify_salt (granted through "
                "PUBLIC or a role it belongs to): it could test guessed names of other "
                "namespaces' memories against the change notifications"
            )
    for (role,) in conn.execute(_FLEET_ROLES).fetchall():
        conn.execute(
            sql.SQL("GRANT SELECT ON asyncrecall_schema TO {}").format(sql.Identifier(role))
        )
    return warnings

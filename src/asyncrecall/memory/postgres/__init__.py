"""The PostgreSQL memory store, for fleets of workers sharing one database.

- ``_store``: :class:`~asyncrecall.memory.PostgresStore` (the connection pool,
  reads, saves, forgets, the index);
- ``_schema`` and ``_sql``: the tables and the statements; ``_text``: rows to
  documents, names to keys, the full-text query;
- ``_candidates``: what recall offers a selector (full-text search, newest first);
- ``_changes``: the change feed (``LISTEN``/``NOTIFY``) that keeps the caches fresh;
- ``_writes`` and ``_history``: conditional writes and the change history;
- ``_engine``: the connections, loop and listener every store of a database shares in
  a process; ``_loops`` and ``_portal``: recall's connections of the callers' loops, and
  the engine's own loop with the call from other threads;
- ``_extraction``: extraction's and consolidation's state in the database.

The only part of the package that imports psycopg; loaded when a PostgreSQL store is
used (``pip install 'asyncrecall[postgres]'``).
"""

"""The memory store as a Model Context Protocol server (``pip install 'asyncrecall[mcp]'``).

Any MCP client (Claude Code, Claude Desktop, Cursor, an agent framework's MCP tool set)
gets the memories asyncrecall's agent recalls, through five tools:

* ``search``: the agent's own recall for a query (the same selector and abstention: no
  memory when nothing is relevant), bodies cut as the memory block cuts them;
* ``show``: one memory, whole; ``list``: the memories, newest first, without bodies;
* ``save``: create or update a memory through the store's own validation and
  confinement (the same as the agent's ``save_memory`` tool), recorded in the memory's
  history with origin ``mcp``;
* ``forget``: remove a memory (its history keeps it: ``asyncrecall memory revert``),
  also recorded with origin ``mcp``.

A client's writes are someone else's unless the server trusts its client
(``trust_client``, ``asyncrecall mcp --trust-client``): what it saves is untrusted,
held ``written by an MCP client`` (stored and listed, not recalled until ``memory
confirm``); a change to a memory the user keeps waits beside it as a pending change
(``memory show``, ``memory confirm``); it forgets only held memories. A trusted client's
saves count as the agent's ``save_memory``; a held memory stays held whoever writes it.

``asyncrecall mcp`` serves the project's memory folder or a PostgreSQL namespace over
stdio or streamable HTTP (see ``docs/mcp.md``); :func:`memory_server` builds the server
for an application that runs or mounts it itself. Store calls run in a worker thread,
one at a time, so a slow database never holds the server's event loop. A store error
(an unknown name, an invalid one, a conflict) is a tool error whose text says why; the
server goes on.
"""

from __future__ import annotations

# A name imported ``as`` itself is not public: the tests take it from here, but it is
# out of ``__all__`` and may change without notice.
from asyncrecall.mcp_server._server import CLIENT_HELD as CLIENT_HELD
from asyncrecall.mcp_server._server import MAX_LIST as MAX_LIST
from asyncrecall.mcp_server._server import MAX_SEARCH as MAX_SEARCH
from asyncrecall.mcp_server._server import ORIGIN as ORIGIN
from asyncrecall.mcp_server._server import memory_server

__all__ = ["memory_server"]

"""The command-line application: its commands (``_run``, ``_chat``, ``_memory`` ...)
and the machinery only it uses, in private modules of this wing: settings
(``_settings``), the session a command builds (``_session``, ``_memory_config``), the
read-ahead of the memory folder at process entry (``_reader``), the detached
extraction worker (``_handoff_worker``) and the trusted project settings
(``_trust_store``). The library (``prefetch``, ``memory``, ``models``, ``agent``,
``integrations``, ``mcp_server``, ``testing``) never imports this package.

Importing it is light: :func:`main` loads the entry point when called, so a child
process that needs one module of the wing (the reader, the hand-off worker) does not
load the command line's.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (see :func:`asyncrecall.cli._main.main`)."""
    from asyncrecall.cli._main import main as run

    return run(argv)

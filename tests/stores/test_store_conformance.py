"""Every store conformance case (``store_conformance``) on both stores: a
:class:`~asyncrecall.memory.FolderStore` in a temporary folder and a
:class:`~asyncrecall.memory.PostgresStore` on a fresh namespace (``conftest``)."""

from __future__ import annotations

from stores.store_conformance import *  # noqa: F403

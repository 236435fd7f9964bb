"""The memory folder: topic files with front matter and their ``MEMORY.md`` index.

- ``_store``: :class:`~asyncrecall.memory.FolderStore`, reading and writing the folder
  (atomic writes, the folder lock, the index kept in step, the change history);
- ``_scan``: the scanner (newest files first, each parsed once, the persisted index of
  parsed files in ``.cache/``);
- ``_watch``: the folder watch that tells the scanner what changed (inotify);
- ``_extraction``: where extraction and consolidation keep their state for a folder
  (provenance in the front matter, cursors and journals in ``<folder>.state/``).

It imports the core (``asyncrecall.memory._*``) and the extraction protocol, never
another store or a selector.
"""

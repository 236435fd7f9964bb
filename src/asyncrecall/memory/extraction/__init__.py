"""Memory the model writes: background extraction and consolidation.

- ``_extract``: the extractor (a transcript slice to memory writes, with its rules);
- ``_consolidate``: consolidation (merge, rewrite and forget plans, and when they run);
- ``_backend``: :class:`ExtractionBackend`, what both need of a store;
- ``_state``: the journal and the per-session cursors.

Each store implements the backend in its own wing (``folder/_extraction``,
``postgres/_extraction``) and hands it over through its ``extraction_backend()``:
nothing here imports a store.
"""

"""The selectors: which memories, of those a store offers, go to the model.

- ``_lexical``: :class:`~asyncrecall.memory.LexicalSelector` (BM25, instant, able to
  abstain; its term counts persist in the folder's ``.cache/``);
- ``_embedding``: :class:`~asyncrecall.memory.EmbeddingSelector` and
  :class:`~asyncrecall.memory.HybridSelector` (the embedded model, fused with BM25);
- ``_model``: :class:`~asyncrecall.memory.ModelSelector` (a side query to a small
  model, with the lexical selector as its instant fallback).

Each implements :class:`~asyncrecall.memory.Selector` and imports only the core.
"""

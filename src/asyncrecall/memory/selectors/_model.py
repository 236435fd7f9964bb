"""The model selector: one side query to a fast model, answered as JSON.

The side query goes through :meth:`asyncrecall.models.Model.generate_json` (the model
layer sends it with ``stream: false``, ``temperature: 0`` and the JSON schema as
``response_format``). Its prompt holds the manifest and then the user's query, one line per
offered file (type, relative path, ISO modification time, description: never bodies).

The selector has **no timeout of its own**: the old design's 1 s timeout fired on cold
starts and was the bug being fixed. Only the caller's cancellation stops it, by
cancelling the task that runs :meth:`ModelSelector.select`, which ends the HTTP
request. ``timeout=`` exists only so the benchmarks can reproduce the old blocking
design; leave it ``None``.
"""

from __future__ import annotations

import asyncio
import enum
import operator
from collections.abc import Sequence
from typing import Any, Final, Literal

from asyncrecall._exceptions import SelectorError
from asyncrecall.memory._budget import MANIFEST_BYTES, MANIFEST_FILES
from asyncrecall.memory._prompt import format_manifest, manifest_line
from asyncrecall.memory._selector import SELECTION_KEY, Selector, validate_selection
from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.selectors._fields import FieldIndex
from asyncrecall.memory.selectors._lexical import LexicalSelector
from asyncrecall.models import Model

__all__ = ["ModelSelector", "selection_schema", "selector_prompt"]

SCHEMA_NAME: Final = "memory_selection"

SYSTEM_PROMPT: Final = (
    "You select memory files for an AI coding agent. You get the user's query and a "
    "manifest of memory files, one per line: type, relative path, modification time "
    "and description. Choose the files that will clearly help the agent answer this "
    "query; if unsure, leave a file out, and choose none when none applies. Answer "
    f'only with JSON: {{"{SELECTION_KEY}": [relative paths copied exactly from the '
    "manifest]}."
)


class _Default(enum.Enum):
    LEXICAL = enum.auto()


def selection_schema(limit: int) -> dict[str, Any]:
    """The JSON schema of the answer: ``{"selected_memories": [<= limit strings]}``."""
    return {
        "type": "object",
        "properties": {
            SELECTION_KEY: {"type": "array", "items": {"type": "string"}, "maxItems": limit},
        },
        "required": [SELECTION_KEY],
        "additionalProperties": False,
    }


def selector_prompt(query: str, docs: Sequence[MemoryDoc], *, limit: int) -> str:
    """The side query's user prompt: the manifest, then the query.

    The manifest comes first because it repeats from one user query to the next:
    endpoints that cache prompt prefixes (vLLM, llama.cpp, OpenAI) skip re-reading
    it (the embedded llama.cpp model reuses its cached prefix the same way).
    """
    return (
        f"Memory files (choose at most {limit}):\n{format_manifest(docs)}\n\nQuery: {query.strip()}"
    )


class ModelSelector:
    """Asks a model which memory files fit the query.

    ``fallback`` is the selector :class:`~asyncrecall.memory.Recaller` asks when this
    one fails with anything but a cancellation (default: a new
    :class:`LexicalSelector`; ``None``: no fallback, the recall is empty).

    The manifest is bounded (:meth:`offer`): at most ``manifest_files`` candidates and
    ``manifest_bytes`` bytes (UTF-8), the first ones offered (a folder offers its newest
    first); the manager reports how many were left out.
    """

    name: Final = "model"

    def __init__(
        self,
        model: Model,
        *,
        fallback: Selector | Literal[_Default.LEXICAL] | None = _Default.LEXICAL,
        timeout: float | None = None,
        manifest_files: int = MANIFEST_FILES,
        manifest_bytes: int = MANIFEST_BYTES,
    ) -> None:
        if manifest_files < 1 or manifest_bytes < 1:
            raise ValueError("manifest_files and manifest_bytes must be at least 1")
        self.model = model
        self.manifest_files = manifest_files
        self.manifest_bytes = manifest_bytes
        self.fallback: Selector | None = (
            LexicalSelector() if fallback is _Default.LEXICAL else fallback
        )
        self.timeout = timeout
        #: The field signal (:mod:`._fields`), shared with a lexical fallback's: the
        #: memories whose name or description answers the query are offered first.
        self.fields: FieldIndex = getattr(self.fallback, "fields", None) or FieldIndex()
        #: The last :meth:`offer`'s memories, bounds, and how many the manifest listed.
        self._offered: tuple[tuple[MemoryDoc, ...], tuple[int, int], int] | None = None

    def __repr__(self) -> str:
        return f"ModelSelector({self.model.name!r}, timeout={self.timeout})"

    async def select(self, query: str, docs: Sequence[MemoryDoc], *, limit: int) -> list[MemoryDoc]:
        """The model's choice, validated; raises :class:`SelectorError` on a bad answer.

        Model errors (:class:`~asyncrecall.ModelError`) propagate unchanged.
        """
        if limit <= 0 or not docs:
            return []
        docs = self.offer(docs)
        request = self.model.generate_json(
            system=SYSTEM_PROMPT,
            prompt=selector_prompt(query, docs, limit=limit),
            schema=selection_schema(limit),
            schema_name=SCHEMA_NAME,
        )
        if self.timeout is None:
            answer = await request
        else:
            try:
                async with asyncio.timeout(self.timeout):
                    answer = await request
            except TimeoutError as exc:
                raise SelectorError(
                    f"side query timed out after {self.timeout:g} s (the old design's timeout)"
                ) from exc
        return validate_selection(_as_mapping(answer), docs, limit=limit)

    def skip_reason(self, query: str, docs: Sequence[MemoryDoc]) -> str | None:
        """Why no side query is worth sending for ``query``, or ``None``: the embedded
        selectors' names gate (the query names something no memory mentions, and too
        little of the rest is known; :meth:`LexicalSelector.names_unknown`), read from a
        lexical fallback that is warm for ``docs`` (nothing is tokenised here), unless
        a memory's name or description answers the query. One abstention rule for the
        instant pass and the side query: on LoCoMo dev, 98 % of the questions asked of
        another conversation's folder, 0.5 % of those asked of their own."""
        lexical = self.fallback
        if not isinstance(lexical, LexicalSelector) or not lexical.abstain:
            return None
        if not lexical.ready(docs) or not lexical.names_unknown(query, docs):
            return None
        return None if self.fields.matches(query, docs) else "names_unknown"

    def prefer(self, query: str, docs: Sequence[MemoryDoc]) -> Sequence[MemoryDoc]:
        """``docs`` with the memories whose name or description answers ``query`` first,
        so the bounded manifest (:meth:`offer`) always lists them; ``docs`` as they are
        when it lists them all anyway (the query is not even read then)."""
        if self.fits(docs):
            return docs
        named = self.fields.matches(query, docs)
        if not named:
            return docs
        first = set(named)
        return [docs[i] for i in named] + [d for i, d in enumerate(docs) if i not in first]

    def offer(self, docs: Sequence[MemoryDoc]) -> Sequence[MemoryDoc]:
        """The documents the manifest lists: the first ``manifest_files``, as many of them
        as fit in ``manifest_bytes`` (``docs`` itself when all do)."""
        last = self._offered
        bounds = (self.manifest_files, self.manifest_bytes)
        if (
            last is not None
            and last[1] == bounds
            and len(last[0]) == len(docs)
            and all(map(operator.is_, last[0], docs))
        ):
            # The same memories and bounds as the last call (an unchanged folder hands
            # back the same objects; recall asks twice per side query): one identity
            # check each.
            kept = last[2]
        else:
            kept = self._fitting(docs)
            self._offered = (tuple(docs), bounds, kept)
        return docs if kept == len(docs) else docs[:kept]

    def fits(self, docs: Sequence[MemoryDoc]) -> bool:
        """Whether the manifest lists every one of ``docs`` (:meth:`offer` cuts none)."""
        return len(self.offer(docs)) == len(docs)

    def _fitting(self, docs: Sequence[MemoryDoc]) -> int:
        """How many of the first ``docs`` the manifest's bounds hold."""
        room = self.manifest_bytes
        kept = 0
        for doc in docs[: self.manifest_files]:
            room -= len(manifest_line(doc).encode("utf-8")) + 1  # its newline
            if room < -1:  # the last line has no newline
                break
            kept += 1
        return kept


def _as_mapping(answer: Any) -> Any:
    """Accept an answer the model layer left as JSON text, as a courtesy."""
    if isinstance(answer, str):
        import json

        try:
            decoded: Any = json.loads(answer)
        except ValueError as exc:
            raise SelectorError("malformed selector answer: not JSON") from exc
        return decoded
    return answer

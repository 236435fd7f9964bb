"""The PostgreSQL store's per-process caches, kept true by ``LISTEN/NOTIFY``.

:class:`ChangeFeed` holds what a store caches (the index text, scans, candidate lists)
and the ``generation`` that every change bumps. The caches are used only while the
``LISTEN`` connection of the store's engine (``_engine``: one per database, which hands
each namespace's notifications to its feeds) is up: a change seen there (another
process's save or forget), a change made here, or a reconnect (changes may have been
missed) empties them and calls the change listeners. A read tags itself with the
generation it started under (:meth:`ChangeFeed.token`) and is cached only if no change
came in meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Final

from asyncrecall.memory._types import MemoryDoc
from asyncrecall.memory.postgres._text import Announcer, StoreChange

__all__ = ["ChangeFeed", "log_listener_end"]

logger = logging.getLogger("asyncrecall.memory")

_CANDIDATE_CACHE: Final = 128

Token = int | None


class ChangeFeed:
    """Caches and change listeners of one store (namespace key ``ns_key``; ``own_id``
    marks the store's own notifications, applied when made rather than when they come
    back). Thread-safe."""

    def __init__(self, own_id: str) -> None:
        self._announce: Announcer | None = None  # known once the store has connected
        self._own_id = own_id
        self._lock = threading.Lock()
        self._listening = False
        self._generation = 0
        self._index: str | None = None
        self._scans: dict[int | None, list[MemoryDoc]] = {}
        self._candidates: OrderedDict[Hashable, list[MemoryDoc]] = OrderedDict()
        self._listeners: list[Callable[[StoreChange], None]] = []

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def listening(self) -> bool:
        return self._listening

    def add_listener(self, callback: Callable[[StoreChange], None]) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(callback)

        def remove() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._listeners.remove(callback)

        return remove

    # -- changes ------------------------------------------------------------------------

    def set_announcer(self, announce: Announcer) -> None:
        """The digests this namespace's notifications carry (before listening starts)."""
        self._announce = announce

    def changed(self, op: str, name: str, version: int) -> None:
        """This store's own write."""
        memory_id = self._announce.memory_id(name) if self._announce is not None else ""
        self.seen(StoreChange(op, memory_id, version, time.time(), name))

    def seen(self, change: StoreChange) -> None:
        """A change seen: by the listener (another store's, or a reconnect), or made here."""
        with self._lock:
            self._generation += 1
            self._drop_locked()
            listeners = list(self._listeners)
        for callback in listeners:
            try:
                callback(change)
            except Exception:  # a listener's bug must not stop the invalidation of others
                logger.exception("memory store change listener failed")

    def set_listening(self, up: bool) -> None:
        with self._lock:
            self._listening = up
            self._drop_locked()

    @property
    def namespace_key(self) -> str:
        """The digest of this namespace its notifications carry."""
        assert self._announce is not None  # set when the store connects
        return self._announce.namespace_key

    @staticmethod
    def parse(payload: str) -> tuple[str, str, StoreChange] | None:
        """A notification's namespace digest, source and change; ``None``: not ours."""
        try:
            data = json.loads(payload)
            op, memory_id = str(data.get("op", "")), str(data.get("id", ""))
            change = StoreChange(op, memory_id, int(data["v"]), time.time())
            return str(data["ns"]), str(data.get("src", "")), change
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def seen_from(self, source: str, change: StoreChange) -> None:
        """A change the ``LISTEN`` connection heard (its source: the writing store)."""
        if source != self._own_id:  # our own change was applied when made
            self.seen(change)

    # -- the caches ---------------------------------------------------------------------

    def token(self) -> Token:
        """The generation to tag a read with, or ``None`` when caching is off."""
        with self._lock:
            return self._generation if self._listening else None

    def index(self) -> str | None:
        with self._lock:
            return self._index if self._listening else None

    def keep_index(self, token: Token, text: str) -> None:
        with self._lock:
            if self._still(token):
                self._index = text

    def scan(self, limit: int | None) -> list[MemoryDoc] | None:
        with self._lock:
            return self._scans.get(limit) if self._listening else None

    def keep_scan(self, token: Token, limit: int | None, docs: list[MemoryDoc]) -> None:
        with self._lock:
            if self._still(token):
                self._scans[limit] = docs

    def candidates(self, key: Hashable) -> list[MemoryDoc] | None:
        with self._lock:
            cached = self._candidates.get(key) if self._listening else None
            if cached is not None:
                self._candidates.move_to_end(key)
            return cached

    def keep_candidates(self, token: Token, key: Hashable, docs: list[MemoryDoc]) -> None:
        with self._lock:
            if self._still(token):
                self._candidates[key] = docs
                while len(self._candidates) > _CANDIDATE_CACHE:
                    self._candidates.popitem(last=False)

    def _still(self, token: Token) -> bool:
        return token is not None and self._listening and token == self._generation

    def _drop_locked(self) -> None:
        self._index = None
        self._scans.clear()
        self._candidates.clear()


def log_listener_end(task: asyncio.Task[None]) -> None:
    """The listener's done-callback: a failure (it never ends otherwise) is logged."""
    if not task.cancelled() and task.exception() is not None:
        logger.error("memory store listener failed", exc_info=task.exception())

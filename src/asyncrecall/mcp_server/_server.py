"""The server behind :mod:`asyncrecall.mcp_server`: five tools over one store."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final, Literal

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from asyncrecall import __version__, _telemetry
from asyncrecall._exceptions import AsyncRecallError, MemoryConflictError
from asyncrecall.memory import (
    DEFAULT_LIMIT,
    MemoryDoc,
    Recaller,
    RecallResult,
    Source,
    Store,
    held_reason,
    neutralise_tags,
)
from asyncrecall.memory._prompt import BODY_LIMIT

__all__ = ["CLIENT_HELD", "MAX_LIST", "MAX_SEARCH", "ORIGIN", "memory_server"]

#: The history's ``origin`` of a write made through this server.
ORIGIN: Final = "mcp"
#: Why a save by a client the server does not trust is held (its source's ``held``).
CLIENT_HELD: Final = "written by an MCP client"
#: At most this many memories per ``search`` and per ``list`` call.
MAX_SEARCH: Final = 20
MAX_LIST: Final = 1000

_INSTRUCTIONS: Final = (
    "Long-term memory of this user and project. Call search with the user's request "
    "before answering when earlier sessions may matter (it returns nothing when no "
    "memory is relevant); save what the user asks you to remember or a lasting fact "
    "you learnt (one memory per topic: saving an existing name updates it); forget "
    "what the user asks you to forget."
)
_UNTRUSTED_NOTE: Final = (
    " What you save waits for the user's word (asyncrecall memory confirm) before it "
    "is recalled, and never replaces a memory the user keeps: it waits beside it. You "
    "may forget only memories still waiting for the user's word."
)

MemoryTypeName = Literal["user", "feedback", "project", "reference"]


async def _recall(
    manager: Recaller, query: str, exclude: Sequence[str], limit: int
) -> RecallResult:
    """``search``'s recall; traced while OpenTelemetry is on (delivered at ``search``)."""
    telemetry = _telemetry.current()
    if telemetry is None:
        return await manager.recall(query, excluded_paths=exclude, limit=limit)
    with telemetry.search(len(query), limit) as traced:
        result = await manager.recall(query, excluded_paths=exclude, limit=limit)
        traced.settled(result)
        return result


def _range(low: int, high: int, text: str) -> Any:
    """An integer argument's description and documented range, in its schema; the tool
    checks the range itself, with a message naming it."""
    return Field(
        description=f"{text} ({low}-{high})", json_schema_extra={"minimum": low, "maximum": high}
    )


# Each argument's description and range, as MCP clients show them to the model.
Query = Annotated[str, Field(description="the user's request, or the topic to recall")]
SearchLimit = Annotated[int, _range(1, MAX_SEARCH, "at most this many memories")]
Exclude = Annotated[
    list[str] | None,
    Field(description="relative paths of memories already shown in this conversation"),
]
Name = Annotated[str, Field(description="the memory's name, or its relative path")]
ListLimit = Annotated[int, _range(1, MAX_LIST, "at most this many memories, newest first")]
NewName = Annotated[
    str, Field(description="the memory's name (its title); saving an existing name replaces it")
]
Description = Annotated[str, Field(description="one line: what the memory is about")]
TypeArg = Annotated[
    MemoryTypeName,
    Field(
        description="user (who the user is), feedback (how to work), project (facts of "
        "this project) or reference (where to find things)"
    ),
]
Content = Annotated[str, Field(description="the memory's body, in Markdown")]


def memory_server(
    manager: Recaller, *, name: str = "asyncrecall", trust_client: bool = False
) -> MCPServer[Any]:
    """An MCP server over ``manager``'s store, recalling with ``manager``'s selector.

    Run it with ``.run()`` (stdio), ``.run("streamable-http", host=..., port=...)``, or
    mount ``.streamable_http_app()`` in an ASGI application. The caller owns the store
    and closes it after the server has stopped.

    A client's writes are someone else's unless ``trust_client``: what ``save`` writes
    is untrusted (held ``written by an MCP client``: not recalled until ``memory
    confirm``), a change to a memory the user keeps waits beside it as a pending change,
    and ``forget`` removes only a held memory. With ``trust_client`` its saves count as
    the agent's ``save_memory`` does (vetted, trusted otherwise), except once the server
    has shown a client a held memory (``show`` of one, a ``list`` naming one): the
    lowest trust of what was shown wins, and every later save is held naming that
    memory (the protocol's stateless HTTP does not tell one client from another, so this
    holds for the server, which over stdio serves one client). A held memory stays held
    whoever writes it (only the user lifts a hold).
    """
    store = manager.store
    one_at_a_time = anyio.CapacityLimiter(1)
    # The held memories this server has shown a client (their text is in its context).
    shown_held: list[str] = []

    def saw(docs: Iterable[MemoryDoc]) -> None:
        for doc in docs:
            if doc.quarantined and doc.rel_path not in shown_held:
                shown_held.append(doc.rel_path)

    async def in_thread(call: Any, *args: Any, **kwargs: Any) -> Any:
        def run() -> Any:
            return call(*args, **kwargs)

        try:
            return await anyio.to_thread.run_sync(run, limiter=one_at_a_time)
        except AsyncRecallError as exc:
            raise ToolError(str(exc)) from exc

    instructions = _INSTRUCTIONS if trust_client else _INSTRUCTIONS + _UNTRUSTED_NOTE
    app: MCPServer[Any] = MCPServer(
        name, instructions=instructions, version=__version__, log_level="WARNING"
    )
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @app.tool(annotations=reading)
    async def search(
        query: Query, limit: SearchLimit = DEFAULT_LIMIT, exclude: Exclude = None
    ) -> dict[str, Any]:
        """The memories relevant to ``query``, most relevant first (none when nothing
        is). ``exclude``: relative paths already shown in this conversation."""
        if not 1 <= limit <= MAX_SEARCH:
            raise ToolError(f"limit must be between 1 and {MAX_SEARCH}, got {limit}")
        try:
            result = await _recall(manager, query, exclude or (), limit)
        except AsyncRecallError as exc:
            raise ToolError(str(exc)) from exc
        found: dict[str, Any] = {
            "strategy": result.strategy,
            "memories": [_doc_json(doc, body=BODY_LIMIT) for doc in result.selected],
        }
        if result.fallback_reason:
            found["fallback_reason"] = result.fallback_reason
        if not result.selected and result.reason:
            found["reason"] = result.reason  # why nothing was found (RecallResult.reason)
        return found

    @app.tool(annotations=reading)
    async def show(name: Name) -> dict[str, Any]:
        """One memory, whole: by its name or its relative path."""
        doc: MemoryDoc = await in_thread(store.get, name)
        saw((doc,))
        return _doc_json(doc, body=None)

    @app.tool(name="list", annotations=reading)
    async def list_memories(limit: ListLimit = 100) -> dict[str, Any]:
        """The memories, newest first, without their bodies (``show`` reads one)."""
        if not 1 <= limit <= MAX_LIST:
            raise ToolError(f"limit must be between 1 and {MAX_LIST}, got {limit}")
        docs: list[MemoryDoc] = await in_thread(store.scan, limit=None)
        saw(docs[:limit])
        return {"total": len(docs), "memories": [_doc_json(d, body=0) for d in docs[:limit]]}

    @app.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def save(
        name: NewName, description: Description, type: TypeArg, content: Content
    ) -> dict[str, Any]:
        """Create or update the memory called ``name`` (one line ``description``: what it
        is about; ``type``: user, feedback, project or reference). ``quarantined``: not
        recalled until the user confirms it; ``pending``: the memory keeps the user's
        text, this change waits beside it for the user's word."""
        # A lever for an attacker waits for memory confirm (_vetting); a client the
        # server does not trust writes someone else's text.
        held = held_reason(f"{name}\n{description}\n{content}") or ""
        if not trust_client:
            held = held or CLIENT_HELD
        elif shown_held and not held:
            shown = ", ".join(shown_held[:3])
            held = f"written by an MCP client shown held memory {shown}"
        doc: MemoryDoc = await in_thread(
            store.save_memory, name, description, type, content,
            origin=ORIGIN, sources=(Source.now(ORIGIN, held=held),),
        )  # fmt: skip
        waiting = held and await in_thread(store.pending_of, doc) is not None
        return {
            "saved": doc.name,
            "file": doc.rel_path,
            "quarantined": doc.quarantined,
            "pending": bool(waiting),
        }

    @app.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def forget(name: Name) -> dict[str, Any]:
        """Remove the memory with this name or relative path (from an untrusted client:
        only a quarantined one; the user forgets the others)."""
        if trust_client:
            doc: MemoryDoc = await in_thread(store.forget, name, origin=ORIGIN)
        else:
            doc = await in_thread(_forget_held, store, name)
        return {"forgot": doc.name, "file": doc.rel_path}

    return app


def _forget_held(store: Store, key: str) -> MemoryDoc:
    """Forget the memory ``key`` names only while it is held (quarantined): a client the
    server does not trust never removes a memory recall uses. The removal is
    conditional on the memory as read (a memory confirmed meanwhile stays)."""
    doc = store.get(key)
    if not doc.quarantined:
        raise ToolError(
            f"memory {doc.name!r} is one the user keeps: this server does not let its "
            "client remove it (the user can: asyncrecall memory forget)"
        )
    try:
        return store.forget(doc.rel_path, expected=doc, origin=ORIGIN)
    except MemoryConflictError as exc:
        raise ToolError(f"memory {doc.name!r} changed while it was forgotten: not removed") from exc


def _doc_json(doc: MemoryDoc, *, body: int | None) -> dict[str, Any]:
    """``doc`` for a tool's answer; ``body``: characters of the body to keep (``None``:
    all, 0: none). The client's model reads it: its name, description and body have
    the wrapper tags neutralised (:func:`~asyncrecall.memory.neutralise_tags`), as in
    the agent's memory block, so a memory cannot pose as the client's own reminders."""
    out: dict[str, Any] = {
        "name": neutralise_tags(doc.name),
        "description": neutralise_tags(doc.description),
        "type": doc.type,
        "file": doc.rel_path,
        "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(doc.mtime)),
        # Where it came from; a quarantined memory is held back from recall.
        "origin": doc.origin,
        "quarantined": doc.quarantined,
    }
    if body is None:
        out["body"] = neutralise_tags(doc.body)
    elif body > 0:
        out["body"] = neutralise_tags(doc.body[:body])
        if len(doc.body) > body:
            out["truncated"] = True
    return out

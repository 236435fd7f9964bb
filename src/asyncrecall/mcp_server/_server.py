"""The server behind :mod:`asyncrecall.mcp_server`: five tools over one store."""

from __future__ import annotations

import inspect
import time
from typing import Annotated, Any, Final, Literal

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from asyncrecall import __version__
from asyncrecall._exceptions import AsyncRecallError
from asyncrecall.memory import DEFAULT_LIMIT, MemoryDoc, MemoryManager, Source, held_reason
from asyncrecall.memory._prompt import BODY_LIMIT

__all__ = ["MAX_LIST", "MAX_SEARCH", "ORIGIN", "memory_server"]

#: The history's ``origin`` of a write made through this server.
ORIGIN: Final = "mcp"
#: At most this many memories per ``search`` and per ``list`` call.
MAX_SEARCH: Final = 20
MAX_LIST: Final = 1000

_INSTRUCTIONS: Final = (
    "Long-term memory of this user and project. Call search with the user's request "
    "before answering when earlier sessions may matter (it returns nothing when no "
    "memory is relevant); save what the user asks you to remember or a lasting fact "
    "you learnt (one memory per topic: saving an existing name replaces it); forget "
    "what the user asks you to forget."
)

MemoryTypeName = Literal["user", "feedback", "project", "reference"]


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


def memory_server(manager: MemoryManager, *, name: str = "asyncrecall") -> MCPServer[Any]:
    """An MCP server over ``manager``'s store, recalling with ``manager``'s selector.

    Run it with ``.run()`` (stdio), ``.run("streamable-http", host=..., port=...)``, or
    mount ``.streamable_http_app()`` in an ASGI application. The caller owns the store
    and closes it after the server has stopped.
    """
    store = manager.store
    one_at_a_time = anyio.CapacityLimiter(1)
    # Both stores record who wrote; a store of the app's own may not take the keyword.
    saved_by = {"origin": ORIGIN} if _takes(store.save_memory, "origin") else {}
    forgot_by = {"origin": ORIGIN} if _takes(store.forget, "origin") else {}
    with_sources = _takes(store.save_memory, "sources")

    async def in_thread(call: Any, *args: Any, **kwargs: Any) -> Any:
        def run() -> Any:
            return call(*args, **kwargs)

        try:
            return await anyio.to_thread.run_sync(run, limiter=one_at_a_time)
        except AsyncRecallError as exc:
            raise ToolError(str(exc)) from exc

    app: MCPServer[Any] = MCPServer(
        name, instructions=_INSTRUCTIONS, version=__version__, log_level="WARNING"
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
            result = await manager.recall(query, excluded_paths=exclude or (), limit=limit)
        except AsyncRecallError as exc:
            raise ToolError(str(exc)) from exc
        found: dict[str, Any] = {
            "strategy": result.strategy,
            "memories": [_doc_json(doc, body=BODY_LIMIT) for doc in result.selected],
        }
        if result.fallback_reason:
            found["fallback_reason"] = result.fallback_reason
        return found

    @app.tool(annotations=reading)
    async def show(name: Name) -> dict[str, Any]:
        """One memory, whole: by its name or its relative path."""
        doc: MemoryDoc = await in_thread(store.get, name)
        return _doc_json(doc, body=None)

    @app.tool(name="list", annotations=reading)
    async def list_memories(limit: ListLimit = 100) -> dict[str, Any]:
        """The memories, newest first, without their bodies (``show`` reads one)."""
        if not 1 <= limit <= MAX_LIST:
            raise ToolError(f"limit must be between 1 and {MAX_LIST}, got {limit}")
        docs: list[MemoryDoc] = await in_thread(store.scan, limit=None)
        return {"total": len(docs), "memories": [_doc_json(d, body=0) for d in docs[:limit]]}

    @app.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def save(
        name: NewName, description: Description, type: TypeArg, content: Content
    ) -> dict[str, Any]:
        """Create or update the memory called ``name`` (one line ``description``: what it
        is about; ``type``: user, feedback, project or reference)."""
        vetted: dict[str, Any] = {}
        if with_sources:  # a lever for an attacker waits for memory confirm (_vetting)
            held = held_reason(f"{name}\n{description}\n{content}") or ""
            vetted = {"sources": (Source.now(ORIGIN, held=held),)}
        doc: MemoryDoc = await in_thread(
            store.save_memory, name, description, type, content, **saved_by, **vetted
        )
        return {"saved": doc.name, "file": doc.rel_path}

    @app.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def forget(name: Name) -> dict[str, Any]:
        """Remove the memory with this name or relative path."""
        doc: MemoryDoc = await in_thread(store.forget, name, **forgot_by)
        return {"forgot": doc.name, "file": doc.rel_path}

    return app


def _takes(call: Any, keyword: str) -> bool:
    try:
        return keyword in inspect.signature(call).parameters
    except (TypeError, ValueError):  # a callable without a signature
        return False


def _doc_json(doc: MemoryDoc, *, body: int | None) -> dict[str, Any]:
    """``doc`` for a tool's answer; ``body``: characters of the body to keep (``None``:
    all, 0: none)."""
    out: dict[str, Any] = {
        "name": doc.name,
        "description": doc.description,
        "type": doc.type,
        "file": doc.rel_path,
        "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(doc.mtime)),
        # Where it came from; a quarantined memory is held back from recall (issue 25).
        "origin": doc.origin,
        "quarantined": doc.quarantined,
    }
    if body is None:
        out["body"] = doc.body
    elif body > 0:
        out["body"] = doc.body[:body]
        if len(doc.body) > body:
            out["truncated"] = True
    return out

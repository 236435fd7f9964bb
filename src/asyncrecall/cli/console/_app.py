"""The console's web application: Starlette routes over one store, Jinja2 pages.

Every page is a plain HTML form page (a few lines of script only submit a filter when
it changes). Reads and writes of the store run in a worker thread, one at a time
(:attr:`Console.lock`); every change is one write of the store (``confirm``,
``revert``, ``forget``, ``save_memory`` with the memory as read as precondition), each
recorded in the memory's history, so a change made here is undone as any other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from asyncrecall._exceptions import MemoryStoreError
from asyncrecall.cli.console import _views as views
from asyncrecall.cli.console._guard import TokenGuard, allowed_hosts, form_token_ok
from asyncrecall.cli.console._traces import read_traces
from asyncrecall.memory import MEMORY_TYPES, Store

__all__ = ["FIGURE_SUFFIXES", "LIST_LIMIT", "Console", "create_app"]

_HERE = Path(__file__).parent
#: Memories the list shows at most (the newest; a search narrows the rest).
LIST_LIMIT = 500
#: The picture files the benchmarks page shows.
FIGURE_SUFFIXES = (".svg", ".png")
#: Headers of every page: no script or style from elsewhere, never framed, no referrer
#: to other sites (a same-origin form still sends its Origin, which a POST needs).
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}

_T = TypeVar("_T")


@dataclass(frozen=True)
class Console:
    """What the console serves: the store, its token, the event log, the figures."""

    store: Store
    token: str
    event_log: Path | None = None
    figures: Path | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, compare=False)

    async def run(self, read: Callable[[], _T]) -> _T:
        """``read`` (a store call) in a worker thread, one at a time."""

        def locked() -> _T:
            with self.lock:
                return read()

        return await run_in_threadpool(locked)


def create_app(
    console: Console, *, host: str = "127.0.0.1", routes: Sequence[BaseRoute] = ()
) -> Starlette:
    """The console's ASGI app. ``routes`` are mounted beside the pages, behind the same
    token and host checks (a metrics endpoint, for one)."""
    templates = Jinja2Templates(directory=str(_HERE / "templates"))
    pages = _Pages(console, templates)
    return Starlette(
        routes=[
            Route("/", pages.home),
            Route("/memories", pages.memories),
            Route("/memory", pages.memory),
            Route("/memory/revert", pages.revert, methods=["POST"]),
            Route("/held", pages.held),
            Route("/held/confirm", pages.confirm, methods=["POST"]),
            Route("/held/discard", pages.discard, methods=["POST"]),
            Route("/traces", pages.traces),
            Route("/figures", pages.figures),
            Route("/figures/{file}", pages.figure),
            Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
            *routes,
        ],
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host)),
            Middleware(TokenGuard, token=console.token),
        ],
    )


class _Pages:
    def __init__(self, console: Console, templates: Jinja2Templates) -> None:
        self.console = console
        self.templates = templates

    def page(
        self, request: Request, template: str, status: int = 200, /, **context: Any
    ) -> Response:
        context.setdefault("error", None)
        context.update(
            token=self.console.token,
            done=request.query_params.get("done", ""),
            location=self.console.store.location,
        )
        response = self.templates.TemplateResponse(request, template, context, status_code=status)
        response.headers.update(_HEADERS)
        return response

    async def home(self, request: Request) -> Response:
        del request
        return RedirectResponse("/memories", status_code=303)

    async def memories(self, request: Request) -> Response:
        params = request.query_params
        filters = views.Filters(
            q=params.get("q", ""),
            type=params.get("type", ""),
            origin=params.get("origin", ""),
            held=params.get("held", ""),
        )

        def read() -> tuple[list[Any], set[str], list[str]]:
            docs, waiting = views.matching(self.console.store, filters)
            every = self.console.store.scan(limit=None)
            return docs, waiting, views.origins_of(every)

        docs, waiting, origins = await self.console.run(read)
        return self.page(
            request,
            "memories.html",
            docs=docs[:LIST_LIMIT],
            matched=len(docs),
            waiting=waiting,
            filters=filters,
            types=MEMORY_TYPES,
            origins=origins,
            when=views.when,
        )

    async def memory(self, request: Request) -> Response:
        name = request.query_params.get("name", "")
        store = self.console.store

        def read() -> dict[str, Any]:
            doc = store.find(name)
            records = store.history_of(name)
            if doc is None and not records:
                raise MemoryStoreError(f"no memory called {name!r}")
            found: dict[str, Any] = {
                "doc": doc,
                "versions": views.versions(records),
                "latest": records[-1].seq if records else 0,
                "sources": [],
                "reasons": [],
                "change": None,
                "change_diff": [],
            }
            if doc is not None:
                sources = store.provenance_of(doc)
                change = store.pending_of(doc)
                found.update(
                    sources=[views.source_row(s) for s in sources],
                    reasons=views.hold_reasons(sources) if doc.quarantined else [],
                    change=change,
                    change_diff=views.diff_lines(doc.body, change.body) if change else [],
                )
            return found

        try:
            found = await self.console.run(read)
        except MemoryStoreError as exc:
            return self.page(request, "error.html", 404, error=str(exc))
        return self.page(request, "memory.html", name=name, when=views.when, **found)

    async def revert(self, request: Request) -> Response:
        """Undo the newest write of a memory, or bring back version ``to``; refused
        (409) when the memory was written since the page showed it (``latest``)."""
        form = await request.form()
        if not form_token_ok(form.get("token"), self.console.token):
            return self.page(request, "error.html", 403, error="the form lacks the token")
        name, to, latest = str(form.get("name", "")), form.get("to"), form.get("latest")
        store = self.console.store

        def write() -> str:
            records = store.history_of(name)
            if not records or str(records[-1].seq) != str(latest):
                raise _Stale(f"{name!r} was written since this page showed it: look again")
            version = int(str(to)) if to else None
            doc = store.revert(name, to=version, origin="user")
            return f"reverted {name}" if doc is not None else f"reverted {name}: removed again"

        return await self.change(request, write, _with_query("/memory", name=name))

    async def held(self, request: Request) -> Response:
        items = await self.console.run(lambda: views.held_items(self.console.store))
        return self.page(request, "held.html", items=items, when=views.when)

    async def confirm(self, request: Request) -> Response:
        """What ``memory confirm NAME`` does: the hold lifted, or the waiting change applied."""
        form = await request.form()
        if not form_token_ok(form.get("token"), self.console.token):
            return self.page(request, "error.html", 403, error="the form lacks the token")
        name = str(form.get("name", ""))

        def write() -> str:
            doc = self.console.store.confirm(name)
            return f"confirmed {doc.name}: recall may use it"

        return await self.change(request, write, "/held")

    async def discard(self, request: Request) -> Response:
        """A held memory forgotten, or the change waiting beside a memory dropped (the
        memory saved again as it is, by the user: the user's newer word wins)."""
        form = await request.form()
        if not form_token_ok(form.get("token"), self.console.token):
            return self.page(request, "error.html", 403, error="the form lacks the token")
        name = str(form.get("name", ""))
        store = self.console.store

        def write() -> str:
            doc = store.get(name)
            if doc.quarantined:
                store.forget(name, expected=doc, origin="user")
                return f"discarded {doc.name}: forgotten (memory revert brings it back)"
            if store.pending_of(doc) is None:
                raise _Stale(f"{doc.name!r} is not held and has no change waiting")
            store.save_memory(doc.name, doc.description, doc.type, doc.body, expected=doc,
                              origin="user")  # fmt: skip
            return f"discarded the change waiting beside {doc.name}"

        return await self.change(request, write, "/held")

    async def change(self, request: Request, write: Callable[[], str], back: str) -> Response:
        """Run ``write`` (one store write); back to ``back`` saying what was done, or the
        error page (409: changed meanwhile or refused; the store wrote nothing)."""
        try:
            done = await self.console.run(write)
        except (MemoryStoreError, _Stale, ValueError) as exc:
            return self.page(request, "error.html", 409, error=str(exc))
        joiner = "&" if "?" in back else "?"
        return RedirectResponse(f"{back}{joiner}{urlencode({'done': done})}", status_code=303)

    async def traces(self, request: Request) -> Response:
        path = self.console.event_log
        found = await run_in_threadpool(read_traces, path) if path is not None else []
        return self.page(request, "traces.html", traces=found, log=path, when=views.when)

    async def figures(self, request: Request) -> Response:
        folder = self.console.figures
        files = await run_in_threadpool(_figures, folder) if folder is not None else []
        return self.page(request, "figures.html", files=files, folder=folder)

    async def figure(self, request: Request) -> Response:
        folder, name = self.console.figures, request.path_params["file"]
        if folder is None or name not in await run_in_threadpool(_figures, folder):
            return self.page(request, "error.html", 404, error=f"no figure {name!r}")
        response = FileResponse(folder / name)
        # An SVG opened on its own is a document: no script of it runs.
        response.headers.update({**_HEADERS, "Content-Security-Policy": "default-src 'none'; "
                                 "style-src 'unsafe-inline'; sandbox"})  # fmt: skip
        return response


class _Stale(Exception):
    """The memory changed since the page showed it; nothing was written."""


def _figures(folder: Path) -> list[str]:
    """The picture files directly in ``folder``, by name."""
    try:
        return sorted(
            p.name for p in folder.iterdir() if p.suffix.lower() in FIGURE_SUFFIXES and p.is_file()
        )
    except OSError:
        return []


def _with_query(path: str, **params: str) -> str:
    return f"{path}?{urlencode(params)}"

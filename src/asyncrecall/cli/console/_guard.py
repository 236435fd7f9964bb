"""Who may use the console: the holder of its token, through a host name of this machine.

As Jupyter does: a random token is in the URL the command prints; the first request
that carries it (``?token=``) gets it back as a cookie (``HttpOnly``,
``SameSite=Strict``) and is redirected to the same page without it, so the token
leaves the address bar and the history. A program sends it as ``Authorization:
Bearer TOKEN`` instead. Any other request without the cookie is refused (403). A
request whose ``Host`` is not the bound address or a name of the loopback is refused
before that (400, Starlette's ``TrustedHostMiddleware``): a page of another site that
makes its name resolve to 127.0.0.1 (DNS rebinding) gets no answer. A ``POST`` must
also carry the token in its form (every form of the console does) and, when the
browser sends one, an ``Origin`` of this server: a page of another origin cannot make a
change, even with the cookie.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlencode

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["COOKIE", "TokenGuard", "allowed_hosts", "form_token_ok"]

#: The cookie that carries the token after the first visit.
COOKIE = "asyncrecall_console"

_REFUSED = (
    "asyncrecall console: this needs the console's token; open the URL "
    "`asyncrecall console` printed (http://HOST:PORT/?token=...)\n"
)


def allowed_hosts(host: str) -> list[str]:
    """The ``Host`` names a request may carry: the bound address and the loopback's."""
    names = {host, "127.0.0.1", "localhost", "::1", "[::1]"}
    return sorted(names - {"0.0.0.0", "::", ""})


def same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


class TokenGuard:
    """ASGI middleware: the token (URL once, then the cookie) on every request."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token")
        if same(given, self.token):
            await self._exchange(request)(scope, receive, send)
            return
        if not (same(request.cookies.get(COOKIE), self.token) or self._bearer(request)):
            await PlainTextResponse(_REFUSED, status_code=403)(scope, receive, send)
            return
        if request.method not in ("GET", "HEAD") and not _same_origin(request):
            refused = "asyncrecall console: a change from another origin is refused\n"
            await PlainTextResponse(refused, status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _bearer(self, request: Request) -> bool:
        """``Authorization: Bearer TOKEN``: a program's way in (a scraper, a script),
        which no page of another site can send."""
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and same(given.strip(), self.token)

    def _exchange(self, request: Request) -> Response:
        """The token as a cookie, and the same address without it."""
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        # One leading slash: "//host/..." would send the browser to another site.
        path = "/" + request.url.path.lstrip("/")
        target = URL(path=path, query=urlencode(rest))
        response = RedirectResponse(str(target), status_code=303)
        response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
        return response


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not sent: the form's token (checked by the handler) decides
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


def form_token_ok(form_token: object, token: str) -> bool:
    """Whether a form's ``token`` field is the console's."""
    return isinstance(form_token, str) and same(form_token, token)

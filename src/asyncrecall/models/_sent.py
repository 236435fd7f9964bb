"""Being told when a streamed request of ours is on the wire.

A recall held until the turn's first request is out (``RecallPrefetcher.start``'s
``until_request``) goes on once that request has left: released on a timer, a side
query reached a one-request-at-a-time server before the request it must not delay
whenever the framework's steps between the take and the send outlasted the timer (busy
cores). The clients this package builds (:class:`~asyncrecall.models.OpenAIModel`
without a caller's ``client``) say when: inside :func:`when_sent`, the moment the
request's body has been written to the connection, they call its callback (HTTP/1.1
and HTTP/2, through the HTTP library's ``trace`` extension). Elsewhere nothing is
called and the holder's timer decides.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final

__all__ = ["request_hook", "when_sent"]

_callback: Final[contextvars.ContextVar[Callable[[], None] | None]] = contextvars.ContextVar(
    "asyncrecall_when_sent", default=None
)
_WRITTEN: Final = ".send_request_body.complete"  # http11.… and http2.…


@contextlib.contextmanager
def when_sent(callback: Callable[[], None]) -> Iterator[None]:
    """Inside the block, each request this task (and the tasks it starts) sends through
    a client of ours calls ``callback`` once its body is written (again on a retry)."""
    token = _callback.set(callback)
    try:
        yield
    finally:
        _callback.reset(token)


async def request_hook(request: Any) -> None:
    """The HTTP client's ``request`` event hook: trace the request if someone waits."""
    callback = _callback.get()
    if callback is None:
        return
    before: Callable[[str, dict[str, Any]], Awaitable[None]] | None
    before = request.extensions.get("trace")

    async def trace(name: str, info: dict[str, Any]) -> None:
        if before is not None:
            await before(name, info)
        if name.endswith(_WRITTEN):
            callback()

    request.extensions["trace"] = trace

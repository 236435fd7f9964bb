"""``asyncrecall console``'s web application (Starlette, Jinja2; the ``console`` extra).

:func:`create_app` builds it over one store; ``cli._console`` serves it with uvicorn.
"""

from __future__ import annotations

from asyncrecall.cli.console._app import Console, create_app

__all__ = ["Console", "create_app"]

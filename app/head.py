"""``HEAD`` answered like ``GET`` on every route, without a body.

FastAPI routes a path for the methods it is declared with, so ``HEAD`` of a
page would be ``405``. This middleware (outermost) passes a ``HEAD`` request
on as ``GET``, forwards the response's status and headers (``Content-Length``
included, as ``GET`` would send it) with an empty body, and stops the
handler as soon as the headers are out, so a ``HEAD`` of a large download
never reads its bytes. A route that does not answer ``GET`` answers ``HEAD``
as it answers ``GET``: ``405``.
"""

from __future__ import annotations

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadMiddleware:
    """Answers ``HEAD`` requests with the status and headers of the same ``GET`` and no body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        async with anyio.create_task_group() as group:

            async def headers_only(message: Message) -> None:
                if message["type"] != "http.response.start":
                    return  # the body of a GET: not sent
                await send(message)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                group.cancel_scope.cancel()  # the answer is complete: the handler need not produce its body

            async def as_get() -> None:
                await self.app({**scope, "method": "GET"}, receive, headers_only)

            group.start_soon(as_get)

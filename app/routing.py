"""Register a page once and get both URLs: the HTML page and its JSON twin under ``/api``.

>>> router = APIRouter()
>>> @page(router, "/datasets/{name}")
... async def dataset(request: Request, name: str): ...
"""

from __future__ import annotations

from typing import Any, Callable

from fastapi import APIRouter, Request  # noqa: F401  (Request is used by the doctest)
from fastapi.responses import HTMLResponse

from . import urls
from .errors import ERROR_RESPONSES


def page(router: APIRouter, path: str, *, summary: str | None = None, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Route ``path`` (HTML, left out of the OpenAPI schema) and ``/api`` + ``path`` (JSON, documented) to one handler."""

    def decorate(handler: Callable[..., Any]) -> Callable[..., Any]:
        router.add_api_route(path, handler, methods=["GET"], include_in_schema=False, response_class=HTMLResponse, **kwargs)
        router.add_api_route(urls.api(path), handler, methods=["GET"], summary=summary, responses=ERROR_RESPONSES, **kwargs)
        return handler

    return decorate


def canonical(request: Request, path: str) -> str:
    """``path`` (a page URL without query) moved under ``/api`` when the request was, with the request's query kept."""
    if urls.is_api(request.url.path):
        path = urls.api(path)
    query = request.url.query
    return f"{path}?{query}" if query else path

"""Register a page once and get both URLs: the HTML page and its JSON twin under ``/api``.

>>> router = APIRouter()
>>> @page(router, "/datasets/{name}")
... async def dataset(request: Request, name: str): ...
"""

from __future__ import annotations

from typing import Any, Callable

from fastapi import APIRouter, Request  # noqa: F401  (Request is used by the doctest)
from fastapi.responses import HTMLResponse, Response

from . import urls
from .errors import ERROR_RESPONSES
from .schemas import response_model


def page(
    router: APIRouter,
    path: str,
    *,
    summary: str | None = None,
    model: type | None = None,
    redirect: str | None = None,
    **kwargs: Any,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Route ``path`` (HTML, left out of the OpenAPI schema) and ``/api`` + ``path`` (JSON, documented) to one handler.

    ``model`` is the page-data dataclass the handler answers with: the JSON operation documents its shape
    (:func:`app.schemas.response_model`). A page that only redirects has none: ``redirect`` says where it sends.
    """
    responses: dict[int | str, dict[str, Any]] = dict(ERROR_RESPONSES)
    if model is not None:
        responses[200] = {"model": response_model(model), "description": "The page's data"}
    if redirect is not None:
        kwargs.update(status_code=307, response_description=redirect)

    def decorate(handler: Callable[..., Any]) -> Callable[..., Any]:
        router.add_api_route(path, handler, methods=["GET"], include_in_schema=False, response_class=HTMLResponse, **kwargs)
        router.add_api_route(urls.api(path), handler, methods=["GET"], summary=summary, responses=responses, **kwargs)
        return handler

    return decorate


def bytes_answer(*media_types: str, description: str) -> dict[str, Any]:
    """Route options of an operation that answers bytes, not JSON: its media types (and the error shapes) documented.

    >>> sorted(bytes_answer("image/png", description="a PNG")["responses"][200]["content"])
    ['image/png']
    """
    content = {kind: {"schema": {"type": "string", "format": "binary"}} for kind in media_types}
    return {"response_class": Response, "responses": {200: {"description": description, "content": content}, **ERROR_RESPONSES}}


def canonical(request: Request, path: str) -> str:
    """``path`` (a page URL without query) moved under ``/api`` when the request was, with the request's query kept."""
    if urls.is_api(request.url.path):
        path = urls.api(path)
    query = request.url.query
    return f"{path}?{query}" if query else path

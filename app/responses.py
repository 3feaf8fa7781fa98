"""One page's data, three answers: the HTML page, its JSON twin under ``/api``, or an htmx fragment (a block)."""

from __future__ import annotations

from typing import Any, Callable, Hashable, Protocol

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from . import urls
from .jsonable import jsonable

VARY = {"Vary": "HX-Request"}


def wants_json(request: Request) -> bool:
    """True for the JSON twin of a page (``/api/...``)."""
    return urls.is_api(request.url.path)


def wants_fragment(request: Request) -> bool:
    """True for an htmx request that is not a history restore (which needs the whole page)."""
    headers = request.headers
    return headers.get("HX-Request") == "true" and headers.get("HX-History-Restore-Request") != "true"


def json_twin(request: Request) -> str:
    """The URL of the JSON twin of the requested page, exactly as requested (path still percent-encoded)."""
    raw = request.scope.get("raw_path")
    path = raw.decode("latin-1") if raw else request.url.path
    query = request.url.query
    return urls.api(path) + (f"?{query}" if query else "")


def respond(
    request: Request,
    data: Any,
    *,
    template: str,
    block: str = "content",
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> Response:
    """Answer with ``data`` as JSON (``/api``), the ``block`` of ``template`` (htmx), or the whole page.

    ``data`` is the page-data dataclass; templates see it as ``page``.
    """
    extra = {**VARY, **(headers or {})}
    if wants_json(request):
        return JSONResponse(jsonable(data), status_code=status, headers=extra)
    templates = request.app.state.templates
    context = {"page": data, "request": request, "json_url": json_twin(request)}
    if wants_fragment(request):
        html = templates.render_block(template, block, context)
    else:
        html = templates.render(template, context)
    return HTMLResponse(html, status_code=status, headers=extra)


class PageStore(Protocol):
    """Somewhere rendered pages are kept by key (``app.run_cache.RunCache.page``)."""

    def page(self, key: Hashable, render: Callable[[], bytes | None]) -> bytes | None: ...


def kept(store: PageStore, key: Hashable, build: Callable[[], Response]) -> Response:
    """``build()``'s page, or the same page kept under ``key`` — which must name everything the page shows.

    Only successful (200) pages are kept.
    """
    built: list[Response] = []

    def render() -> bytes | None:
        response = build()
        built.append(response)
        return bytes(response.body) if response.status_code == 200 else None

    body = store.page(key, render)
    return built[0] if built else HTMLResponse(body, headers=VARY)

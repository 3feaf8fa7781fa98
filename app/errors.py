"""One error shape for every failure: JSON ``{"ok": false, "error", "status"}``, an HTML page, or an inline htmx fragment."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from loaders.errors import BatchscopeError, InvalidQuery

from .headers import HEADERS
from .jsonable import html_only
from .links import Link
from .responses import VARY, wants_fragment, wants_json

log = logging.getLogger("batchscope.app")


class BadQuery(InvalidQuery):
    """A request parameter the inspector cannot answer (an unknown sort, a filter or column that does not apply, a malformed value).

    The message names the parameter, the value and what is allowed. ``InvalidPlan`` stays the read path's: a read plan out of range.
    """

    status = 422


class ErrorBody(BaseModel):
    """The JSON every error answers with."""

    ok: bool = False
    error: str
    status: int


#: The error answers every JSON route documents in the OpenAPI schema.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (400, "Bad request"),
        (404, "Not found; the message says what exists"),
        (422, "Malformed parameter"),
        (500, "Stored data failed a check"),
    )
}


@dataclass
class ErrorPage:
    """What every error answer carries."""

    error: str
    status: int
    ok: bool = False
    title: str = html_only("error")
    crumbs: list[Link] = html_only(default_factory=list)


def error_response(request: Request, message: str, status: int, headers: dict[str, str] | None = None) -> Response:
    """Render one error as JSON, an inline fragment or a page, by what the request asked for."""
    page = ErrorPage(error=message, status=status, title=f"{status} error")
    extra = {**VARY, **(headers or {})}
    if wants_json(request):
        return JSONResponse({"ok": False, "error": message, "status": status}, status_code=status, headers=extra)
    templates = request.app.state.templates
    context = {"page": page, "request": request}
    if wants_fragment(request):
        html = templates.render("_partials/_error.html", context)
    else:
        html = templates.render("error.html", context)
    return HTMLResponse(html, status_code=status, headers=extra)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def validation_message(errors: list[dict[str, Any]]) -> str:
    """``path parameter 'step': Input should be a valid integer (got 'abc')`` for each problem."""
    parts = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ())]
        where = f"{loc[0]} parameter {'.'.join(loc[1:])!r}" if len(loc) > 1 else ".".join(loc) or "request"
        got = f" (got {_short(error['input'])})" if "input" in error and loc and loc[0] != "body" else ""
        parts.append(f"{where}: {error.get('msg', 'invalid')}{got}")
    return "; ".join(parts) or "invalid request"


async def _batchscope_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BatchscopeError)
    if exc.status >= 500:
        log.error("%s %s: %s", request.method, request.url.path, exc.message)
    return error_response(request, exc.message, exc.status)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, (RequestValidationError, ValidationError))
    return error_response(request, validation_message(list(exc.errors())), 422)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if 300 <= exc.status_code < 400 and "Location" in headers:  # a dependency redirecting (``app.http_semantics.Moved``)
        return RedirectResponse(headers.pop("Location"), status_code=exc.status_code, headers=headers)
    message = str(exc.detail)
    if exc.status_code == 404 and message == "Not Found":
        message = f"no page at {request.url.path}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return error_response(request, message, exc.status_code, headers)


async def _out_of_memory(request: Request, exc: Exception) -> Response:
    log.error("out of memory on %s %s", request.method, request.url.path)
    message = "the server ran out of memory answering this request; try again later (other requests are still answered)"
    return error_response(request, message, 503, {"Retry-After": "10"})


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    # Starlette answers unhandled exceptions outside every middleware, so the security headers are set here.
    return error_response(request, f"internal error: {type(exc).__name__}: {exc}", 500, HEADERS)


def install(app: FastAPI) -> None:
    """Register the one error handler family on ``app``."""
    app.add_exception_handler(BatchscopeError, _batchscope_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(ValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(MemoryError, _out_of_memory)
    app.add_exception_handler(Exception, _unexpected_error)

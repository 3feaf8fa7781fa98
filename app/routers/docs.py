"""``/api/docs``: the OpenAPI schema browsed with the vendored Swagger UI (no CDN, no inline script)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)


@router.get("/api/docs")
def api_docs(request: Request) -> HTMLResponse:
    return HTMLResponse(request.app.state.templates.render("api_docs.html", {"request": request}))

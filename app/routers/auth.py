"""The login page: exchanges the access token for a cookie (only meaningful when a token is set)."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from .. import urls
from ..deps import SettingsDep
from ..jsonable import html_only
from ..pages.common import Link
from ..security import login_cookie, safe_next

router = APIRouter(include_in_schema=False)


@dataclass
class LoginPage:
    action: str
    next: str
    needed: bool
    error: str = ""
    title: str = html_only("log in")
    crumbs: list[Link] = html_only(default_factory=list)


def _render(request: Request, page: LoginPage, status: int = 200) -> HTMLResponse:
    return HTMLResponse(request.app.state.templates.render("login.html", {"page": page, "request": request}), status_code=status)


@router.get("/login")
def login_form(request: Request, settings: SettingsDep, next: Annotated[str | None, Query(max_length=2000)] = None) -> Response:
    return _render(request, LoginPage(action=urls.login(), next=safe_next(next), needed=bool(settings.token)))


@router.post("/login")
def login(
    request: Request,
    settings: SettingsDep,
    token: Annotated[str, Form(max_length=1000)],
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    target = safe_next(next)
    if not settings.token or not hmac.compare_digest(token.encode(), settings.token.encode()):
        page = LoginPage(action=urls.login(), next=target, needed=bool(settings.token), error="wrong token")
        return _render(request, page, status=401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(**login_cookie(token, secure=request.url.scheme == "https", seconds=settings.session_seconds))
    return response

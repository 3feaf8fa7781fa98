"""Security headers on every response (strict CSP, nosniff) and the optional access token.

The login page exchanges the token for a session cookie that never holds the
token: it holds an expiry time and an HMAC of it under a key derived from the
token, so a stolen cookie stops working when it expires, and changing the
token ends every session.

>>> value = session_value("s3cret", expires=2_000_000_000)
>>> "s3cret" in value, session_valid("s3cret", value, now=1_900_000_000), session_valid("s3cret", value, now=2_000_000_001)
(False, True, False)
>>> session_valid("changed", value, now=1_900_000_000)
False
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any
from urllib.parse import quote, unquote

from starlette.datastructures import MutableHeaders
from starlette.requests import Request, cookie_parser
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import urls
from .errors import error_response
from .headers import CSP, HEADERS

__all__ = ["CSP", "HEADERS", "SecurityMiddleware", "login_cookie", "safe_next", "session_valid", "session_value", "token_matches"]

COOKIE = "batchscope_token"
#: Paths that never need the token: static files and the login page itself.
PUBLIC_PREFIXES = ("/static/", "/login", "/favicon.ico")


def _session_mac(token: str, expires: int) -> str:
    key = hashlib.sha256(b"batchscope session key\0" + token.encode()).digest()
    return hmac.new(key, f"session:{expires}".encode(), hashlib.sha256).hexdigest()


def session_value(token: str, *, expires: int) -> str:
    """The session cookie's value for ``token``, valid until the Unix time ``expires``: ``expires.mac``."""
    return f"{expires}.{_session_mac(token, expires)}"


def session_valid(token: str, value: str, *, now: float | None = None) -> bool:
    """Whether ``value`` is a session cookie made for ``token`` that has not expired."""
    expires, _, mac = value.partition(".")
    if not expires.isdigit() or len(expires) > 12 or len(mac) != 64:
        return False
    if int(expires) <= (time.time() if now is None else now):
        return False
    return hmac.compare_digest(mac.encode(), _session_mac(token, int(expires)).encode())


def token_matches(expected: str, scope: Scope) -> bool:
    """True when the request carries ``expected`` as a Bearer header, or a live session cookie made for it."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    authorization = headers.get("authorization", "")
    if authorization.lower().startswith("bearer "):
        given = authorization[7:].strip()
        return bool(given) and hmac.compare_digest(given.encode(), expected.encode())
    if "cookie" in headers:
        # parsed as browsers send cookies: one unrelated cookie the stdlib parser rejects (``prefs={"a":1}``) hides nothing
        return session_valid(expected, unquote(cookie_parser(headers["cookie"]).get(COOKIE, "")))
    return False


def safe_next(target: str | None) -> str:
    """A local path to return to after logging in (never another site).

    >>> safe_next("//evil.example"), safe_next("/flags?tag=x")
    ('/', '/flags?tag=x')
    """
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


class SecurityMiddleware:
    """Adds the security headers and, when a token is set, turns away requests without it."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token or None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if self.token and not path.startswith(PUBLIC_PREFIXES) and not token_matches(self.token, scope):
            await self._refuse(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if request.method == "GET" and not urls.is_api(request.url.path) and "HX-Request" not in request.headers:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            response: Any = RedirectResponse(urls.login(target), status_code=303)
        else:
            response = error_response(request, "this inspector needs an access token (Authorization: Bearer, or log in at /login)", 401)
            response.headers["WWW-Authenticate"] = 'Bearer realm="batchscope"'
        for name, value in HEADERS.items():
            response.headers[name] = value
        await response(scope, receive, send)


def login_cookie(token: str, *, secure: bool, seconds: int) -> dict[str, Any]:
    """Arguments for ``Response.set_cookie``: a session for ``token`` lasting ``seconds`` (never the token itself)."""
    value = session_value(token, expires=int(time.time()) + seconds)
    return {
        "key": COOKIE,
        "value": quote(value, safe=""),
        "max_age": seconds,
        "httponly": True,
        "samesite": "strict",
        "secure": secure,
        "path": "/",
    }

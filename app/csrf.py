"""Cross-site request forgery: state-changing requests must come from this origin, and forms must carry its token.

Every POST/PUT/PATCH/DELETE is refused with 403 when the browser says it is
cross-site (``Sec-Fetch-Site`` other than ``same-origin``/``none``) or names
another ``Origin`` than the ``Host`` asked for. POSTs a page on another
site could send without a CORS preflight (form, multipart or plain-text
bodies, or no body type) must also carry the form token, as the hidden
``csrf_token`` field every form of the inspector renders or as an
``X-CSRF-Token`` header. Other methods, JSON bodies and ``Authorization``
headers cannot be sent cross-site without a preflight, which this server
never grants, so they need no token.

The token is an HMAC of a per-server secret (the ``form_secret`` setting, or
random at start and shared by the worker processes), identical for every
page, so kept (cached) pages can hold it.

>>> len(form_token("secret")), form_token("secret") == form_token("secret"), form_token("secret") == form_token("other")
(32, True, False)
"""

from __future__ import annotations

import hashlib
import hmac
from email.message import Message as EmailMessage
from typing import Mapping
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

FIELD = "csrf_token"
HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
#: Largest form body read to find the token (the flag form's limits add up to about 115 KB).
MAX_FORM_BYTES = 1 << 20
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def form_token(secret: str) -> str:
    """The anti-forgery token of forms, derived from the server's secret."""
    return hmac.new(secret.encode(), b"batchscope form token v1", hashlib.sha256).hexdigest()[:32]


def _netloc(scheme: str, netloc: str) -> str:
    """``netloc`` lower case without the scheme's default port."""
    value = netloc.strip().lower()
    default = _DEFAULT_PORTS.get(scheme)
    return value[: -len(default) - 1] if default and value.endswith(f":{default}") and not value.endswith("]") else value


def cross_site(headers: Mapping[str, str], scheme: str) -> str | None:
    """Why a request is cross-site (from ``Sec-Fetch-Site`` or ``Origin`` against ``Host``), or ``None`` when it is not.

    >>> cross_site({"host": "127.0.0.1:8000", "origin": "http://127.0.0.1:8000"}, "http") is None
    True
    >>> cross_site({"host": "127.0.0.1:8000", "origin": "http://evil.example"}, "http")
    "Origin 'http://evil.example' is not this server (127.0.0.1:8000)"
    """
    site = headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in ("same-origin", "none"):
        return f"Sec-Fetch-Site is {site.strip()!r}"
    origin = headers.get("origin")
    if origin is None:
        return None
    host = _netloc(scheme, headers.get("host", ""))
    parsed = urlsplit(origin.strip())
    if origin.strip().lower() == "null" or parsed.scheme not in _DEFAULT_PORTS or _netloc(parsed.scheme, parsed.netloc) != host:
        return f"Origin {origin.strip()!r} is not this server ({host or 'no Host header'})"
    return None


def needs_token(method: str, headers: Mapping[str, str]) -> bool:
    """True when a request could have been sent by another site without a preflight (so it must carry the token).

    >>> needs_token("POST", {"content-type": "text/plain"}), needs_token("POST", {"content-type": "application/json"})
    (True, False)
    >>> needs_token("DELETE", {}), needs_token("POST", {"authorization": "Bearer t"})
    (False, False)
    """
    if method != "POST" or "authorization" in headers:
        return False
    kind = headers.get("content-type")
    if not kind:
        return True
    message = EmailMessage()
    message["content-type"] = kind
    subtype = message.get_content_subtype()
    return not (message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json")))


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or ``None`` when it is longer than ``limit``."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then waits on the real one (for disconnects)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def _form_field(scope: Scope, receive: Receive) -> str:
    """The token field of a form body ("" when the body is not a form or has no such field)."""
    try:
        async with Request(scope, receive).form() as form:
            field = form.get(FIELD)
    except Exception:  # noqa: BLE001 - a malformed or non-form body carries no token; the route reports the rest
        return ""
    return field if isinstance(field, str) else ""


class CsrfMiddleware:
    """Refuses cross-site state-changing requests, and form requests without the token, with 403 (the usual error shape)."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        reason = cross_site(headers, scope.get("scheme", "http"))
        if reason is None and needs_token(scope["method"], headers):
            given = headers.get(HEADER)
            if given is None:
                body = await _read_body(receive, MAX_FORM_BYTES)
                if body is None:
                    await self._refuse(scope, receive, send, f"a form body over {MAX_FORM_BYTES:,} bytes", 413)
                    return
                given = await _form_field(scope, _replay(body, receive))
                receive = _replay(body, receive)
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                reason = f"the form token ({FIELD} field or X-CSRF-Token header) is {'missing' if not given else 'wrong'}"
        if reason is not None:
            await self._refuse(scope, receive, send, reason, 403)
            return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, reason: str, status: int) -> None:
        from .errors import error_response

        message = f"refused {scope['method']} {scope['path']}: {reason} (state changes must come from this inspector's own pages)"
        if status == 413:
            message = f"refused {scope['method']} {scope['path']}: {reason}"
        await error_response(Request(scope, receive), message, status)(scope, receive, send)

"""The ``allowed_hosts`` check: requests naming another ``Host`` are refused, so DNS rebinding never reaches the inspector.

A page on ``attacker.example`` whose name is re-pointed at 127.0.0.1 can make
the browser connect here, but the browser still sends ``Host:
attacker.example``; that name is not one this server answers to.

>>> host_name("127.0.0.1:8000"), host_name("[::1]:8000"), host_name("Example.ORG")
('127.0.0.1', '::1', 'example.org')
>>> host_allowed("localhost:9000", frozenset({"localhost"})), host_allowed("evil.example", frozenset({"localhost"}))
(True, False)
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

#: The answer to a request for another host: 421 Misdirected Request ("this server does not serve that name").
MISDIRECTED = 421


def host_name(header: str) -> str:
    """The name of a ``Host`` header value, lower case, without its port or IPv6 brackets."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def host_allowed(header: str, names: frozenset[str]) -> bool:
    """True when ``header`` names one of ``names`` (``*`` among them allows any)."""
    return "*" in names or (bool(header) and host_name(header) in names)


class HostMiddleware:
    """Refuses (421, the usual error shape) every HTTP request whose ``Host`` is not an allowed name."""

    def __init__(self, app: ASGIApp, *, names: frozenset[str]) -> None:
        self.app = app
        self.names = names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"host"), "")
            if not host_allowed(header, self.names):
                from .errors import error_response

                allowed = ", ".join(sorted(self.names))
                message = (
                    f"this inspector does not answer to host {header or '(none)'!r}; it answers to {allowed} "
                    "(set BATCHSCOPE_ALLOWED_HOSTS to add names)"
                )
                await error_response(Request(scope, receive), message, MISDIRECTED)(scope, receive, send)
                return
        await self.app(scope, receive, send)

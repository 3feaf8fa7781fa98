"""The ``allowed_hosts`` check: requests naming another ``Host`` are refused, so DNS rebinding never reaches the inspector.

A page on ``attacker.example`` whose name is re-pointed at 127.0.0.1 can make
the browser connect here, but the browser still sends ``Host:
attacker.example``; that name is not one this server answers to.

The header is parsed strictly (RFC 9110 ``uri-host [ ":" port ]``): a name of
letters, digits, dots and hyphens, an IPv4 address or a bracketed IPv6 one, and
an optional port of 1-65535. Anything else is refused, whatever the name it
starts with: userinfo (``127.0.0.1:8101@evil.example``), lists
(``127.0.0.1, evil.example``), several Host headers, bad or empty ports, spaces.

>>> host_name("127.0.0.1:8000"), host_name("[::1]:8000"), host_name("Example.ORG")
('127.0.0.1', '::1', 'example.org')
>>> [host_name(h) for h in ("127.0.0.1:8101@evil.example", "127.0.0.1, evil.example", "localhost:99999", "localhost:", "::1")]
[None, None, None, None, None]
>>> host_allowed("localhost:9000", frozenset({"localhost"})), host_allowed("evil.example", frozenset({"localhost"}))
(True, False)
"""

from __future__ import annotations

import ipaddress
import re

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

#: The answer to a request for another host: 421 Misdirected Request ("this server does not serve that name").
MISDIRECTED = 421
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?")
_PORT = re.compile(r"[0-9]{1,5}")


def _port_ok(port: str | None) -> bool:
    return port is None or (_PORT.fullmatch(port) is not None and 1 <= int(port) <= 65535)


def host_name(header: str) -> str | None:
    """The name of a ``Host`` header value, lower case, without its port or IPv6 brackets; None when it is not a
    well-formed ``host[:port]``."""
    value = header.lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :] if end > 0 else "?"
        if rest and not rest.startswith(":"):
            return None
        try:
            address = ipaddress.IPv6Address(value[1:end])
        except ValueError:
            return None
        return str(address) if _port_ok(rest[1:] if rest else None) else None
    name, colon, port = value.partition(":")
    if (colon and not _port_ok(port)) or not _NAME.fullmatch(name.removesuffix(".")):
        return None
    return name.removesuffix(".")


def host_allowed(header: str, names: frozenset[str]) -> bool:
    """True when ``header`` is a well-formed Host naming one of ``names`` (``*`` among them allows any name)."""
    name = host_name(header)
    return name is not None and ("*" in names or name in names)


class HostMiddleware:
    """Refuses (421, the usual error shape) every HTTP request whose one ``Host`` header is not an allowed name."""

    def __init__(self, app: ASGIApp, *, names: frozenset[str]) -> None:
        self.app = app
        self.names = names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"host"]
            if len(given) != 1 or not host_allowed(given[0], self.names):
                from .errors import error_response

                allowed = ", ".join(sorted(self.names))
                shown = ", ".join(repr(h[:200]) for h in given) or "(none)"
                message = (
                    f"this inspector does not answer to host {shown}; it answers to one Host header naming {allowed}, "
                    "optionally with a port (set BATCHSCOPE_ALLOWED_HOSTS to add names)"
                )
                await error_response(Request(scope, receive), message, MISDIRECTED)(scope, receive, send)
                return
        await self.app(scope, receive, send)

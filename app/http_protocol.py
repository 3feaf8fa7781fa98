"""The inspector's HTTP/1.1 protocol: uvicorn's, with a deadline on reading a request's headers and no Nagle delay.

**Header timeout (slowloris).**
uvicorn closes idle kept-alive connections, but a client that connects and
sends its headers a byte at a time is waited for forever, each one holding a
connection. This protocol starts a timer when a connection opens (and when a
kept-alive connection receives the first byte of its next request) and closes
the connection when the headers have not all arrived within
``header_timeout`` seconds. Worker processes read the setting from
``BATCHSCOPE_HEADER_TIMEOUT``, as they read every other setting.

**No Nagle delay.** asyncio turns Nagle's algorithm off on the connections of
a server it binds itself, but not on those accepted from the socket uvicorn
binds for several worker processes; there a response written in two parts
(head, then body) waited for the client's delayed ACK, adding 40 ms to every
request. Every connection sets ``TCP_NODELAY`` here.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .settings import Settings, env_name

#: How uvicorn names this protocol (``http=``); a string, so worker processes import it themselves.
PROTOCOL = "app.http_protocol:InspectorProtocol"


@functools.cache
def header_timeout() -> float:
    """The ``header_timeout`` setting of this process (from its environment, else the default)."""
    raw = os.environ.get(env_name("header_timeout"))
    return Settings(header_timeout=float(raw)).header_timeout if raw else Settings().header_timeout


class InspectorProtocol(H11Protocol):
    """``H11Protocol`` that sends without delay and closes a connection whose request headers take longer than ``header_timeout()``."""

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._header_timer is None:
            self._arm()  # the first byte of the next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the request line and headers are in

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(header_timeout(), self._expired)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expired(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closing a connection whose request headers did not arrive within %.1f s", header_timeout())
            self.transport.close()

"""A fault-injecting HTTP proxy for tests: fails, stalls or cuts short a share of requests, deterministically.

It stands in front of a real server (the S3 API server, nginx) on 127.0.0.1
and forwards every request. Whether the ``n``-th occurrence of a request
(method, path, ``Range``) is failed, stalled or cut short is a pure function
of the seed and ``n``, so a run's faults do not depend on thread timing, and
a retried request meets a fresh draw.

>>> with FaultProxy("http://127.0.0.1:9000", Faults(fail=0.3, seed=7)) as proxy:  # doctest: +SKIP
...     proxy.endpoint
'http://127.0.0.1:...'
"""

from __future__ import annotations

import hashlib
import http.client
import socket
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>'
)
_INTERNAL = b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code><Message>injected</Message></Error>'


@dataclass(frozen=True)
class Faults:
    """What share of requests to fail (500 / 503 / 503 SlowDown), cut short, or stall before forwarding.

    ``fail + truncate + stall`` must be at most 1; ``stall_seconds`` bounds each stall.
    Only requests whose method is in ``methods`` are touched.
    """

    fail: float = 0.3
    truncate: float = 0.0
    stall: float = 0.0
    stall_seconds: float = 0.2
    seed: int = 0
    methods: tuple[str, ...] = ("GET", "HEAD")

    def __post_init__(self) -> None:
        if min(self.fail, self.truncate, self.stall) < 0 or self.fail + self.truncate + self.stall > 1:
            raise ValueError(f"fault shares must be >= 0 and sum to at most 1: {self}")

    def draw(self, request: str, occurrence: int) -> tuple[str, float]:
        """``(kind, value)`` for the ``occurrence``-th time ``request`` is seen: a fault kind and a [0, 1) number."""
        digest = hashlib.sha256(f"{self.seed}\n{request}\n{occurrence}".encode()).digest()
        x = int.from_bytes(digest[:8], "big") / 2**64
        y = int.from_bytes(digest[8:16], "big") / 2**64
        if x < self.fail:
            return ("500", "503", "slowdown")[int(y * 3)], y
        if x < self.fail + self.truncate:
            return "truncate", y
        if x < self.fail + self.truncate + self.stall:
            return "stall", y
        return "pass", y


class FaultProxy:
    """A threaded HTTP proxy on 127.0.0.1 in front of ``upstream``; ``counts`` tallies what it did.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, upstream: str, faults: Faults) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream_host = parsed.hostname or "127.0.0.1"
        self.upstream_port = parsed.port or 80
        self.faults = faults
        self.counts: Counter[str] = Counter()
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "FaultProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def decide(self, method: str, path: str, byte_range: str) -> tuple[str, float]:
        """Count the request and draw its fault."""
        request = f"{method} {path} {byte_range}"
        with self._lock:
            occurrence = self._seen[request]
            self._seen[request] += 1
            self.counts["requests"] += 1
            self.counts[f"method:{method}"] += 1
        kind, value = self.faults.draw(request, occurrence) if method in self.faults.methods else ("pass", 0.0)
        with self._lock:
            self.counts[kind] += 1
        return kind, value

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send the request upstream and return its status, headers and whole body."""
        connection = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, response.getheaders(), data
        finally:
            connection.close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out as separate writes

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
                pass

            def _body(self) -> bytes | None:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    raw = bytearray()
                    while True:
                        line = self.rfile.readline()
                        raw += line
                        size = int(line.split(b";")[0].strip() or b"0", 16)
                        chunk = self.rfile.read(size + 2)
                        raw += chunk
                        if size == 0:
                            break
                    return bytes(raw)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            def _send(self, status: int, headers: list[tuple[str, str]], body: bytes, *, cut: bool = False) -> None:
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                declared = dict((k.lower(), v) for k, v in headers).get("content-length", str(len(body)))
                # A cut response declares the whole length and then sends half of it.
                self.send_header("Content-Length", declared if self.command == "HEAD" else str(len(body)))
                if cut:
                    self.send_header("Connection", "close")
                self.end_headers()
                if self.command == "HEAD":
                    return
                if cut:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                self.wfile.write(body)

            def _handle(self) -> None:
                body = self._body()
                kind, value = proxy.decide(self.command, self.path, self.headers.get("Range", ""))
                if kind in ("500", "503", "slowdown"):
                    status = 500 if kind == "500" else 503
                    payload = _SLOW_DOWN if kind == "slowdown" else _INTERNAL
                    self._send(status, [("Content-Type", "application/xml")], payload)
                    return
                if kind == "stall":
                    time.sleep(value * proxy.faults.stall_seconds)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    headers["Transfer-Encoding"] = "chunked"
                status, upstream_headers, data = proxy.forward(self.command, self.path, headers, body)
                self._send(status, upstream_headers, data, cut=kind == "truncate" and len(data) > 1)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

        return Handler

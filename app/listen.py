"""Where the inspector listens: bind its socket (a busy port is one clear line), and record the address in the catalog.

``batchscope serve`` binds the socket itself before the server starts, so a
port another program holds is reported as :class:`PortInUse` naming the port
and how to choose another, and port ``0`` (any free port) is known once
bound. It then writes ``server.json`` in the catalog root — the URL it answers
on, its process id and machine — so every command run over that catalog
prints links that open (:func:`recorded_address`); the record is removed when
the server stops, and ignored when its process is gone.

>>> listening_url("0.0.0.0", 8765)
'http://127.0.0.1:8765'
>>> listening_url("::1", 8000)
'http://[::1]:8000'
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
from typing import Iterator

from loaders import storage
from loaders.errors import BatchscopeError

RECORD_NAME = "server.json"
#: Addresses that mean "every interface": links made on this machine use the loopback address instead.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


class PortInUse(BatchscopeError):
    """The port the server should listen on is held by another program."""

    status = 409


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def listening_url(host: str, port: int) -> str:
    """The URL a browser on this machine opens to reach a server bound to ``host``:``port``."""
    return _url(_WILDCARDS.get(host, host), port)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (``0``: any free port), inheritable by worker processes.

    A port in use raises :class:`PortInUse` with one line saying how to choose another.
    """
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BatchscopeError(f"cannot listen on {host}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"port {port} on {host} is in use (is another server running?); choose another with --port P "
                f"(or BATCHSCOPE_PORT=P; with make: make demo PORT=P)"
            ) from None
        raise BatchscopeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def record_path(root: str) -> str:
    return storage.join(root, RECORD_NAME)


def record_address(root: str, url: str) -> None:
    """Write ``server.json`` in the catalog ``root``: ``url``, and this process and machine."""
    record = {"url": url, "pid": os.getpid(), "host": socket.gethostname()}
    storage.write_bytes_atomic(record_path(root), json.dumps(record).encode())


def forget_address(root: str, url: str) -> None:
    """Remove ``server.json`` when it is still this server's record (another server may have replaced it)."""
    with contextlib.suppress(BatchscopeError, OSError, ValueError):
        record = json.loads(storage.read_bytes(record_path(root)))
        if record.get("url") == url and record.get("pid") == os.getpid():
            filesystem, path = storage.resolve(record_path(root))
            filesystem.delete_file(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user
        return True
    return True


def recorded_address(root: str) -> str | None:
    """The URL the server over catalog ``root`` recorded, while it still runs (``None``: no server recorded)."""
    try:
        record = json.loads(storage.read_bytes(record_path(root)))
        url, pid, host = str(record["url"]), int(record["pid"]), str(record["host"])
    except (BatchscopeError, OSError, ValueError, KeyError, TypeError):
        return None
    if host == socket.gethostname():
        return url if _alive(pid) else None
    return None if any(f"//{loop}" in url for loop in ("127.", "[::1]", "localhost")) else url


@contextlib.contextmanager
def recorded(root: str, url: str) -> Iterator[None]:
    """Record ``url`` as the server's address for as long as the block runs (a catalog that cannot take it is skipped)."""
    try:
        record_address(root, url)
    except (BatchscopeError, OSError) as exc:
        print(f"note: cannot record the address in the catalog ({exc}); commands print links to the default address")
    try:
        yield
    finally:
        forget_address(root, url)

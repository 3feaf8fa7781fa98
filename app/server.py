"""Run the inspector with uvicorn: print its URL, warn when it is reachable from other machines without a token."""

from __future__ import annotations

import contextlib
import ipaddress
import signal
import sys

from .settings import Settings

WARNING = (
    "warning: serving on {host}, which other machines can reach, without an access token; "
    "anyone who can connect sees every dataset. Set BATCHSCOPE_TOKEN or bind 127.0.0.1."
)

HOSTS_NOTE = (
    "note: answering only requests for the host names {names}; "
    "set BATCHSCOPE_ALLOWED_HOSTS (or --allowed-hosts) to the names other machines use to reach this one."
)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``).

    >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0")
    (True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def startup_lines(settings: Settings) -> list[str]:
    """What the server prints before it starts: its URL, and the warning when it applies."""
    lines = [f"batchscope inspector over {settings.root} at {settings.url}"]
    if not is_loopback(settings.host) and not settings.token:
        lines.append(WARNING.format(host=settings.host))
    if not is_loopback(settings.host) and not settings.allowed_hosts:
        lines.append(HOSTS_NOTE.format(names=", ".join(sorted(settings.host_names()))))
    return lines


def run_server(settings: Settings) -> None:
    """Serve the inspector until interrupted, its address recorded in the catalog root (:mod:`app.listen`).

    The socket is bound here, before the server starts: a port in use is :class:`app.listen.PortInUse`.
    """
    import dataclasses
    import os

    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from .factory import create_app
    from .http_protocol import PROTOCOL
    from .listen import bind, recorded

    settings = settings.with_form_secret()  # one secret for every worker, so a form from one is accepted by all
    app = create_app(settings)  # built here too, so bad settings or catalogs fail before binding
    sock = bind(settings.host, settings.port)
    settings = dataclasses.replace(settings, port=sock.getsockname()[1])  # port 0: the one the system chose
    for line in startup_lines(settings):
        print(line, file=sys.stderr if line.startswith("warning") else sys.stdout, flush=True)
    os.environ.update(settings.to_env())  # worker processes (and the protocol's header timeout) read these
    options = {"host": settings.host, "port": settings.port, "log_level": "warning", "access_log": False, "http": PROTOCOL}
    # uvicorn stops on SIGTERM, then raises it again under the handler it found: exit cleanly, so the record is removed.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(0))
    with recorded(settings.root, settings.url), sock, contextlib.suppress(KeyboardInterrupt):
        if settings.processes == 1:
            uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=[sock])
            return
        config = uvicorn.Config("app.factory:create_app", factory=True, workers=settings.processes, **options)
        Multiprocess(config, sockets=[sock]).run()

"""Run the inspector with uvicorn: print its URL, warn when it is reachable from other machines without a token."""

from __future__ import annotations

import ipaddress
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
    """Serve the inspector until interrupted."""
    import os

    import uvicorn

    from .factory import create_app
    from .http_protocol import PROTOCOL

    settings = settings.with_form_secret()  # one secret for every worker, so a form from one is accepted by all
    app = create_app(settings)  # built here too, so bad settings or catalogs fail before binding
    for line in startup_lines(settings):
        print(line, file=sys.stderr if line.startswith("warning") else sys.stdout, flush=True)
    os.environ.update(settings.to_env())  # worker processes (and the protocol's header timeout) read these
    options = {"host": settings.host, "port": settings.port, "log_level": "warning", "access_log": False, "http": PROTOCOL}
    if settings.processes == 1:
        uvicorn.run(app, **options)
        return
    uvicorn.run("app.factory:create_app", factory=True, workers=settings.processes, **options)

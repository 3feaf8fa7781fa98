"""nginx for tests: serves a temporary directory over HTTP on 127.0.0.1 (range requests are on by default).

Fixture ``nginx_server`` (session): started in the foreground (``daemon off``)
with a generated config, stopped at the end. Register it with
``pytest_plugins = ["tests.support.nginx"]`` in the top-level ``tests/conftest.py``.
The nginx binary comes from the system (Debian package ``nginx``); when it is
missing the fixture skips with a loud reason instead of installing anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from .processes import free_port, stop, wait_until_serving

_CONFIG = """\
{user}worker_processes 1;
pid {state}/nginx.pid;
error_log {state}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {state}/body;
    proxy_temp_path {state}/proxy;
    fastcgi_temp_path {state}/fastcgi;
    uwsgi_temp_path {state}/uwsgi;
    scgi_temp_path {state}/scgi;
    default_type application/octet-stream;
    sendfile on;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location / {{ }}
    }}
}}
"""


def nginx_binary() -> str | None:
    """Path of the nginx executable, or None."""
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None)


@dataclass
class NginxServer:
    """A running nginx serving ``root`` at ``url``."""

    url: str
    root: Path

    def put(self, name: str, data: bytes) -> str:
        """Write a file below the served directory and return its URL."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return f"{self.url}/{name}"


@pytest.fixture(scope="session")
def nginx_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NginxServer]:
    """nginx on a free 127.0.0.1 port serving a fresh directory, for the whole session."""
    binary = nginx_binary()
    if binary is None:
        pytest.skip(
            "NGINX IS NOT INSTALLED: the HTTP range-read tests did not run. "
            "Install the Debian package `nginx` (make test does) to run them."
        )
    base = tmp_path_factory.mktemp("nginx")
    root, state = base / "www", base / "state"
    root.mkdir()
    state.mkdir()
    port = free_port()
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read files in a 0700 temp directory
    config = state / "nginx.conf"
    config.write_text(_CONFIG.format(user=user, state=state, port=port, root=root))
    process = subprocess.Popen(
        [binary, "-p", str(state), "-c", str(config), "-e", str(state / "error.log"), "-g", "daemon off;"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url + "/", process=process, what="nginx")
        yield NginxServer(url=url, root=root)
    finally:
        stop(process)

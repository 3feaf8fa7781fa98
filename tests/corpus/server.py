"""A real ``batchscope serve`` in a subprocess for the hardening tests: start it, wait until it listens, stop it by its pid.

>>> free_port() > 0
True
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from tests.support.processes import stop


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def batchscope() -> str:
    """The console script of this virtualenv."""
    return shutil.which("batchscope", path=str(Path(sys.executable).parent)) or str(Path(sys.executable).parent / "batchscope")


@dataclass
class Server:
    """A running inspector: its URL, process, and the files its stdout and stderr go to."""

    url: str
    port: int
    process: subprocess.Popen
    stdout: Path
    stderr: Path

    def logs(self) -> str:
        """Everything the server printed so far (for failure messages)."""
        return self.stdout.read_text(errors="replace") + self.stderr.read_text(errors="replace")


def _wait(port: int, process: subprocess.Popen, server: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"inspector exited with {process.returncode}:\n{server.logs()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"inspector did not listen on port {port} within {timeout} s:\n{server.logs()}")


@contextlib.contextmanager
def served(
    root: str | Path,
    logs: Path,
    *,
    host: str | None = "127.0.0.1",
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    limits: Mapping[int, int] | None = None,
    wrapper: Sequence[str] = (),
) -> Iterator[Server]:
    """Serve the catalog at ``root`` with ``batchscope serve --host host`` (no ``--host`` when None) until the block ends.

    ``BATCHSCOPE_*`` variables of this process are not passed on (only ``env``, and the seal key's file, which every
    process of the tests shares); stdout and stderr go to files in ``logs``.
    ``limits`` maps ``resource.RLIMIT_*`` to the value the server runs under (a memory cap, say).
    ``wrapper`` runs the server under another command (such as ``prlimit --as=...``).
    """
    port = free_port()
    logs.mkdir(parents=True, exist_ok=True)
    stdout, stderr = logs / f"serve-{port}.out", logs / f"serve-{port}.err"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BATCHSCOPE_") or k == "BATCHSCOPE_DERIVED_KEY_FILE"}
    environment.update(env or {})
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(
            [*wrapper, batchscope(), "serve", "--root", str(root), "--port", str(port), *(["--host", host] if host else [])],
            stdout=out,
            stderr=err,
            env=environment,
            preexec_fn=(lambda: [resource.setrlimit(k, (v, v)) for k, v in limits.items()]) if limits else None,
        )
    server = Server(f"http://127.0.0.1:{port}", port, process, stdout, stderr)
    try:
        _wait(port, process, server, timeout)
        yield server
    finally:
        stop(process)

"""Test processes: a free port on 127.0.0.1, waiting until a server answers, and stopping it for good."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def torchrun_command(script: str, *args: str, nproc: int, port: int | None = None) -> list[str]:
    """``python -m torch.distributed.run`` of ``script`` with ``args`` on ``nproc`` local ranks (a free port by default)."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--nnodes=1",
        "--master_addr=127.0.0.1",
        f"--master_port={port or free_port()}",
        script,
        *args,
    ]


def wait_until_serving(url: str, *, process: subprocess.Popen[bytes], what: str, seconds: float = 30.0) -> None:
    """Poll ``url`` until it answers (any HTTP status); fail with the process's output otherwise."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise RuntimeError(f"{what} exited with status {process.returncode} before serving {url}:\n{output}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{what} did not answer at {url} within {seconds:.0f} s")


def stop(process: subprocess.Popen) -> None:
    """Terminate ``process`` and wait for it; kill it if it has not exited within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()

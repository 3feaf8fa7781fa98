"""A real inspector server (``batchscope serve`` in a subprocess) and headless Debian Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from loaders import Catalog

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(port: int, process: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"inspector exited with {process.returncode}: {log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"inspector did not listen on port {port} within {timeout} s")


@pytest.fixture(scope="session")
def server(inspector_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a real server over the shared catalog (small pages and token threshold so paging and lazy loading show)."""
    batchscope = shutil.which("batchscope") or str(Path(sys.executable).parent / "batchscope")
    port = free_port()
    env = {
        **os.environ,
        "BATCHSCOPE_PAGE_SIZE": "5",
        "BATCHSCOPE_TOKEN_FRAGMENT_THRESHOLD": "5",
        "BATCHSCOPE_FLAGS_PATH": str(tmp_path_factory.mktemp("browser-flags") / "flags.sqlite"),
    }
    env.pop("BATCHSCOPE_TOKEN", None)
    log = tmp_path_factory.mktemp("browser-server") / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [batchscope, "serve", "--root", inspector_catalog.root, "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        wait_for(port, process, log)
        assert f"http://127.0.0.1:{port}" in log.read_text()  # the server prints its URL
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make chromium` (or `apt-get install chromium`) installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser, server: str) -> Iterator[object]:
    """A fresh page (own context, clipboard allowed) that records console errors in ``page.errors``."""
    context = browser.new_context(base_url=server, viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    tab = context.new_page()
    tab.errors = []
    tab.on("console", lambda message: tab.errors.append(message.text) if message.type == "error" else None)
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))
    tab.set_default_timeout(15_000)
    try:
        yield tab
    finally:
        context.close()

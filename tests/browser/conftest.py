"""A real inspector server (``batchscope serve`` in a subprocess) and headless Debian Chromium driven by Playwright."""

from __future__ import annotations

import contextlib
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
from tests.support.processes import stop

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


@contextlib.contextmanager
def serving(root: str, logs: Path, **settings: str) -> Iterator[str]:
    """``batchscope serve`` over ``root`` in a subprocess on a free 127.0.0.1 port; yields its base URL.

    ``settings`` become ``BATCHSCOPE_<NAME>`` variables (a stray ``BATCHSCOPE_TOKEN`` is dropped).
    """
    batchscope = shutil.which("batchscope") or str(Path(sys.executable).parent / "batchscope")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "BATCHSCOPE_TOKEN"}
    env.update({f"BATCHSCOPE_{name.upper()}": value for name, value in settings.items()})
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [batchscope, "serve", "--root", root, "--host", "127.0.0.1", "--port", str(port)],
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
        stop(process)


@contextlib.contextmanager
def open_tab(browser: object, base_url: str, *, clipboard: bool = False) -> Iterator[object]:
    """A fresh page in its own context that records console and page errors in ``page.errors``."""
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    if clipboard:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url)
    page = context.new_page()
    page.errors = []
    page.on("console", lambda message: page.errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.set_default_timeout(15_000)
    try:
        yield page
    finally:
        context.close()


def until(page: object, expression: str, timeout: float = 15.0) -> None:
    """Poll ``expression`` from Python (the strict CSP forbids Playwright's in-page predicate eval)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {expression}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def server(inspector_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a real server over the shared catalog (small pages and token threshold so paging and lazy loading show)."""
    logs = tmp_path_factory.mktemp("browser-server")
    with serving(inspector_catalog.root, logs, page_size="5", token_fragment_threshold="5", flags_path=str(logs / "flags.sqlite")) as url:
        yield url


@pytest.fixture(scope="module")
def runs_server(runs_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real server over the trained runs catalog, with flags in a database of this test module's own."""
    logs = tmp_path_factory.mktemp("runs-server")
    with serving(runs_catalog.root, logs, flags_path=str(logs / "flags.sqlite")) as url:
        yield url


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
    with open_tab(browser, server, clipboard=True) as tab:
        yield tab

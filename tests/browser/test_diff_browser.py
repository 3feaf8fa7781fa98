"""Version diffs in real Chromium: open a text row's field diff from the list (htmx), page on, and an image diff's pictures."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import urls
from loaders import Catalog
from loaders.demo.common import load_changes
from tests.browser.conftest import free_port, wait_for

pytestmark = pytest.mark.browser


def until(page, expression: str, timeout: float = 15.0) -> None:
    """Poll ``expression`` from Python (the strict CSP forbids Playwright's in-page predicate eval)."""
    import time

    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {expression}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def demo_server(demo_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    batchscope = shutil.which("batchscope") or str(Path(sys.executable).parent / "batchscope")
    port = free_port()
    env = {
        **os.environ,
        "BATCHSCOPE_FLAGS_PATH": str(tmp_path_factory.mktemp("diff-flags") / "flags.sqlite"),
        "BATCHSCOPE_PAGE_SIZE": "20",
    }
    env.pop("BATCHSCOPE_TOKEN", None)
    log = tmp_path_factory.mktemp("diff-server") / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [batchscope, "serve", "--root", demo_catalog.root, "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for(port, process, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def tab(browser, demo_server: str) -> Iterator[object]:
    context = browser.new_context(base_url=demo_server, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: page.errors.append(message.text) if message.type == "error" else None)
    page.set_default_timeout(15_000)
    try:
        yield page
    finally:
        context.close()


def test_text_diff_opens_in_place_with_highlights(tab, demo_catalog: Catalog) -> None:
    a, b = demo_catalog.resolve("web-text@v1"), demo_catalog.resolve("web-text@v2")
    tab.goto(urls.diff("web-text", "v1", "v2", change="changed"))
    assert tab.url.endswith(urls.diff("web-text", a.id, b.id, change="changed"))  # the tags redirected to ids
    tab.evaluate("window.__same_document = true")
    first = tab.locator("li.change").first
    key = first.get_attribute("data-key")
    first.locator("details.change-detail > summary").click()
    until(tab, "!!document.querySelector('li.change .detail-slot .text-diff')")
    pane = first.locator(".text-diff")
    assert pane.locator(".side-a del").count() + pane.locator(".side-b ins").count() > 0
    assert pane.locator(".side-a ins").count() == 0 and pane.locator(".side-b del").count() == 0
    assert first.locator(".row-diff").get_attribute("data-key") == key
    # Paging swaps the rows block and pushes the cursor into the address bar.
    tab.locator("#diff-rows nav.pager a[rel=next]").first.click()
    until(tab, "location.search.includes('after=')")
    until(tab, f"document.querySelector('li.change') && document.querySelector('li.change').dataset.key > {key!r}")
    assert tab.evaluate("window.__same_document") is True
    assert tab.errors == []


def test_image_diff_loads_both_thumbnails_and_the_heatmap(tab, demo_catalog: Catalog) -> None:
    from tests.app.test_diff_page import re_encoded_image

    key = re_encoded_image(demo_catalog)
    a, b = demo_catalog.resolve("images@v1"), demo_catalog.resolve("images@v2")
    assert key in load_changes(demo_catalog, "images").edited
    tab.goto(urls.diff("images", a.id, b.id, key=key))
    images = ".image-diff img"
    assert tab.locator(images).count() == 3
    until(tab, f"Array.from(document.querySelectorAll('{images}')).every(i => i.complete && i.naturalWidth > 0)")
    srcs = tab.evaluate(f"Array.from(document.querySelectorAll('{images}')).map(i => i.getAttribute('src'))")
    assert srcs[-1] == urls.diff_heatmap("images", a.id, b.id, key, "image")
    assert tab.locator(".media-error").count() == 0
    assert tab.errors == []

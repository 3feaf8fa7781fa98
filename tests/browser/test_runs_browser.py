"""The core loop in real Chromium: a step/rank URL, keys between samples and steps, copy a sample link, flag it, click the loss curve."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from app import urls
from loaders import Catalog
from tests.browser.conftest import free_port, wait_for

pytestmark = pytest.mark.browser


def until(page, expression: str, timeout: float = 10.0) -> None:
    """Poll ``expression`` from Python (the strict CSP forbids Playwright's in-page predicate eval)."""
    import time

    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {expression}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def runs_server(runs_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    batchscope = shutil.which("batchscope") or str(Path(sys.executable).parent / "batchscope")
    port = free_port()
    env = {**os.environ, "BATCHSCOPE_FLAGS_PATH": str(tmp_path_factory.mktemp("runs-flags") / "flags.sqlite")}
    env.pop("BATCHSCOPE_TOKEN", None)
    log = tmp_path_factory.mktemp("runs-server") / "server.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [batchscope, "serve", "--root", runs_catalog.root, "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for(port, process, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def tab(browser, runs_server: str) -> Iterator[object]:
    context = browser.new_context(base_url=runs_server, viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=runs_server)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: page.errors.append(message.text) if message.type == "error" else None)
    page.set_default_timeout(15_000)
    try:
        yield page
    finally:
        context.close()


def test_step_rank_keys_copy_link_and_flag(tab, runs_server: str, runs_catalog: Catalog) -> None:
    run = runs_catalog.run("pretrain")
    batch = run.batch(3, 1, world_size=2)
    tab.goto(urls.rank("pretrain", 3, 1))
    assert tab.locator("h1").inner_text().replace("\n", " ") == "pretrain · step 3 · rank 1"
    tab.keyboard.press("j")
    until(tab, "location.hash === '#sample-0'")
    tab.keyboard.press("j")
    until(tab, "location.hash === '#sample-1'")
    tab.keyboard.press("k")
    until(tab, "location.hash === '#sample-0'")
    # Copy the permanent link of the second sample and open it: the same record, by key and version id.
    second = tab.locator("article.sample").nth(1)
    second.get_by_role("button", name="copy link").click()
    until(tab, "[...document.querySelectorAll('button.copy-link')].some(b => b.dataset.copied)")
    copied = tab.evaluate("navigator.clipboard.readText()")
    sample = batch.samples[1]
    assert copied == runs_server + urls.sample(sample.address.dataset, sample.address.version, sample.key)
    other = tab.context.new_page()
    other.goto(copied)
    assert other.locator("h1 .key").inner_text() == sample.key
    other.close()
    # Flag it from the step/rank page (htmx, no reload) and find it in /flags.
    tab.evaluate("window.__same_document = true")
    form = second.locator("form.flag-form")
    form.locator("input[name=note]").fill("loss spike from this one")
    form.locator("input[name=tags]").fill("spike")
    form.get_by_role("button", name="flag").click()
    tab.locator("article.sample").nth(1).locator("form.flag-form [role=status]").wait_for()
    assert tab.evaluate("window.__same_document") is True
    tab.goto(urls.flags(tag="spike"))
    row = tab.locator("tr.flag-row", has_text="loss spike from this one")
    assert row.count() == 1 and sample.key in row.inner_text()
    # Brackets move between steps.
    tab.goto(urls.rank("pretrain", 3, 1))
    tab.keyboard.press("]")
    tab.wait_for_url(re.compile(r"/steps/4/ranks/1$"))
    tab.keyboard.press("[")
    tab.wait_for_url(re.compile(r"/steps/3/ranks/1$"))
    tab.keyboard.press("r")
    assert tab.evaluate("document.activeElement.id") == "rank-picker"
    assert tab.errors == []


def test_click_a_point_of_the_loss_curve_opens_that_step(tab) -> None:
    tab.goto(urls.run("pretrain"))
    point = tab.locator("figure.chart[data-metric=loss] svg a").nth(3)
    point.click()
    tab.wait_for_url(re.compile(r"/runs/pretrain/steps/3$"))
    assert "step 3" in tab.locator("h1").inner_text()
    assert tab.locator("tr.rank-share").count() == 2  # step 3 ran on 2 ranks (the run resumed on 1 at step 6)
    assert tab.errors == []

"""The core loop in real Chromium: a step/rank URL, keys between samples and steps, copy a sample link, flag it, click the loss curve."""

from __future__ import annotations

import re
from typing import Iterator

import pytest

from app import urls
from loaders import Catalog
from tests.browser.conftest import open_tab, until

pytestmark = pytest.mark.browser


@pytest.fixture
def tab(browser, runs_server: str) -> Iterator[object]:
    with open_tab(browser, runs_server, clipboard=True) as page:
        yield page


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
    sample = batch.samples[1]
    # Exactly this sample at this step and rank, one URL; its permanent dataset URL is its key link.
    assert tab.evaluate("navigator.clipboard.readText()") == runs_server + urls.rank("pretrain", 3, 1) + "#sample-1"
    permalink = second.locator("p.facts a.key").get_attribute("href")
    assert permalink == urls.sample(sample.address.dataset, sample.address.version, sample.key)
    other = tab.context.new_page()
    other.goto(runs_server + permalink)
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

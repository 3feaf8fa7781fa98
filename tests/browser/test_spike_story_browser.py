"""From a loss spike to the bad sample and back, in real Chromium: run page (zoom, hover, outlier list) → the spike's
step → the worst sample by loss → flag it → the flag's link opens the same sample at the same step in a fresh context."""

from __future__ import annotations

import re
from typing import Iterator

import pytest

from app import urls
from loaders import Catalog
from tests.browser.conftest import open_tab, serving, until
from tests.conftest import word_tokenizer, write_parquet
from tests.support.forensics import SPIKE, WORST, build_forensics_catalog, sample_loss

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def story_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return build_forensics_catalog(tmp_path_factory.mktemp("story"), write_parquet, word_tokenizer)


@pytest.fixture(scope="module")
def story_server(story_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("story-server")
    with serving(story_catalog.root, logs, flags_path=str(logs / "flags.sqlite")) as url:
        yield url


def test_spike_to_worst_sample_to_flag_and_back(browser, story_server: str, story_catalog: Catalog) -> None:
    rank, position = WORST
    sample = story_catalog.run("spiky").batch(SPIKE, rank).samples[position]
    with open_tab(browser, story_server, clipboard=True) as tab:
        tab.goto(urls.run("spiky"))
        chart = tab.locator("figure.chart[data-metric=loss] svg")
        box = chart.bounding_box()
        # Hover a point: its step and value are read out under the chart.
        tab.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        until(tab, "document.querySelector('figure.chart .chart-readout').textContent.startsWith('step ')")
        # The wheel zooms in around the pointer: the server redraws a narrower range and the URL follows.
        tab.mouse.wheel(0, -400)
        until(tab, "new URL(location.href).searchParams.has('from')")
        until(tab, "Number(document.querySelector('figure.chart[data-metric=loss] svg').dataset.x0) > 0")
        assert tab.locator("figure.chart[data-metric=loss] svg a[data-x]").count() < 30
        zoomed = tab.evaluate("[+new URL(location.href).searchParams.get('from'), +new URL(location.href).searchParams.get('to')]")
        # A drag to the left pans to later steps (and opens no step).
        box = tab.locator("figure.chart[data-metric=loss] svg").bounding_box()
        tab.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
        tab.mouse.down()
        tab.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2, steps=5)
        tab.mouse.up()
        until(tab, f"+new URL(location.href).searchParams.get('from') > {zoomed[0]}")
        panned = tab.evaluate("[+new URL(location.href).searchParams.get('from'), +new URL(location.href).searchParams.get('to')]")
        assert panned[1] - panned[0] == zoomed[1] - zoomed[0] and tab.url.startswith(story_server + urls.run("spiky"))
        # The "whole run" link (a plain link, as without JavaScript) goes back to every step.
        tab.get_by_role("link", name="whole run").click()
        tab.wait_for_url(re.compile(r"/runs/spiky\?smooth=0\.6$"))
        # The outlier list names the spike; its link opens the step.
        spike = tab.locator(f"figure.chart[data-metric=loss] tr.outlier[data-step='{SPIKE}']")
        assert spike.locator("td").nth(1).inner_text() == "spike"
        spike.get_by_role("link", name=f"step {SPIKE}").click()
        tab.wait_for_url(re.compile(rf"/runs/spiky/steps/{SPIKE}$"))
        # The step page ranks every sample of every rank by loss: the worst is first.
        first = tab.locator("tr.step-sample").first
        assert (first.get_attribute("data-rank"), first.get_attribute("data-position")) == (str(rank), str(position))
        assert first.locator("td").nth(1).inner_text() == f"{sample_loss(SPIKE, rank, position):.4f}"
        first.get_by_role("link").first.click()
        tab.wait_for_url(re.compile(rf"/runs/spiky/steps/{SPIKE}/ranks/{rank}#sample-{position}$"))
        article = tab.locator(f"article#sample-{position}")
        until(tab, f"document.getElementById('sample-{position}').classList.contains('focused')")
        assert article.get_attribute("data-index") == str(sample.index)
        # Copy link gives exactly this sample's step/rank URL; its documents' permanent URLs are their key links.
        article.get_by_role("button", name="copy link").click()
        until(tab, f"!!document.querySelector('#sample-{position} button.copy-link').dataset.copied")
        assert tab.evaluate("navigator.clipboard.readText()") == story_server + urls.rank("spiky", SPIKE, rank) + f"#sample-{position}"
        keys = article.locator("details.documents a.key")
        assert [keys.nth(i).get_attribute("href") for i in range(keys.count())] == [
            urls.sample("docs", d.address.version, d.key) for d in sample.documents
        ]
        # Flag it (htmx, no reload).
        form = article.locator("form.flag-form")
        form.locator("input[name=note]").fill("worst sample of the spike")
        form.locator("input[name=tags]").fill("spike")
        form.get_by_role("button", name="flag").click()
        article.locator("form.flag-form [role=status]").wait_for()
        tab.goto(urls.flags(tag="spike"))
        row = tab.locator("tr.flag-row", has_text="worst sample of the spike")
        seen_in = row.locator("a:not(.flag-read)").filter(has_text=re.compile("spiky step"))  # the flag's own step, not where-read
        context_url = seen_in.get_attribute("href")
        assert tab.errors == []
    # A fresh browser context (no history, no state) opens the same sample at the same step.
    with open_tab(browser, story_server) as fresh:
        fresh.goto(context_url)
        assert fresh.url == story_server + urls.rank("spiky", SPIKE, rank) + f"#sample-{position}"
        until(fresh, f"document.getElementById('sample-{position}').classList.contains('focused')")
        opened = fresh.locator(f"article#sample-{position}")
        assert opened.get_attribute("data-index") == str(sample.index)
        assert opened.locator(".sample-loss").inner_text() == f"loss {sample_loss(SPIKE, rank, position):.4f}"
        assert [a.inner_text() for a in opened.locator(".documents a.key").all()] == [d.key for d in sample.documents]
        assert "worst sample of the spike" in opened.locator(".flag-notes").inner_text()
        assert fresh.errors == []

"""A run page in real Chromium follows a recorded run as it trains: a newly logged step (and its spike in the outlier
list) appears without a reload, the chart keeps its zoom, and the live marker says how far the run has got."""

from __future__ import annotations

import warnings
from typing import Iterator

import pytest

import batchscope
from app import urls
from loaders import Catalog
from loaders.record import column
from tests.browser.conftest import open_tab, serving, until
from tests.support.readpath import write_text_dataset

pytestmark = pytest.mark.browser

LOSSES = [2.0, 2.1, 1.9, 2.05, 1.95, 2.0, 2.02, 1.98, 2.01, 1.99, 2.03, 1.97]


@pytest.fixture
def recording(tmp_path) -> Iterator[tuple[Catalog, object]]:
    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "alpha", 80, row_group=4, shards=2)
    loader = ([{"id": f"alpha-{(s * 2 + i) % 80}"} for i in range(2)] for s in range(40))
    rec = batchscope.record(loader, run="live", root=catalog.root, source="alpha@v1", keys=column("id"), flush_seconds=0)
    yield catalog, rec
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.close()


def test_a_new_step_appears_on_the_open_run_page_without_a_reload(browser, recording, tmp_path) -> None:
    catalog, rec = recording
    batches = iter(rec)

    def train(loss: float) -> None:
        next(batches)
        step = rec.step - 1
        rec.log(step, loss=loss, sample_loss=[loss, loss / 2])

    for loss in LOSSES:
        train(loss)
    with serving(catalog.root, tmp_path / "logs") as base, open_tab(browser, base) as tab:
        tab.goto(urls.with_query(urls.run("live"), **{"from": 2, "to": 9}))  # zoomed in
        assert tab.locator("#live-marker .live-badge").inner_text() == "● live"
        assert "step 11 (run length not known yet)" in tab.locator("#live-marker .live-text").inner_text()
        assert tab.locator("tr.outlier").count() == 0
        tab.evaluate("window.__same_document = true")
        train(40.0)  # a spike, logged while the page is open
        until(tab, "document.querySelector('#live-marker .live-text').textContent.includes('step 12 (')", timeout=20)
        until(tab, "document.querySelectorAll('tr.outlier[data-step=\"12\"]').length === 1", timeout=20)
        assert tab.evaluate("window.__same_document") is True  # no reload: the same document, updated in place
        caption = tab.locator("figure.chart[data-metric=loss] figcaption").inner_text()
        assert "13 steps logged" in caption
        metrics = tab.locator("#metrics")
        assert (metrics.get_attribute("data-from"), metrics.get_attribute("data-to")) == ("2", "9")  # the zoom is kept
        assert tab.url.endswith("?from=2&to=9")
        tab.goto(urls.step("live", 12))
        tab.evaluate("window.__same_document = true")
        rec.log(12, sample_loss=[1.0, 60.0])  # the per-sample losses arrive later: the ranking follows
        until(tab, "document.querySelector('tr.step-sample').dataset.position === '1'", timeout=20)
        assert tab.evaluate("window.__same_document") is True
        assert tab.errors == []

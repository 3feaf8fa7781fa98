"""The realized mixture in real Chromium: the run page draws the chart, and a window's point opens its step's mix."""

from __future__ import annotations

from typing import Iterator

import pytest

from app import urls
from loaders import Catalog
from tests.browser.conftest import open_tab, serving, until
from tests.support.mixture import NAMES, build_mixture_catalog

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def mixture_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Catalog]]:
    catalog = build_mixture_catalog(tmp_path_factory.mktemp("mixture-browser"))
    logs = tmp_path_factory.mktemp("mixture-server")
    with serving(catalog.root, logs, flags_path=str(logs / "flags.sqlite")) as url:
        yield url, catalog


def test_mixture_chart_renders_and_its_windows_open_their_steps(browser, mixture_server) -> None:
    base, catalog = mixture_server
    run = catalog.run("mixed-packed")
    with open_tab(browser, base) as tab:
        tab.goto(urls.with_query(urls.run("mixed-packed"), window=10))
        chart = tab.locator("figure.mixture-samples svg")
        box = chart.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100  # drawn, not an empty element
        assert tab.locator("figure.mixture-samples svg path.chart-series").count() == 1
        assert tab.locator("figure.mixture-samples svg path.chart-planned").count() == len(NAMES)
        points = tab.locator("figure.mixture-samples svg a")
        assert points.count() == 3
        assert [points.nth(i).get_attribute("href") for i in range(3)] == [urls.step("mixed-packed", s) for s in (0, 10, 20)]
        assert tab.locator("figure.mixture-tokens svg a").count() == 3  # tokens are exact for every window here
        points.nth(1).click()
        until(tab, f"location.pathname === {urls.step('mixed-packed', 10)!r}")
        rows = tab.locator("table.step-mix tr.step-mix-source")
        assert rows.count() == len(NAMES)
        expected = run.step_mixture.step_counts(10).tolist()
        assert [int(rows.nth(i).locator("td").nth(2).inner_text()) for i in range(len(NAMES))] == expected
        assert tab.errors == []

"""SQL and find in real Chromium: type a query, page through it, open a row's permalink; open a version's column
statistics; find the reads of matching rows and follow one to its rank page."""

from __future__ import annotations

import re

import pytest

from app import urls
from loaders import Catalog
from tests.browser.conftest import open_tab

pytestmark = pytest.mark.browser


def test_a_query_typed_runs_in_place_keeps_its_url_and_its_rows_open_their_samples(
    browser, runs_server: str, runs_catalog: Catalog
) -> None:
    version = runs_catalog.resolve("docs@v1")
    query = "SELECT id, text FROM \"docs@v1\" WHERE text LIKE 'gamma%' ORDER BY id"
    with open_tab(browser, runs_server) as tab:
        tab.goto(urls.sql())
        tab.locator("textarea[name=q]").fill(query)
        tab.get_by_role("button", name="run").click()
        tab.wait_for_url(re.compile(r"/sql\?q="))
        rows = tab.locator("#rows table.sql-table tbody tr")
        rows.first.wait_for()
        keys = sorted(f"doc-{i}" for i in range(40) if i % 4 == 2)
        assert rows.count() == len(keys) and rows.first.locator("td").nth(1).inner_text() == keys[0]
        shared = tab.url
        tab.goto(shared)  # the URL alone reproduces the result
        assert tab.locator("textarea[name=q]").input_value() == query and tab.locator("#rows tbody tr").count() == len(keys)
        tab.locator("#rows a.row-link").first.click()
        tab.wait_for_url(re.compile(re.escape(urls.sample("docs", version, keys[0])) + "$"))
        tab.goto(urls.sql(q='SELECT nope FROM "docs@v1"'))
        assert "Referenced column" in tab.locator(".sql-error").inner_text()
        assert tab.locator("textarea[name=q]").input_value() == 'SELECT nope FROM "docs@v1"'
        tab.goto(urls.version("docs", version))
        tab.locator("#column-stats summary").click()
        card = tab.locator('#column-stats article.column-card[data-column="text"]')
        card.wait_for()
        assert card.locator("figure.bars rect.fill").count() > 1
        assert [e for e in tab.errors if "status of 400" not in e] == []  # the refused query's page is a 400, said once


def test_find_lists_reads_and_one_opens_its_rank_page_at_the_sample(browser, runs_server: str) -> None:
    with open_tab(browser, runs_server) as tab:
        tab.goto(urls.run("pretrain"))
        tab.locator("form.find-box input[name=where]").fill("text LIKE 'alpha%'")
        tab.locator("form.find-box").get_by_role("button", name="find").click()
        tab.wait_for_url(re.compile(r"/runs/pretrain/find\?where="))
        first = tab.locator("tr.find-match").first
        first.wait_for()
        key = first.locator("a.sample-link").inner_text()
        href = first.locator("a.read-link").get_attribute("href")
        first.locator("a.read-link").click()
        tab.wait_for_url(re.compile(re.escape(href) + "$"))
        anchor = href.rsplit("#", 1)[1]
        assert key in tab.locator(f"article#{anchor}").inner_text()
        assert tab.errors == []

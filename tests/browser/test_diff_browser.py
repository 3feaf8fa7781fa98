"""Version diffs in real Chromium: open a text row's field diff from the list (htmx), page on, and an image diff's pictures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app import urls
from tests.browser.conftest import open_tab, serving, until
from tests.support.pairs import DiffCatalog

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def diff_server(diff_catalog: DiffCatalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("diff-server")
    with serving(diff_catalog.root, logs, flags_path=str(logs / "flags.sqlite"), page_size="4") as url:
        yield url


@pytest.fixture
def tab(browser, diff_server: str) -> Iterator[object]:
    with open_tab(browser, diff_server) as page:
        yield page


def test_text_diff_opens_in_place_with_highlights(tab, diff_catalog: DiffCatalog) -> None:
    a, b = diff_catalog.resolve("web-text@v1"), diff_catalog.resolve("web-text@v2")
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


def test_image_diff_loads_both_thumbnails_and_the_heatmap(tab, diff_catalog: DiffCatalog) -> None:
    from tests.app.test_diff_page import re_encoded_image

    key = re_encoded_image(diff_catalog)
    a, b = diff_catalog.resolve("images@v1"), diff_catalog.resolve("images@v2")
    assert key in diff_catalog.changes["images"].edited
    tab.goto(urls.diff("images", a.id, b.id, key=key))
    images = ".image-diff img"
    assert tab.locator(images).count() == 3
    until(tab, f"Array.from(document.querySelectorAll('{images}')).every(i => i.complete && i.naturalWidth > 0)")
    srcs = tab.evaluate(f"Array.from(document.querySelectorAll('{images}')).map(i => i.getAttribute('src'))")
    assert srcs[-1] == urls.diff_heatmap("images", a.id, b.id, key, "image")
    assert tab.locator(".media-error").count() == 0
    assert tab.errors == []

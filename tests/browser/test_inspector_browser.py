"""The inspector in real headless Chromium: paging, permalinks and copy-link, flagging with htmx, keyboard, lazy token views."""

from __future__ import annotations

import re

import pytest

from app import urls
from loaders import Catalog

pytestmark = pytest.mark.browser


def keys_shown(page) -> list[str]:
    return page.locator("#rows tr.sample td.key a").all_inner_texts()


def settled(page) -> None:
    """Wait until htmx has swapped and processed the rows (so keyboard links act through htmx, not a page load)."""
    import time

    deadline = time.monotonic() + 10
    script = (
        "!document.querySelector('.htmx-request, .htmx-settling, .htmx-swapping') && "
        "[...document.querySelectorAll('#rows a[hx-get]')].every(a => a['htmx-internal-data'])"
    )
    while not page.evaluate(script):
        assert time.monotonic() < deadline, "htmx did not settle"
        time.sleep(0.05)


def no_errors(page) -> None:
    assert [e for e in page.errors if "favicon" not in e] == []


def test_page_through_a_dataset(page, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("docs@v1")
    page.goto(urls.version("docs", "v1"))  # the tag redirects to the version id
    assert page.url.endswith(urls.version("docs", version.id))
    assert keys_shown(page) == [f"doc-{i}" for i in range(5)]
    page.evaluate("window.__same_document = true")
    page.locator("#rows nav.pager").first.get_by_text("next ›").click()
    page.wait_for_url(re.compile(r"start=5$"))
    settled(page)
    assert keys_shown(page) == [f"doc-{i}" for i in range(5, 10)]
    page.keyboard.press("]")
    page.wait_for_url(re.compile(r"start=10$"))
    settled(page)
    assert keys_shown(page) == ["doc-10", "doc-11"]
    page.keyboard.press("[")
    page.wait_for_url(re.compile(r"end=10$"))
    assert keys_shown(page) == [f"doc-{i}" for i in range(5, 10)]
    assert page.evaluate("window.__same_document") is True  # htmx swapped the rows, no page load
    page.reload()
    assert keys_shown(page) == [f"doc-{i}" for i in range(5, 10)]  # the pushed URL reproduces the view
    no_errors(page)


def test_keyboard_moves_between_samples_and_updates_the_hash(page, inspector_catalog: Catalog) -> None:
    page.goto(urls.version("docs", inspector_catalog.resolve("docs@v1").id, start=5))
    page.keyboard.press("j")
    page.wait_for_function("location.hash === '#sample-5'")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.wait_for_function("location.hash === '#sample-7'")
    page.keyboard.press("k")
    page.wait_for_function("location.hash === '#sample-6'")
    assert page.evaluate("document.activeElement.id") == "sample-6"
    page.locator("form.search input[name=q]").focus()
    page.keyboard.press("j")  # typing in a field does not move
    assert page.evaluate("location.hash") == "#sample-6"
    page.goto(page.url)  # opening the copied URL focuses the same sample
    page.wait_for_function("document.activeElement && document.activeElement.id === 'sample-6'")
    no_errors(page)


def test_sample_permalink_and_copy_link(page, server: str, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("docs@v1")
    page.goto(urls.version("docs", version.id, start=5))
    page.get_by_role("link", name="doc-7", exact=True).click()
    page.wait_for_url(server + urls.sample("docs", version.id, "doc-7"))
    assert page.locator("h1 .key").inner_text() == "doc-7"
    page.get_by_role("button", name="copy link").click()
    page.wait_for_function("document.querySelector('button.copy-link').dataset.copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == server + urls.sample("docs", version.id, "doc-7")
    other = page.context.new_page()
    other.goto(copied)
    assert other.locator("h1 .key").inner_text() == "doc-7"
    assert (
        other.locator("section.field")
        .filter(has=other.locator("h3", has_text="text"))
        .locator(".text-body")
        .inner_text()
        .startswith("document 7:")
    )
    no_errors(page)


def test_flag_a_sample_with_the_htmx_form_and_find_it(page, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("chat@v1")
    page.goto(urls.sample("chat", version.id, "shifted-mask"))
    page.evaluate("window.__same_document = true")
    form = page.locator("form.flag-form")
    form.locator("input[name=note]").fill("mask is shifted by one")
    form.locator("input[name=tags]").fill("bad-mask")
    form.get_by_role("button", name="flag").click()
    status = page.locator("form.flag-form [role=status]")
    status.wait_for()
    assert re.fullmatch(r"flagged as #\d+", status.inner_text())
    assert page.evaluate("window.__same_document") is True
    page.goto(urls.flags(tag="bad-mask"))
    row = page.locator("tr.flag-row", has_text="mask is shifted by one")
    assert row.count() == 1
    row.locator("a.sample-link").click()
    assert page.locator("h1 .key").inner_text() == "shifted-mask"
    no_errors(page)


def test_long_token_views_load_when_revealed_and_toggles_work(page, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("packed@v1")
    page.goto(urls.sample("packed", version.id, "pack-0"))
    tokens = page.locator("section.field .tok-seq .tok")
    tokens.first.wait_for()  # the deferred view (6 tokens > threshold 5) was fetched when revealed
    assert tokens.count() == 6
    field = page.locator("section.field", has=page.locator(".tok-seq"))
    assert tokens.first.locator(".p").is_visible() and not tokens.first.locator(".i").is_visible()
    field.get_by_role("button", name="raw ids").click()
    assert "show-ids" in field.get_attribute("class")
    assert tokens.first.locator(".i").is_visible()
    chat = inspector_catalog.resolve("chat@v1")
    page.goto(urls.sample("chat", chat.id, "no-im-end"))
    assert page.locator(".turn.turn-broken .badge.warn").first.is_visible()
    no_errors(page)

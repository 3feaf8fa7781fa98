"""Run health in real Chromium: the run page's summary loads when scrolled to, opens the health page, whose strip and
findings lead to the bad sample's anchor on its step/rank page."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from app import urls
from loaders import Catalog
from tests.browser.conftest import open_tab, serving, until

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def health_server(lint_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("health") / "catalog"
    shutil.copytree(lint_catalog.root, root)  # the page stores its lint in its catalog: a copy of the shared one's files
    logs = tmp_path_factory.mktemp("health-server")
    with serving(str(root), logs, flags_path=str(logs / "flags.sqlite")) as url:
        yield url


def test_run_page_summary_to_health_page_to_the_bad_sample(browser, health_server: str, tmp_path: Path) -> None:
    with open_tab(browser, health_server) as tab:
        tab.goto(urls.run("lint-chats"))
        summary = tab.locator("section#health-summary")
        summary.scroll_into_view_if_needed()
        until(tab, "document.querySelector('#health-summary[data-findings]') !== null")
        assert "chat-mask × 4" in summary.inner_text()
        summary.locator("a", has_text="chat-mask").click()
        tab.wait_for_url(f"**{urls.run_health('lint-chats', check='chat-mask')}")
        assert tab.locator("tr.finding").count() == 4
        tab.screenshot(path=str(tmp_path / "health.png"), full_page=True)
        row = tab.locator("tr.finding", has_text="chat-user-trained")
        href = row.locator("a.finding-link").get_attribute("href")
        row.locator("a.finding-link").click()
        tab.wait_for_url(f"**{href}")
        anchor = href.split("#")[1]
        until(tab, f"document.getElementById('{anchor}') !== null")
        assert "chat-user-trained" in tab.locator(f"#{anchor}").inner_text()
        assert tab.errors == []

"""RL pages in real Chromium: an episode opened at ``?t=`` shows that frame; the scrubber moves frame, cursors and URL; group filters swap in place."""

from __future__ import annotations

import io
import math
import re
from typing import Iterator

import numpy as np
import pytest
from PIL import Image

from app import urls
from loaders import Catalog
from loaders.media import read_frame_code
from tests.app.test_rl_episodes import build_episode_catalog
from tests.app.test_rl_rollouts import build_rl_catalog, expected_groups
from tests.browser.conftest import open_tab, serving

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def rl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Catalog, list[str]]]:
    """A real server over a catalog with the test episodes and rollouts."""
    root = tmp_path_factory.mktemp("rl-browser")
    catalog, rollout_paths = build_rl_catalog(root)
    build_episode_catalog(root)
    with serving(catalog.root, root / "logs", flags_path=str(root / "flags.sqlite"), page_size="4") as url:
        yield url, catalog, rollout_paths


@pytest.fixture
def tab(browser, rl_server):
    with open_tab(browser, rl_server[0]) as page:
        yield page


def shown_frame(page) -> int:
    """The frame code of the image the page shows, read from the bytes its URL serves."""
    src = page.locator("#rl-frame").get_attribute("src")
    answer = page.request.get(src)
    assert answer.ok and answer.headers["cache-control"] == "public, max-age=31536000, immutable"
    return read_frame_code(np.asarray(Image.open(io.BytesIO(answer.body())).convert("RGB")), bits=8)


def cursor_x(page, chart: str) -> float:
    return float(page.locator(f'.rl-chart[data-chart="{chart}"] line.chart-cursor').get_attribute("x1"))


def test_episode_opens_at_t_and_the_scrubber_moves_it(tab, rl_server) -> None:
    _, catalog, _ = rl_server
    vid = catalog.resolve("episodes@v1").id
    tab.goto(urls.episode("episodes", vid, "ep-2", t=2))
    tab.wait_for_function("document.getElementById('rl-frame').complete")
    assert shown_frame(tab) == 2
    assert tab.locator("#rl-scrubber").input_value() == "2"
    tab.evaluate("window.__same_document = true")
    before = cursor_x(tab, "reward")
    tab.locator("#rl-scrubber").focus()
    for _ in range(3):
        tab.keyboard.press("ArrowRight")
    tab.wait_for_url(re.compile(r"[?&]t=5$"))
    assert tab.locator("#rl-t").inner_text() == "5"
    assert re.search(r"[?&]t=5$", tab.locator("#rl-frame").get_attribute("src"))
    assert shown_frame(tab) == 5
    assert cursor_x(tab, "reward") > before and cursor_x(tab, "action") == cursor_x(tab, "reward")
    assert tab.locator("tr.current").get_attribute("data-t") == "5"
    tab.locator('.rl-chart[data-chart="return"] a[data-x="7"] rect').click()  # a point of a chart moves there too
    tab.wait_for_url(re.compile(r"[?&]t=7$"))
    assert shown_frame(tab) == 7
    tab.locator("body").click(position={"x": 5, "y": 5})
    tab.keyboard.press("[")  # the page's rel=prev link
    tab.wait_for_url(re.compile(r"[?&]t=6$"))
    assert tab.evaluate("window.__same_document") is True  # all of it without a page load
    tab.reload()  # the replaced URL reproduces the moment, rendered by the server
    assert tab.locator("#rl-scrubber").input_value() == "6" and shown_frame(tab) == 6
    assert tab.errors == []


def test_group_filters_swap_in_place_and_push_the_url(tab, rl_server) -> None:
    _, catalog, paths = rl_server
    vid = catalog.resolve("rollouts@v1").id
    groups = expected_groups(paths)
    tab.goto(urls.rollout_groups("rollouts", vid))
    tab.evaluate("window.__same_document = true")
    tab.locator("form.rl-controls select[name=sort]").select_option("-reward")
    tab.wait_for_url(re.compile(r"\?sort=-reward$"))  # empty (default) parameters are left out
    order = sorted(
        groups,
        key=lambda n: (
            not math.isfinite(groups[n]["mean"]),
            -groups[n]["mean"] if math.isfinite(groups[n]["mean"]) else 0,
            groups[n]["first"],
        ),
    )
    shown = tab.locator("section.rl-group").evaluate_all("els => els.map(e => e.dataset.group)")
    assert shown == order[:4]  # a page of four groups
    tab.locator("form.rl-controls select[name=zero_variance]").select_option("1")
    tab.wait_for_url(re.compile(r"zero_variance=1"))
    shown = tab.locator("section.rl-group").evaluate_all("els => els.map(e => e.dataset.group)")
    assert shown == [n for n in order if groups[n]["zero"]]
    tab.locator("section.rl-group .rl-tokens").first.wait_for()  # token views load when revealed
    assert tab.evaluate("window.__same_document") is True
    tab.reload()
    assert tab.locator("section.rl-group").evaluate_all("els => els.map(e => e.dataset.group)") == shown
    assert tab.errors == []

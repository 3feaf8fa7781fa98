"""Images and video in real Chromium: a scrolled grid loads its thumbnails, a ?frame= link shows that frame, the scrubber, model frames."""

from __future__ import annotations

import re
import time
from typing import Iterator

import numpy as np
import pytest

from app import urls
from loaders.media import read_frame_code
from tests.app.test_media_catalog import (
    BAD_PICS,
    CLIPS,
    MediaCatalog,
    build_media_catalog,
)
from tests.browser.conftest import open_tab, serving, until
from tests.support.pairs import image_pair

pytestmark = pytest.mark.browser

#: Reads an <img>'s decoded pixels as the page shows them (same-origin, so the canvas is readable).
PIXELS = """img => {
  const canvas = document.createElement("canvas");
  canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  const context = canvas.getContext("2d");
  context.drawImage(img, 0, 0);
  return [canvas.width, canvas.height, Array.from(context.getImageData(0, 0, canvas.width, canvas.height).data)];
}"""


def shown_code(locator) -> int:
    width, height, data = locator.evaluate(PIXELS)
    return read_frame_code(np.array(data, dtype=np.uint8).reshape(height, width, 4)[:, :, :3])


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> MediaCatalog:
    built = build_media_catalog(tmp_path_factory.mktemp("media-browser"))
    image_pair(built.catalog, rows=60)  # 60 images: a grid taller than the window
    return built


@pytest.fixture(scope="module")
def media_server(media: MediaCatalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("media-server")
    with serving(media.catalog.root, logs, flags_path=str(logs / "flags.sqlite")) as url:
        yield url


@pytest.fixture
def tab(browser, media_server: str) -> Iterator[object]:
    with open_tab(browser, media_server) as page:
        yield page


def test_scrolling_the_grid_loads_every_thumbnail(tab, media: MediaCatalog) -> None:
    version = media.catalog.resolve("images@v1")
    tab.goto(urls.version("images", version.id))
    thumbs = tab.locator("ul.media-grid a.thumb img")
    assert thumbs.count() == 50
    assert thumbs.first.get_attribute("loading") == "lazy"
    height = tab.evaluate("document.body.scrollHeight")
    assert height > 3 * 900
    for y in range(0, height, 600):
        tab.evaluate(f"window.scrollTo(0, {y})")
        time.sleep(0.05)
    until(tab, "Array.from(document.querySelectorAll('ul.media-grid a.thumb img')).every(i => i.complete && i.naturalWidth > 0)")
    widths = tab.evaluate("Array.from(document.querySelectorAll('ul.media-grid a.thumb img')).map(i => i.naturalWidth)")
    assert all(0 < w <= urls.THUMBNAIL_SIDE for w in widths)
    assert tab.errors == []


def test_a_broken_thumbnail_is_replaced_by_the_servers_message(tab, media: MediaCatalog) -> None:
    tab.goto(urls.version("pics", media.pics))
    card = tab.locator("li.sample", has=tab.locator("a.key", has_text=re.compile("^truncated$")))
    card.scroll_into_view_if_needed()
    until(tab, "!!document.querySelector('.media-error')")
    message = card.locator(".media-error").inner_text()
    assert "dataset pics" in message and "truncated" in message
    for key in BAD_PICS:  # refused from the header: the error is in the page itself
        bad = tab.locator("li.sample", has=tab.locator("a.key", has_text=re.compile(f"^{key}$")))
        assert BAD_PICS[key] in bad.locator(".field-error").inner_text()


@pytest.mark.parametrize("key", ["h264", "vp9"])
def test_a_frame_link_opens_on_that_frame_and_the_scrubber_moves_it(tab, media_server: str, media: MediaCatalog, key: str) -> None:
    fps, count, gop = CLIPS[key]
    index = gop + 3
    tab.goto(urls.media_view("clips", media.clips, key, "video", frame=index))
    frame = tab.locator(".video-view img.frame")
    until(tab, "document.querySelector('img.frame').complete && document.querySelector('img.frame').naturalWidth > 0")
    assert shown_code(frame) == index
    tab.locator("form.scrubber input[type=range]").focus()
    tab.keyboard.press("ArrowRight")
    tab.keyboard.press("ArrowRight")
    tab.wait_for_url(re.compile(rf"frame={index + 2}$"))
    until(tab, f"document.querySelector('img.frame').dataset.frame === '{index + 2}' && document.querySelector('img.frame').complete")
    assert shown_code(frame) == index + 2
    assert tab.locator("output.frame-index").inner_text() == str(index + 2)
    assert tab.locator("output.frame-time").inner_text() == f"{(index + 2) / fps:.3f}"
    last = tab.locator(".filmstrip li a").last
    last.click()
    tab.wait_for_url(re.compile(rf"frame={count - 1}$"))
    until(tab, f"document.querySelector('img.frame').dataset.frame === '{count - 1}' && document.querySelector('img.frame').complete")
    assert shown_code(frame) == count - 1
    tab.reload()  # the URL the scrubber left opens on the same frame, rendered by the server
    until(tab, "document.querySelector('img.frame').complete && document.querySelector('img.frame').naturalWidth > 0")
    assert shown_code(frame) == count - 1
    assert tab.errors == []


def test_rank_page_shows_exactly_the_sampled_frames(tab, media: MediaCatalog) -> None:
    run = media.catalog.run(media.run)
    for step in range(run.total_steps):
        for rank in range(run.world_size_at(step)):
            batch = run.batch(step, rank)
            if any("frames" in s.inputs for s in batch.samples):
                break
        else:
            continue
        break
    wanted = [list(s.inputs["frame_indices"]) for s in batch.samples if "frames" in s.inputs]
    tab.goto(urls.rank(media.run, batch.step, batch.rank))
    strips = tab.locator(".model-strip")
    assert strips.count() == len(wanted)
    for strip, indices in zip(strips.all(), wanted):
        strip.scroll_into_view_if_needed()
        images = strip.locator("img")
        assert [int(li.get_attribute("data-frame")) for li in strip.locator("li").all()] == indices
        for j, image in enumerate(images.all()):
            until(tab, "Array.from(document.querySelectorAll('.model-strip img')).every(i => i.complete && i.naturalWidth > 0)")
            assert shown_code(image) == indices[j]

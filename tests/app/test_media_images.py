"""Images in the inspector: the thumbnail grid, thumbnails (EXIF, modes), original bytes with Range, metadata, boxes, bad input."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from app import urls
from app.factory import create_app
from app.settings import Settings
from tests.app.dom import soup
from tests.app.test_media_catalog import (
    BAD_PICS,
    RED_BOX,
    MediaCatalog,
    build_media_catalog,
)
from tests.support.local_client import local_client

IMMUTABLE = "public, max-age=31536000, immutable"
ROWS_PER_SHARD = 7  # 14 rows written as 2 shards


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> MediaCatalog:
    return build_media_catalog(tmp_path_factory.mktemp("media-images"))


@pytest.fixture
def client(media: MediaCatalog, tmp_path: Path) -> TestClient:
    return local_client(create_app(Settings(root=media.catalog.root, flags_path=str(tmp_path / "f.sqlite"))), follow_redirects=False)


def keys(media: MediaCatalog) -> list[str]:
    return list(media.images) + ["by-path", "escape"]


def place(media: MediaCatalog, key: str) -> tuple[int, int]:
    index = keys(media).index(key)
    return index // ROWS_PER_SHARD, index % ROWS_PER_SHARD


def picture(response) -> Image.Image:
    img = Image.open(io.BytesIO(response.content))
    img.load()
    return img


def is_red(pixel: tuple[int, ...]) -> bool:
    return pixel[0] > 180 and pixel[1] < 90 and pixel[2] < 90


def assert_names_where(media: MediaCatalog, message: str, key: str, cause: str) -> None:
    shard, row = place(media, key)
    for part in ("dataset pics", f"version {media.pics[:12]}", f"shard {shard}", f"row {row}", cause):
        assert part in message, (part, message)


# -- the grid ------------------------------------------------------------------------
def test_version_page_is_a_grid_of_lazy_thumbnails_with_real_links(client: TestClient, media: MediaCatalog) -> None:
    page = soup(client.get(urls.version("pics", media.pics)))
    cards = page.select("#rows ul.media-grid li.sample")
    assert [c.select_one(".card-text a.key").get_text() for c in cards] == keys(media)
    assert page.select("#rows nav.pager") and not page.select("#rows table.listing")
    for card in cards:
        key = card.select_one(".card-text a.key").get_text()
        assert card["id"] == urls.sample_id(keys(media).index(key))
        if key in BAD_PICS:
            error = card.select_one(".field-error").get_text()
            assert_names_where(media, error, key, BAD_PICS[key])
            assert card.select_one("img") is None
            continue
        img = card.select_one("a.thumb > img")
        assert img["loading"] == "lazy" and img["src"] == urls.thumbnail("pics", media.pics, key, "image")
        assert img.find_parent("a")["href"] == urls.sample("pics", media.pics, key)
        assert card.select_one(".card-field").get_text(" ", strip=True) == f"label label of {key}"
    exif = next(c for c in cards if c.select_one("a.key").get_text() == "exif-6").select_one("img")
    assert (int(exif["width"]), int(exif["height"])) == (171, 256)  # a 200x300 portrait as displayed: EXIF applied


def test_grid_keeps_cursor_paging(media: MediaCatalog, tmp_path: Path) -> None:
    client = local_client(create_app(Settings(root=media.catalog.root, page_size=5, flags_path=str(tmp_path / "f.sqlite"))))
    page = soup(client.get(urls.version("pics", media.pics, start=5)))
    assert [a.get_text() for a in page.select("ul.media-grid li.sample .card-text a.key")] == keys(media)[5:10]
    assert page.select_one("nav.pager a[rel=next]")["href"] == urls.version("pics", media.pics, start=10)
    fragment = client.get(urls.version("pics", media.pics, start=10), headers={"HX-Request": "true"})
    assert [a.get_text() for a in soup(fragment).select("#rows li.sample a.key")] == keys(media)[10:14]


# -- thumbnails ----------------------------------------------------------------------
@pytest.mark.parametrize("key, size", [("exif-6", (171, 256)), ("exif-3", (171, 256)), ("plain-png", (256, 171)), ("photo", (256, 171))])
def test_thumbnails_are_upright_and_small(client: TestClient, media: MediaCatalog, key: str, size: tuple[int, int]) -> None:
    response = client.get(urls.thumbnail("pics", media.pics, key, "image"))
    assert response.status_code == 200 and response.headers["content-type"] == "image/webp"
    thumb = picture(response).convert("RGB")
    assert thumb.size == size
    scale = thumb.width / (200 if key.startswith("exif") else 300)
    assert is_red(thumb.getpixel((int(RED_BOX[2] * scale) // 2, int(RED_BOX[3] * scale) // 2)))  # top left, upright
    assert not is_red(thumb.getpixel((thumb.width - 5, thumb.height - 5)))


def test_thumbnail_sizes_and_modes(client: TestClient, media: MediaCatalog) -> None:
    assert picture(client.get(urls.thumbnail("pics", media.pics, "photo", "image", size=64))).size == (64, 43)
    rgba = client.get(urls.thumbnail("pics", media.pics, "rgba", "image"))
    assert rgba.headers["content-type"] == "image/png" and picture(rgba).mode == "RGBA"
    assert picture(rgba).getpixel((10, 10))[3] == 128
    sixteen = picture(client.get(urls.thumbnail("pics", media.pics, "sixteen", "image"))).convert("L")
    low, high = sixteen.getextrema()
    assert low < 20 and high > 235  # the full 16-bit range mapped to 8 bits, not clipped to white
    gray = picture(client.get(urls.thumbnail("pics", media.pics, "gray", "image"))).convert("RGB")
    assert len(set(gray.getpixel((5, 5)))) == 1
    assert picture(client.get(urls.thumbnail("pics", media.pics, "tiff", "image"))).size == (256, 171)


def test_thumbnails_are_immutable_with_a_strong_etag(client: TestClient, media: MediaCatalog) -> None:
    url = urls.thumbnail("pics", media.pics, "photo", "image")
    first = client.get(url)
    tag = first.headers["etag"]
    assert first.headers["cache-control"] == IMMUTABLE and tag.startswith('"') and not tag.startswith("W/")
    for header in (tag, f'"other", {tag}', f"W/{tag}", "*"):
        again = client.get(url, headers={"If-None-Match": header})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == tag
    assert client.get(url, headers={"If-None-Match": '"other"'}).content == first.content
    other = client.get(urls.thumbnail("pics", media.pics, "photo", "image", size=64))
    assert other.headers["etag"] != tag


def test_a_tag_in_a_media_url_redirects_to_the_version_id(client: TestClient, media: MediaCatalog) -> None:
    response = client.get(urls.thumbnail("pics", "v1", "photo", "image"))
    assert response.status_code == 307 and response.headers["location"] == urls.thumbnail("pics", media.pics, "photo", "image")


def test_the_cache_stays_within_its_byte_budget(media: MediaCatalog, tmp_path: Path) -> None:
    budget = 4_000
    app = create_app(Settings(root=media.catalog.root, media_cache_bytes=budget, flags_path=str(tmp_path / "f.sqlite")))
    client = local_client(app)
    made = 0
    for key in ("photo", "plain-png", "gray", "tiff"):
        for url in (
            urls.thumbnail("pics", media.pics, key, "image", size=64),
            urls.thumbnail("pics", media.pics, key, "image"),
            urls.boxed("pics", media.pics, key, "image", (1, 1, 50, 50)),
            urls.boxed("pics", media.pics, key, "image", (2, 2, 60, 60)),
        ):
            response = client.get(url)
            assert response.status_code == 200
            made += len(response.content)
            assert 0 < app.state.media_cache.used <= budget
    assert made > 3 * budget  # the cache really had to evict


# -- original bytes ------------------------------------------------------------------------
def test_original_bytes_with_their_type_and_range_requests(client: TestClient, media: MediaCatalog) -> None:
    data = media.images["photo"]
    url = urls.media("pics", media.pics, "photo", "image")
    whole = client.get(url)
    assert whole.content == data and whole.headers["content-type"] == "image/jpeg"
    assert "content-disposition" not in whole.headers and whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["cache-control"] == IMMUTABLE
    part = client.get(url, headers={"Range": "bytes=10-19"})
    assert part.status_code == 206 and part.content == data[10:20]
    assert part.headers["content-range"] == f"bytes 10-19/{len(data)}"
    tail = client.get(url, headers={"Range": "bytes=-7"})
    assert tail.status_code == 206 and tail.content == data[-7:]
    clipped = client.get(url, headers={"Range": f"bytes={len(data) - 3}-{len(data) + 50}"})
    assert clipped.status_code == 206 and clipped.content == data[-3:]
    past = client.get(url, headers={"Range": f"bytes={len(data)}-"})
    assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{len(data)}"
    assert "outside" in soup(past).select_one(".message").get_text()
    assert client.get(url, headers={"If-None-Match": whole.headers["etag"]}).status_code == 304


def test_svg_and_unknown_types_are_downloads_never_inline(client: TestClient, media: MediaCatalog) -> None:
    for key in ("svg", "corrupt"):
        response = client.get(urls.media("pics", media.pics, key, "image"))
        assert response.content == media.images[key]
        assert response.headers["content-type"] == "application/octet-stream"
        assert response.headers["content-disposition"].startswith("attachment;")


def test_images_stored_by_path_are_read_inside_the_shard_directory_only(client: TestClient, media: MediaCatalog) -> None:
    url = urls.media("pics", media.pics, "by-path", "image")
    whole = client.get(url)
    assert whole.content == media.images["plain-png"] and whole.headers["content-type"] == "image/png"
    assert client.get(url, headers={"Range": "bytes=0-7"}).content == b"\x89PNG\r\n\x1a\n"
    assert picture(client.get(urls.thumbnail("pics", media.pics, "by-path", "image"))).size == (256, 171)
    escape = client.get(urls.thumbnail("pics", media.pics, "escape", "image"))
    assert escape.status_code == 422
    assert_names_where(media, soup(escape).select_one(".message").get_text(), "escape", BAD_PICS["escape"])
    assert client.get(urls.media("pics", media.pics, "escape", "image")).status_code == 422


# -- the full image and its metadata ----------------------------------------------------------
def test_sample_page_shows_the_image_with_its_metadata(client: TestClient, media: MediaCatalog) -> None:
    page = soup(client.get(urls.sample("pics", media.pics, "exif-6")))
    view = page.select_one("section.field[data-kind=image] figure.image-view")
    assert view.select_one("img")["src"] == urls.media("pics", media.pics, "exif-6", "image")
    assert view.select_one("dd.image-format").get_text() == "JPEG"
    assert view.select_one("dd.image-size").get_text().startswith("200 × 300")
    assert view.select_one("dd.image-mode").get_text() == "RGB"
    assert f"{len(media.images['exif-6']):,}" in view.select_one("dd.image-bytes").get_text()
    exif = {th.get_text(): td.get_text() for th, td in zip(view.select(".exif-tags th"), view.select(".exif-tags td"))}
    assert exif["Make"] == "batchscope test camera" and exif["Orientation"] == "6"
    assert view.select_one("a[href]")["href"] == urls.media("pics", media.pics, "exif-6", "image")
    assert page.select_one("section.field .text-body").get_text() == "exif-6"  # the other fields render too


def test_formats_browsers_cannot_show_get_a_rendition(client: TestClient, media: MediaCatalog) -> None:
    view = soup(client.get(urls.sample("pics", media.pics, "tiff"))).select_one("figure.image-view")
    assert view.select_one("dd.image-format").get_text() == "TIFF"
    src = view.select_one("img")["src"]
    assert src == urls.add_query(urls.media("pics", media.pics, "tiff", "image"), thumb=2048)
    assert client.get(src).headers["content-type"] == "image/webp"


def test_view_page_and_its_json_twin(client: TestClient, media: MediaCatalog) -> None:
    url = urls.media_view("pics", media.pics, "gray", "image")
    page = soup(client.get(url))
    assert page.select_one("figure.image-view dd.image-mode").get_text() == "L"
    data = client.get(urls.api(url)).json()
    assert data["info"]["mode"] == "L" and data["info"]["width"] == 300 and data["kind"] == "image"
    assert data["media_url"] == urls.media("pics", media.pics, "gray", "image") and data["frame"] is None
    assert client.get(urls.api(urls.media_view("pics", media.pics, "gray", "image", frame=3))).status_code == 422
    assert client.get(urls.api(urls.media_view("pics", media.pics, "gray", "label"))).status_code == 422


def test_images_stored_by_path_load_as_a_fragment(client: TestClient, media: MediaCatalog) -> None:
    deferred = soup(client.get(urls.sample("pics", media.pics, "by-path"))).select_one(".media-deferred")
    view_url = urls.media_view("pics", media.pics, "by-path", "image")
    assert deferred["hx-get"] == view_url and deferred["hx-trigger"] == "revealed" and deferred.a["href"] == view_url
    fragment = soup(client.get(view_url, headers={"HX-Request": "true"}))
    assert fragment.select_one(".media-block figure.image-view dd.image-format").get_text() == "PNG"
    assert fragment.select_one("header") is None


# -- boxes ------------------------------------------------------------------------------------------
def test_original_with_a_box_drawn(client: TestClient, media: MediaCatalog) -> None:
    boxed = client.get(urls.boxed("pics", media.pics, "plain-png", "image", (100, 50, 200, 150)))
    assert boxed.headers["content-type"] == "image/png" and boxed.headers["cache-control"] == IMMUTABLE
    img = picture(boxed).convert("RGB")
    assert img.size == (300, 200)
    assert img.getpixel((100, 100)) == (255, 32, 32) and img.getpixel((150, 49)) == (30, 60, 200)
    assert img.getpixel((150, 100)) == (30, 60, 200)
    small = picture(client.get(urls.boxed("pics", media.pics, "plain-png", "image", (100, 50, 200, 150), size=128)))
    assert small.size == (128, 85)
    snapped = client.get(urls.boxed("pics", media.pics, "plain-png", "image", (100, 50, 200, 150), size=150))
    assert picture(snapped).size == (160, 107)  # sizes come from a fixed set: 150 is made at 160
    upright = picture(client.get(urls.boxed("pics", media.pics, "exif-6", "image", (10, 10, 190, 290)))).convert("RGB")
    assert upright.size == (200, 300) and is_red(upright.getpixel((30, 20)))  # box in upright pixels
    outside = client.get(urls.boxed("pics", media.pics, "exif-6", "image", (10, 10, 290, 190)))
    assert outside.status_code == 422 and "not inside the 200x300 image" in soup(outside).select_one(".message").get_text()


# -- bad input ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(BAD_PICS) + ["truncated"])
def test_bad_images_show_an_inline_error_and_the_page_renders(client: TestClient, media: MediaCatalog, key: str) -> None:
    response = client.get(urls.sample("pics", media.pics, key))
    assert response.status_code == 200
    page = soup(response)
    assert page.select_one("h1 .key").get_text() == key
    assert [s.get_text() for s in page.select("section.field .text-body")] == [key, f"label of {key}"]
    thumb = client.get(urls.thumbnail("pics", media.pics, key, "image"))
    assert thumb.status_code == 422
    message = soup(thumb).select_one(".message").get_text()
    if key == "truncated":
        assert_names_where(media, message, key, "truncated")
        assert page.select_one("figure.image-view img")  # the header is fine: the browser gets an error from the thumbnail
    else:
        assert_names_where(media, page.select_one("section.field[data-kind=image] .field-error").get_text(), key, BAD_PICS[key])
        assert_names_where(media, message, key, BAD_PICS[key])
    assert client.get(urls.thumbnail("pics", media.pics, "photo", "image")).status_code == 200  # still serving


def test_bad_parameters_answer_with_the_error_shape(client: TestClient, media: MediaCatalog) -> None:
    base = urls.media("pics", media.pics, "photo", "image")
    cases = {
        urls.add_query(base, thumb=5): (422, "thumb=5 is out of range"),
        urls.add_query(base, frame=2): (422, "is image, not video"),
        urls.add_query(base, box="1,2,3"): (422, "not four comma-separated integers"),
        urls.add_query(base, thumb="big"): (422, "thumb"),
        urls.thumbnail("pics", media.pics, "photo", "nope"): (404, "has no column 'nope'"),
        urls.thumbnail("pics", media.pics, "no-such-key", "image"): (404, "no-such-key"),
    }
    for url, (status, text) in cases.items():
        response = client.get(url)
        assert response.status_code == status, url
        assert text in soup(response).select_one(".message").get_text(), url

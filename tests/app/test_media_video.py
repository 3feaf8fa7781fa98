"""Video in the inspector: served frames are exactly the ones asked for (read back from their frame codes), the view page, bad clips."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders.media import read_frame_code
from tests.app.dom import soup
from tests.app.test_media_catalog import (
    BACKWARDS_FRAME,
    BAD_CLIPS,
    CLIP_SIZE,
    CLIPS,
    MediaCatalog,
    build_media_catalog,
)
from tests.support.local_client import local_client

IMMUTABLE = "public, max-age=31536000, immutable"
#: Clip keys by codec, and the one stored by path (a VP9 clip).
GOOD = {"h264": "h264", "vp9": "vp9", "by-path": "vp9"}


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> MediaCatalog:
    return build_media_catalog(tmp_path_factory.mktemp("media-video"))


@pytest.fixture
def client(media: MediaCatalog, tmp_path: Path) -> TestClient:
    return local_client(create_app(Settings(root=media.catalog.root, flags_path=str(tmp_path / "f.sqlite"))), follow_redirects=False)


def code_of(response) -> int:
    assert response.status_code == 200, response.text[:500]
    return read_frame_code(np.asarray(Image.open(io.BytesIO(response.content)).convert("RGB")))


def clip_keys(media: MediaCatalog) -> list[str]:
    return list(media.videos) + ["by-path"]


# -- exact frames -------------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(GOOD))
def test_served_frames_are_exactly_the_frames_asked_for(client: TestClient, media: MediaCatalog, key: str) -> None:
    _, count, gop = CLIPS[GOOD[key]]
    wanted = [0, 1, gop - 1, gop, gop + 1, count // 2 + 3, count - 1, 7]  # keyframes, mid-GOP, the last frame, backwards
    for index in wanted:
        response = client.get(urls.frame("clips", media.clips, key, "video", index))
        assert response.headers["content-type"] == "image/jpeg"
        assert Image.open(io.BytesIO(response.content)).size == CLIP_SIZE
        assert code_of(response) == index, (key, index)


def test_frames_are_immutable_and_cached(client: TestClient, media: MediaCatalog) -> None:
    url = urls.frame("clips", media.clips, "h264", "video", 17)
    first = client.get(url)
    assert first.headers["cache-control"] == IMMUTABLE and first.headers["etag"].startswith('"')
    assert client.get(url, headers={"If-None-Match": first.headers["etag"]}).status_code == 304
    used = client.app.state.media_cache.used
    again = client.get(url)
    assert again.content == first.content and client.app.state.media_cache.used == used  # a cache hit, nothing new kept
    small = client.get(urls.frame("clips", media.clips, "h264", "video", 17, size=64))
    assert small.headers["content-type"] == "image/jpeg" and Image.open(io.BytesIO(small.content)).size == (64, 48)


def test_a_video_thumbnail_is_its_first_frame(client: TestClient, media: MediaCatalog) -> None:
    for key in GOOD:
        assert code_of(client.get(urls.thumbnail("clips", media.clips, key, "video"))) == 0


def test_original_clip_bytes_with_ranges(client: TestClient, media: MediaCatalog) -> None:
    for key, kind, data in (("h264", "video/mp4", media.videos["h264"]), ("by-path", "video/webm", media.videos["vp9"])):
        url = urls.media("clips", media.clips, key, "video")
        whole = client.get(url)
        assert whole.content == data and whole.headers["content-type"] == kind and "content-disposition" not in whole.headers
        part = client.get(url, headers={"Range": "bytes=100-299"})
        assert part.status_code == 206 and part.content == data[100:300]
        assert part.headers["content-range"] == f"bytes 100-299/{len(data)}"
        assert client.get(url, headers={"Range": f"bytes={len(data) + 10}-"}).status_code == 416
        assert client.get(url, headers={"If-None-Match": whole.headers["etag"]}).status_code == 304


# -- the view page: ?frame= and ?t= render that frame on the server ----------------------------------
@pytest.mark.parametrize("key", ["h264", "by-path"])
def test_view_page_opens_on_the_frame_in_its_url(client: TestClient, media: MediaCatalog, key: str) -> None:
    fps, count, gop = CLIPS[GOOD[key]]
    index = gop + 4
    page = soup(client.get(urls.media_view("clips", media.clips, key, "video", frame=index)))
    view = page.select_one(".video-view")
    img = view.select_one("img.frame")
    assert img["src"] == urls.frame("clips", media.clips, key, "video", index)
    assert code_of(client.get(img["src"])) == index
    assert view.select_one("output.frame-index").get_text() == str(index)
    assert view.select_one("output.frame-time").get_text() == f"{index / fps:.3f}"
    assert view.select_one("form.scrubber input[type=range]")["value"] == str(index)
    assert view.select_one("form.scrubber input[type=range]")["max"] == str(count - 1)
    assert view["data-page"] == "true"
    assert view.select_one("a.frame-link")["href"] == urls.media_view("clips", media.clips, key, "video", frame=index)
    assert page.select_one(".current-frame").get_text() == str(index)
    facts = {dt.get_text(): dd.get_text() for dt, dd in zip(view.select("dl dt"), view.select("dl dd"))}
    container, codec = ("mp4", "h264") if GOOD[key] == "h264" else ("webm", "vp9")
    assert facts["container"] == container and facts["codec"] == codec and facts["frames"] == str(count)
    assert float(facts["fps"]) == fps and facts["duration"] == f"{count / fps:.3f} s"
    strip = view.select(".filmstrip li a")
    assert strip[0]["data-frame"] == "0" and strip[-1]["data-frame"] == str(count - 1)
    for link in strip:
        frame = int(link["data-frame"])
        assert link["href"] == urls.media_view("clips", media.clips, key, "video", frame=frame)
        assert link.select_one("img")["loading"] == "lazy"
        assert link.select_one(".label").get_text() == f"{frame} · {frame / fps:.3f} s"
    assert code_of(client.get(strip[3].select_one("img")["src"])) == int(strip[3]["data-frame"])


def test_the_scrubber_works_without_javascript(client: TestClient, media: MediaCatalog) -> None:
    view = soup(client.get(urls.media_view("clips", media.clips, "vp9", "video"))).select_one(".video-view")
    form = view.select_one("form.scrubber")
    params = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
    response = client.get(form["action"], params={**params, "frame": 33})
    assert soup(response).select_one("img.frame")["src"] == urls.frame("clips", media.clips, "vp9", "video", 33)


def test_t_opens_the_frame_shown_at_that_time(client: TestClient, media: MediaCatalog) -> None:
    fps, count, _ = CLIPS["vp9"]
    for seconds in (0.0, 0.5, 1.07, (count - 1) / fps):
        data = client.get(urls.api(urls.media_view("clips", media.clips, "vp9", "video", t=seconds))).json()
        expected = math.floor(seconds * fps + 1e-6)
        assert data["frame"] == expected and data["url"] == urls.media_view("clips", media.clips, "vp9", "video", frame=expected)
        assert code_of(client.get(data["frame_url"])) == expected
    assert data["info"]["frame_count"] == count and data["info"]["codec"] == "vp9"


def test_frames_past_the_end_are_not_found(client: TestClient, media: MediaCatalog) -> None:
    count = CLIPS["h264"][1]
    for url in (
        urls.media_view("clips", media.clips, "h264", "video", frame=count),
        urls.frame("clips", media.clips, "h264", "video", count),
        urls.media_view("clips", media.clips, "h264", "video", t=count),
    ):
        response = client.get(url)
        assert response.status_code == 404 and "out of range" in soup(response).select_one(".message").get_text(), url
    both = client.get(urls.api(urls.media_view("clips", media.clips, "h264", "video", frame=1, t=0.5)))
    assert both.status_code == 422 and both.json()["error"] == "give frame or t, not both"


def test_sample_page_shows_the_clip_and_defers_clips_stored_by_path(client: TestClient, media: MediaCatalog) -> None:
    inline = soup(client.get(urls.sample("clips", media.clips, "h264"))).select_one("section.field[data-kind=video] .video-view")
    assert inline["data-page"] == "false" and inline.select_one("img.frame")["src"] == urls.frame("clips", media.clips, "h264", "video", 0)
    assert len(inline.select(".filmstrip li")) == 10
    deferred = soup(client.get(urls.sample("clips", media.clips, "by-path"))).select_one(".media-deferred")
    assert deferred["hx-get"] == urls.media_view("clips", media.clips, "by-path", "video")
    fragment = soup(client.get(deferred["hx-get"], headers={"HX-Request": "true"}))
    assert fragment.select_one(".video-view")["data-page"] == "false"  # loaded into another page: leave its URL alone
    assert fragment.select_one("dd.video-codec").get_text() == "vp9"


def test_a_clip_stored_by_path_shows_the_path_it_stores_never_the_servers_file(client: TestClient, media: MediaCatalog) -> None:
    page = client.get(urls.media_view("clips", media.clips, "by-path", "video"))
    assert soup(page).select_one("dd.stored-path").get_text() == "media/by-path.webm"  # relative to its shard's directory
    root = media.catalog.root
    for answer in (page, client.get(urls.api(urls.media_view("clips", media.clips, "by-path", "video")))):
        assert root not in answer.text and root.rstrip("/").rsplit("/", 1)[-1] not in answer.text


def test_video_grid(client: TestClient, media: MediaCatalog) -> None:
    cards = soup(client.get(urls.version("clips", media.clips))).select("ul.media-grid li.sample")
    assert [c.select_one(".card-text a.key").get_text() for c in cards] == clip_keys(media)
    by_key = {c.select_one(".card-text a.key").get_text(): c for c in cards}
    for key in ("h264", "vp9", "by-path", "backwards"):
        img = by_key[key].select_one(".video-cell a.thumb img")
        assert img["src"] == urls.thumbnail("clips", media.clips, key, "video") and img["loading"] == "lazy"
    assert "mp4 h264 128×96 30 fps" in by_key["h264"].select_one(".video-cell .cell").get_text()
    for key, cause in BAD_CLIPS.items():
        error = by_key[key].select_one(".field-error").get_text()
        assert "dataset clips" in error and f"row {clip_keys(media).index(key)}" in error and cause in error


# -- bad clips -----------------------------------------------------------------------------------------
def test_timestamps_going_backwards_show_inline_and_the_page_renders(client: TestClient, media: MediaCatalog) -> None:
    good = soup(client.get(urls.media_view("clips", media.clips, "backwards", "video", frame=5)))
    assert good.select_one(".frame-error") is None
    response = client.get(urls.media_view("clips", media.clips, "backwards", "video", frame=BACKWARDS_FRAME))
    assert response.status_code == 200
    page = soup(response)
    error = page.select_one(".video-view .frame-error").get_text()
    row = clip_keys(media).index("backwards")
    assert "dataset clips" in error and "shard 0" in error and f"row {row}" in error and "timestamps go backwards" in error
    assert page.select_one(".video-view dd.video-frames").get_text() == str(CLIPS["vp9"][1])  # the rest renders
    frame = client.get(urls.frame("clips", media.clips, "backwards", "video", BACKWARDS_FRAME))
    assert frame.status_code == 422 and "timestamps go backwards" in soup(frame).select_one(".message").get_text()


@pytest.mark.parametrize("key", sorted(BAD_CLIPS))
def test_unreadable_clips_show_inline_errors(client: TestClient, media: MediaCatalog, key: str) -> None:
    page = soup(client.get(urls.sample("clips", media.clips, key)))
    error = page.select_one("section.field[data-kind=video] .field-error").get_text()
    assert f"row {clip_keys(media).index(key)}" in error and BAD_CLIPS[key] in error
    assert [t.get_text() for t in page.select("section.field .text-body")] == [key, f"clip {key}"]
    view = client.get(urls.media_view("clips", media.clips, key, "video"))
    assert view.status_code == 200 and BAD_CLIPS[key] in soup(view).select_one(".field-error").get_text()
    assert client.get(urls.frame("clips", media.clips, key, "video", 0)).status_code == 422
    assert client.get(urls.frame("clips", media.clips, "h264", "video", 3)).status_code == 200  # still serving


def test_a_truncated_clip_serves_the_frames_it_holds(client: TestClient, media: MediaCatalog) -> None:
    assert code_of(client.get(urls.frame("clips", media.clips, "truncated", "video", 2))) == 2
    last = client.get(urls.frame("clips", media.clips, "truncated", "video", CLIPS["h264"][1] - 1))
    assert last.status_code == 422 and "out of range" in soup(last).select_one(".message").get_text()

"""Model inputs made from media: the served frames are exactly the ones ``SampleFrames`` sampled, the crop is the model's pixels."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from PIL import Image

from app import urls
from app.factory import create_app
from app.renderers.registry import FieldContext, render_field
from app.settings import Settings
from app.templating import Templates
from loaders import Batch, Sample
from loaders.media import read_frame_code
from tests.app.dom import soup
from tests.app.test_media_catalog import MediaCatalog, build_media_catalog
from tests.support.local_client import local_client

IMMUTABLE = "public, max-age=31536000, immutable"


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> MediaCatalog:
    return build_media_catalog(tmp_path_factory.mktemp("media-inputs"))


@pytest.fixture
def client(media: MediaCatalog, tmp_path: Path) -> TestClient:
    return local_client(create_app(Settings(root=media.catalog.root, flags_path=str(tmp_path / "f.sqlite"))), follow_redirects=False)


def batches(media: MediaCatalog) -> list[Batch]:
    run = media.catalog.run(media.run)
    return [run.batch(step, rank) for step in range(run.total_steps) for rank in range(run.world_size_at(step))]


def pixels(response) -> np.ndarray:
    assert response.status_code == 200, response.text[:500]
    assert response.headers["content-type"] == "image/png"
    return np.asarray(Image.open(io.BytesIO(response.content)))


def test_the_run_samples_both_kinds(media: MediaCatalog) -> None:
    inputs = [set(s.inputs) for b in batches(media) for s in b.samples]
    assert any("frames" in i for i in inputs) and any("crop_box" in i for i in inputs)


def test_served_input_frames_are_exactly_the_sampled_frames(client: TestClient, media: MediaCatalog) -> None:
    checked = 0
    for batch in batches(media):
        for position, sample in enumerate(batch.samples):
            if "frames" not in sample.inputs:
                continue
            served = []
            for j in range(len(sample.inputs["frame_indices"])):
                url = urls.input_media(media.run, batch.step, batch.rank, position, "frames", j)
                frame = pixels(client.get(url))
                assert np.array_equal(frame, sample.inputs["frames"][j])  # lossless: the model's pixels
                served.append(read_frame_code(frame))
            assert served == list(sample.inputs["frame_indices"])
            checked += 1
    assert checked >= 2


def test_served_crops_are_the_model_inputs(client: TestClient, media: MediaCatalog) -> None:
    checked = 0
    for batch in batches(media):
        for position, sample in enumerate(batch.samples):
            if "crop_box" in sample.inputs:
                crop = pixels(client.get(urls.input_media(media.run, batch.step, batch.rank, position, "image")))
                assert crop.shape == (32, 48, 3) and np.array_equal(crop, sample.inputs["image"])
                checked += 1
    assert checked >= 2


def _first(media: MediaCatalog, needs: str) -> tuple[Batch, int]:
    for batch in batches(media):
        for position, sample in enumerate(batch.samples):
            if needs in sample.inputs:
                return batch, position
    raise AssertionError(f"no sample with {needs}")


def test_input_images_are_immutable(client: TestClient, media: MediaCatalog) -> None:
    batch, position = _first(media, "frames")
    url = urls.input_media(media.run, batch.step, batch.rank, position, "frames", 1)
    first = client.get(url)
    assert first.headers["cache-control"] == IMMUTABLE
    assert client.get(url, headers={"If-None-Match": first.headers["etag"]}).status_code == 304
    other = client.get(urls.input_media(media.run, batch.step, batch.rank, position, "frames", 2))
    assert other.headers["etag"] != first.headers["etag"]


def test_bad_input_requests_say_what_exists(client: TestClient, media: MediaCatalog) -> None:
    batch, position = _first(media, "frames")
    step, rank = batch.step, batch.rank
    k = len(batch.samples[position].inputs["frame_indices"])
    cases = {
        urls.input_media(media.run, step, rank, position, "frames"): (422, f"holds {k} frames"),
        urls.input_media(media.run, step, rank, position, "frames", k): (404, f"frames 0 to {k - 1}"),
        urls.input_media(media.run, step, rank, position, "frame_indices"): (422, "not an image array"),
        urls.input_media(media.run, step, rank, position, "nope"): (404, "no model input 'nope'"),
        urls.input_media(media.run, step, rank, len(batch.samples), "frames", 0): (404, f"samples 0 to {len(batch.samples) - 1}"),
        urls.input_media(media.run, 99, rank, position, "frames", 0): (404, "step 99 is outside run mm"),
        urls.input_media("no-run", 0, 0, 0, "frames", 0): (404, "no run named 'no-run'"),
    }
    for url, (status, text) in cases.items():
        response = client.get(url)
        assert response.status_code == status, url
        assert text in soup(response).select_one(".message").get_text(), url


# -- the renderers the step/rank page calls ------------------------------------------------------
def render(kind: str, value: dict, media_url: str | None) -> BeautifulSoup:
    ctx = FieldContext(column=kind, kind=kind, record={}, kinds={}, media_url=media_url, where="run mm step 0 rank 0 sample 1")
    view = render_field(value, ctx)
    return BeautifulSoup(Templates().env.get_template(view.partial).render(view=view, urls=urls), "html.parser")


def test_model_frames_view_shows_exactly_the_sampled_frames(client: TestClient, media: MediaCatalog) -> None:
    batch, position = _first(media, "frames")
    sample = batch.samples[position]
    base = urls.input_media(media.run, batch.step, batch.rank, position, "frames")
    address = sample.address
    value = {
        "frame_indices": list(sample.inputs["frame_indices"]),
        "frame_times": list(sample.inputs["frame_times"]),
        "field": "video",
        "dataset": address.dataset,
        "version": address.version,
        "key": sample.key,
    }
    html = render("model_frames", value, base)
    items = html.select(".model-strip li")
    assert [int(li["data-frame"]) for li in items] == value["frame_indices"]
    for j, li in enumerate(items):
        index, time = value["frame_indices"][j], value["frame_times"][j]
        assert li.select_one("img")["src"] == urls.input_media(media.run, batch.step, batch.rank, position, "frames", j)
        assert li.select_one("figcaption").get_text() == f"frame {index} · {time:.3f} s"
        assert li.select_one("a")["href"] == urls.media_view(address.dataset, address.version, sample.key, "video", frame=index)
        assert read_frame_code(pixels(client.get(li.select_one("img")["src"]))) == index
    clip = html.select_one("a.clip-link")
    first = value["frame_indices"][0]
    assert clip["href"] == urls.media_view(address.dataset, address.version, sample.key, "video", frame=first)
    page = soup(client.get(clip["href"]))  # the clip's page opens on the first sampled frame
    assert read_frame_code(pixels_jpeg(client.get(page.select_one("img.frame")["src"]))) == first


def pixels_jpeg(response) -> np.ndarray:
    assert response.status_code == 200
    return np.asarray(Image.open(io.BytesIO(response.content)).convert("RGB"))


def test_model_image_view_shows_the_crop_beside_the_boxed_original(client: TestClient, media: MediaCatalog) -> None:
    batch, position = _first(media, "crop_box")
    sample = batch.samples[position]
    box = list(sample.inputs["crop_box"])
    value = {
        "field": "image",
        "crop_box": box,
        "source_size": list(sample.inputs["source_size"]),
        "size": [32, 48],
        "dataset": sample.address.dataset,
        "version": sample.address.version,
        "key": sample.key,
    }
    crop_url = urls.input_media(media.run, batch.step, batch.rank, position, "image")
    html = render("model_image", value, crop_url)
    assert html.select_one(".crop img")["src"] == crop_url
    assert html.select_one("code.crop-box").get_text() == ", ".join(map(str, box))
    boxed = html.select_one(".boxed img")["src"]
    assert boxed == urls.boxed(sample.address.dataset, sample.address.version, sample.key, "image", box, size=512)
    full = html.select_one(".boxed a")["href"]
    drawn = pixels(client.get(full))
    assert drawn.shape[:2] == (value["source_size"][1], value["source_size"][0])
    assert tuple(drawn[(box[1] + box[3]) // 2, box[0]][:3]) == (255, 32, 32)  # the box's left edge
    assert client.get(boxed).status_code == 200


def test_model_renderers_name_what_is_missing(media: MediaCatalog) -> None:
    html = render("model_frames", {"frame_indices": [1, 2]}, None)
    assert "run mm step 0 rank 0 sample 1" in html.select_one(".field-error").get_text()
    assert "needs dataset, version, key and field" in html.select_one(".field-error").get_text()
    out_of_order = render("model_frames", {"frame_indices": [5, 2], "dataset": "d", "version": "v", "key": "k", "field": "video"}, None)
    assert "not in increasing order" in out_of_order.select_one(".badge.warn").get_text()


# -- flags on the step/rank page (fetched for the whole batch at once) ------------------------------
def test_each_sample_of_the_rank_page_lists_its_own_flags_newest_first(client: TestClient, media: MediaCatalog) -> None:
    batch = batches(media)[0]

    def address(sample: Sample) -> tuple[str, str, str]:
        return sample.address.dataset, sample.address.version, sample.key

    first = address(batch.samples[0])
    second = next(address(s) for s in batch.samples if address(s) != first)
    store = client.app.state.flags  # type: ignore[attr-defined]
    for n in range(22):  # more than a form lists
        store.add(dataset=first[0], version=first[1], key=first[2], note=f"first note {n}")
    store.add(dataset=second[0], version=second[1], key=second[2], note="second note")
    store.add(dataset=second[0], version="0" * 64, key=second[2], note="another version")  # not this sample's
    expected = {first: [f"first note {n}" for n in range(21, 1, -1)], second: ["second note"]}
    page = soup(client.get(urls.rank(media.run, batch.step, batch.rank)))
    articles = page.select("article.sample")
    assert len(articles) == len(batch.samples)
    for sample, article in zip(batch.samples, articles):
        listed = [li.select_one("a").next_sibling.strip() for li in article.select("form.flag-form .flag-notes li")]
        assert listed == expected.get(address(sample), []), sample.key


def test_batches_whose_transforms_decode_media_take_a_large_decode_slot(media: MediaCatalog) -> None:
    """The inspector recomputes media-decoding batches in the decode budget's slots, so concurrent requests for model
    inputs decode at most ``decode_concurrency`` batches at once in a process."""
    import threading

    from app.decode_budget import DecodeBudget
    from app.run_cache import RunCache

    budget = DecodeBudget(limit=64 << 20, concurrency=1)
    runs = RunCache(budget=budget)
    run = runs.run(media.catalog, media.run)
    assert run.plan.decodes_media
    done = threading.Event()

    def compute() -> None:
        runs.batch(run, 0, 0)
        done.set()

    with budget._slots:  # the only slot is taken, as by another request's decode
        worker = threading.Thread(target=compute)
        worker.start()
        assert not done.wait(timeout=1.0)  # waits for the slot rather than decoding beside the other request
    worker.join(timeout=60)
    assert done.is_set() and runs.batch(run, 0, 0).samples

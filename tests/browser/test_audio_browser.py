"""Audio in real Chromium: the player loads the clip through the media endpoint, seeks with Range requests, shows its duration."""

from __future__ import annotations

from typing import Iterator

import pytest

from app import urls
from loaders import Catalog, DatasetVersion
from loaders.importers import import_huggingface
from tests.browser.conftest import open_tab, serving, until
from tests.support import peers

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, DatasetVersion]]:
    """A server over the Hugging Face test dataset (save_to_disk, imported), and its train split."""
    root = tmp_path_factory.mktemp("audio-browser")
    catalog = Catalog(str(root / "catalog"))
    version = import_huggingface(catalog, "pets", peers.hf_saved_dict(root / "saved"), key="text")["pets.train"]
    with serving(catalog.root, root / "logs", flags_path=str(root / "flags.sqlite")) as url:
        yield url, version


def test_the_player_plays_the_stored_clip_and_seeks(browser, speech: tuple[str, DatasetVersion]) -> None:
    base, version = speech
    with open_tab(browser, base) as page:
        ranges: list[str] = []
        page.on("request", lambda request: ranges.append(request.headers.get("range", "")) if "/media/" in request.url else None)
        page.goto(urls.sample("pets.train", version, "two cats"))
        audio = "document.querySelector('audio.audio-player')"
        until(page, f"{audio}.readyState >= 1")  # metadata loaded through the media endpoint
        assert abs(page.evaluate(f"{audio}.duration") - 0.25) < 0.01
        page.evaluate(f"{audio}.currentTime = 0.2")
        until(page, f"!{audio}.seeking && {audio}.readyState >= 2")
        assert page.evaluate(f"{audio}.error") is None
        assert any(r.startswith("bytes=") for r in ranges), ranges  # the browser asked for byte ranges
        assert page.locator("svg.waveform path.wave").count() == 1
        assert page.errors == []

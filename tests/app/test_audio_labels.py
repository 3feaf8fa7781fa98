"""Audio fields (waveform, player with Range requests, facts) and class labels (names beside ids, searchable), on HF-written data."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog, DatasetVersion
from loaders.importers import import_huggingface, import_parquet
from tests.app.dom import soup
from tests.support import peers
from tests.support.local_client import local_client


@pytest.fixture(scope="module")
def hf_catalog(tmp_path_factory: pytest.TempPathFactory) -> tuple[Catalog, DatasetVersion]:
    """The Hugging Face test dataset (text, ClassLabel, Image, Audio) saved with save_to_disk and imported."""
    root = tmp_path_factory.mktemp("hf")
    catalog = Catalog(str(root / "catalog"))
    versions = import_huggingface(catalog, "pets", peers.hf_saved_dict(root / "saved"), key="text")
    return catalog, versions["pets.train"]


@pytest.fixture
def client(hf_catalog: tuple[Catalog, DatasetVersion], tmp_path: Path) -> TestClient:
    catalog, _ = hf_catalog
    return local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "flags.sqlite"))), follow_redirects=False)


def test_audio_field_shows_facts_waveform_and_a_player(client: TestClient, hf_catalog: tuple[Catalog, DatasetVersion]) -> None:
    _, version = hf_catalog
    response = client.get(urls.sample("pets.train", version, "a dog"))
    assert response.status_code == 200
    field = soup(response).select_one('section.field[data-kind="audio"]')
    assert field is not None and "cannot decode" not in field.get_text()
    assert field.select_one(".audio-rate").get_text() == "8,000 Hz"
    assert field.select_one(".audio-duration").get_text() == "0.250 s"
    assert field.select_one(".audio-codec").get_text() == "pcm_s16le"
    assert field.select_one("audio.audio-player")["src"] == urls.media("pets.train", version, "a dog", "voice")
    path = field.select_one("svg.waveform path.wave")
    assert path is not None and path["d"].count("L") > 100  # one point per column, top and bottom


def test_audio_player_streams_with_range_requests(client: TestClient, hf_catalog: tuple[Catalog, DatasetVersion]) -> None:
    _, version = hf_catalog
    url = urls.media("pets.train", version, "a dog", "voice")
    stored = peers.wav(hz=440.0)
    whole = client.get(url)
    assert whole.status_code == 200 and whole.headers["content-type"] == "audio/wav" and whole.content == stored
    part = client.get(url, headers={"Range": "bytes=44-99"})
    assert part.status_code == 206 and part.content == stored[44:100]
    assert part.headers["content-range"] == f"bytes 44-99/{len(stored)}"
    assert "content-disposition" not in part.headers  # played inline, not downloaded


def test_class_label_name_beside_the_integer(client: TestClient, hf_catalog: tuple[Catalog, DatasetVersion]) -> None:
    _, version = hf_catalog
    page = soup(client.get(urls.sample("pets.train", version, "a dog")))
    label = page.select_one('section.field[data-kind="class_label"] .class-label')
    assert label.select_one(".scalar").get_text() == "1" and label.select_one(".class-name").get_text() == "dog"
    listing = soup(client.get(urls.version("pets.train", version)))
    assert "2 classes" in listing.select_one(".class-names").get_text()
    assert listing.select_one(".class-names")["title"] == "cat, dog"
    assert {"0 · cat", "1 · dog"} <= {cell.get_text() for cell in listing.select("span.cell")}


def _keys(client: TestClient, version: DatasetVersion, **query: str) -> list[str]:
    data = client.get("/api" + urls.version("pets.train", version, **query)).json()
    assert data.get("ok", True), data
    return [row["key"] for row in data["listing"]["rows"]]


def test_class_labels_filter_by_name_or_id(client: TestClient, hf_catalog: tuple[Catalog, DatasetVersion]) -> None:
    _, version = hf_catalog
    assert _keys(client, version, q="DOG", column="label") == ["a dog", "no dog"]
    assert _keys(client, version, q="0", column="label") == ["a cat", "two cats"]
    assert _keys(client, version, q="bird", column="label") == []


def test_search_without_a_column_scans_text_before_class_labels(tmp_path: Path) -> None:
    peers.hf_dataset().select_columns(["label", "text"]).to_parquet(str(tmp_path / "labels-first.parquet"))
    catalog = Catalog(str(tmp_path / "catalog"))
    version = catalog.register("first", [str(tmp_path / "labels-first.parquet")], key="text")
    assert [f.name for f in version.schema] == ["label", "text"] and version.kinds["label"] == "class_label"
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))))
    data = client.get("/api" + urls.version("first", version, q="two")).json()
    assert [row["key"] for row in data["listing"]["rows"]] == ["two cats"]


def test_pandas_categorical_is_text_and_searchable(tmp_path: Path) -> None:
    import pandas as pd

    pd.DataFrame({"id": ["a", "b", "c"], "colour": pd.Categorical(["red", "blue", "red"])}).to_parquet(tmp_path / "p.parquet")
    catalog = Catalog(str(tmp_path / "catalog"))
    version = import_parquet(catalog, "cats", tmp_path / "p.parquet", key="id")
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))))
    data = client.get("/api" + urls.version("cats", version, q="RED", column="colour")).json()
    assert [row["key"] for row in data["listing"]["rows"]] == ["a", "c"]
    page = soup(client.get(urls.sample("cats", version, "b")))
    assert page.select_one('section.field[data-kind="text"]') is not None


def test_audio_stored_by_path_beside_the_shard_plays_and_is_refused_once_rewritten(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    shards = tmp_path / "shards"
    (shards / "clips").mkdir(parents=True)
    (shards / "clips" / "a.wav").write_bytes(peers.wav())
    audio = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    pq.write_table(pa.table({"id": ["a"], "speech": pa.array([{"bytes": None, "path": "clips/a.wav"}], audio)}), shards / "p.parquet")
    catalog = Catalog(str(tmp_path / "catalog"))
    version = catalog.register("speech", [str(shards / "p.parquet")], key="id")
    assert version.kinds["speech"] == "audio"
    assert version.manifest.media_files is not None and version.manifest.media_files["files"] == 1  # hashed at registration
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))))
    field = soup(client.get(urls.sample("speech", version, "a"))).select_one('section.field[data-kind="audio"]')
    src = field.select_one("audio.audio-player")["src"]
    assert "stored by path: clips/a.wav" in field.get_text()
    played = client.get(src, headers={"Range": "bytes=0-11"})
    assert played.status_code == 206 and played.content == peers.wav()[:12] and played.headers["content-type"] == "audio/wav"
    (shards / "clips" / "a.wav").write_bytes(peers.wav(hz=880.0))  # same size, other bytes
    refused = client.get(src)
    assert refused.status_code == 500 and "clips/a.wav" in refused.text and "changed after registration" in refused.text
    assert refused.headers.get("cache-control", "").find("immutable") < 0

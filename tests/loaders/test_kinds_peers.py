"""Kind inference on files written by the peers' own libraries: every column of each gets the kind a user would expect."""

from __future__ import annotations

from pathlib import Path

import pytest

from loaders import Catalog
from loaders.importers import import_huggingface, import_parquet, import_webdataset
from tests.support import peers

HF_KINDS = {"text": "text", "label": "class_label", "picture": "image", "voice": "audio"}


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return Catalog(str(tmp_path / "catalog"))


def test_hugging_face_parquet_registered_as_is(catalog: Catalog, tmp_path: Path) -> None:
    peers.hf_dataset().to_parquet(str(tmp_path / "hf.parquet"))
    version = catalog.register("hf", [str(tmp_path / "hf.parquet")])
    assert version.kinds == HF_KINDS  # Audio is no longer taken for an image
    assert version.class_names == {"label": peers.LABEL_NAMES}


def test_hugging_face_arrow_and_video_features(catalog: Catalog, tmp_path: Path) -> None:
    import datasets

    data = peers.hf_dataset()
    clips = [{"bytes": b"\x00\x00\x00\x18ftypmp42", "path": f"clip-{i}.mp4"} for i in range(len(peers.TEXTS))]
    data.add_column("footage", clips).cast_column("footage", datasets.Video(decode=False)).save_to_disk(str(tmp_path / "saved"))
    (version,) = import_huggingface(catalog, "hf", tmp_path / "saved").values()
    assert version.kinds == {**HF_KINDS, "footage": "video"}


def test_pandas_categorical_is_text_and_a_named_index_is_kept(catalog: Catalog, tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame(
        {"colour": pd.Categorical(["red", "blue", "red"]), "n": [1, 2, 3], "tags": [["a"], [], ["b", "c"]]},
        index=pd.Index(["x", "y", "z"], name="id"),
    )
    frame.to_parquet(tmp_path / "pandas.parquet")
    registered = catalog.register("pd", [str(tmp_path / "pandas.parquet")])
    assert registered.kinds == {"colour": "text", "n": "scalar", "tags": "json", "id": "text"}
    imported = import_parquet(catalog, "pd-imported", tmp_path / "pandas.parquet", key="id")
    assert imported.kinds == registered.kinds
    assert imported.sample("y")["colour"] == "blue"


def test_polars_categorical_enum_and_token_lists(catalog: Catalog, tmp_path: Path) -> None:
    import polars as pl

    pl.DataFrame(
        {
            "colour": pl.Series(["red", "blue"], dtype=pl.Categorical),
            "size": pl.Series(["s", "m"], dtype=pl.Enum(["s", "m", "l"])),
            "input_ids": [[1, 2], [3]],
            "loss_mask": [[0, 1], [1]],
            "image": [peers.png(1), peers.png(2)],
        }
    ).write_parquet(tmp_path / "polars.parquet")
    version = catalog.register("pl", [str(tmp_path / "polars.parquet")])
    assert version.kinds == {"colour": "text", "size": "text", "input_ids": "tokens", "loss_mask": "mask", "image": "image"}


def test_duckdb_copy_to_parquet(catalog: Catalog, tmp_path: Path) -> None:
    import duckdb

    out = tmp_path / "duck.parquet"
    duckdb.sql(
        "copy (select 'hi' as text, [1, 2] as input_ids, {'a': 1} as meta, 3.5 as score, "
        f"[{{'role': 'user', 'content': 'hi'}}] as messages) to '{out}' (format parquet)"
    )
    version = catalog.register("duck", [str(out)])
    assert version.kinds == {"text": "text", "input_ids": "tokens", "meta": "json", "score": "scalar", "messages": "chat"}


def test_webdataset_tar_writer(catalog: Catalog, tmp_path: Path) -> None:
    import webdataset as wds

    with wds.TarWriter(str(tmp_path / "shard-000.tar")) as sink:
        for i, text in enumerate(peers.TEXTS):
            sink.write({"__key__": f"s{i}", "txt": text, "jpg": peers.jpeg(i), "wav": peers.wav(), "cls": i % 2, "json": {"i": i}})
    version = import_webdataset(catalog, "wds", tmp_path / "shard-000.tar")
    assert version.kinds == {"id": "text", "cls": "scalar", "jpg": "image", "json": "json", "txt": "text", "wav": "audio"}
    assert version.sample("s1")["wav"] == {"bytes": peers.wav(), "path": "s1.wav"}
    overridden = import_webdataset(catalog, "wds-as-labels", tmp_path / "shard-000.tar", kinds={"cls": "class_label", "jpg": "binary"})
    assert (overridden.kinds["cls"], overridden.kinds["jpg"]) == ("class_label", "binary")


def test_mds_writer(catalog: Catalog, tmp_path: Path) -> None:
    from loaders.importers import import_mds

    version = import_mds(catalog, "mds", peers.mds_folder(tmp_path / "mds"))
    assert version.kinds == {"mask": "image", "meta": "json", "n": "scalar", "photo": "image", "score": "scalar", "text": "text"}
    assert version.read(0, [1])[0]["photo"]["bytes"][:2] == b"\xff\xd8"


def test_media_kind_from_the_column_name() -> None:
    import pyarrow as pa

    from loaders.catalog.kinds import infer_kind

    media = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    assert [infer_kind(n, media) for n in ("speech", "audio_16k", "clip", "photo", "x")] == ["audio", "audio", "video", "image", "image"]
    assert [infer_kind(n, pa.binary()) for n in ("wav", "logging_blob", "payload")] == ["audio", "binary", "binary"]

"""Importers on files written by the peers' own libraries: Hugging Face save_to_disk and Hub layouts, Mosaic MDS, path media."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from loaders import Catalog, RegistrationError
from loaders.importers import import_huggingface, import_mds, import_parquet
from tests.loaders.test_importers import all_rows, catalog_state
from tests.support import peers


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return Catalog(str(tmp_path / "catalog"))


def _hf_rows(folder: Path, split: str) -> list[dict]:
    """What ``datasets`` itself reads back, undecoded (images and audio as their stored bytes)."""
    import datasets

    loaded = datasets.load_from_disk(str(folder))[split]
    return loaded.cast_column("picture", datasets.Image(decode=False)).cast_column("voice", datasets.Audio(decode=False)).to_list()


def test_save_to_disk_dataset_dict_is_one_dataset_per_split_byte_equal(catalog: Catalog, tmp_path: Path) -> None:
    folder = peers.hf_saved_dict(tmp_path / "saved")
    versions = import_huggingface(catalog, "pets", folder, tag="v1")
    assert sorted(versions) == ["pets.test", "pets.train"]
    assert catalog.datasets() == ["pets.test", "pets.train"]
    for split in ("train", "test"):
        assert all_rows(catalog, f"pets.{split}@v1") == _hf_rows(folder, split)
    version = versions["pets.train"]
    assert version.kinds == {"text": "text", "label": "class_label", "picture": "image", "voice": "audio"}
    assert version.class_names == {"label": ["cat", "dog"]}
    assert version.manifest.notes["imported_from"].endswith("train/data-00000-of-00001.arrow")


def test_a_lone_save_to_disk_dataset_keeps_its_name_and_a_split_can_be_picked(catalog: Catalog, tmp_path: Path) -> None:
    peers.hf_dataset().save_to_disk(str(tmp_path / "one"))
    assert list(import_huggingface(catalog, "one", tmp_path / "one")) == ["one"]
    assert catalog.resolve("one").rows == 4
    folder = peers.hf_saved_dict(tmp_path / "saved")
    assert list(import_huggingface(catalog, "pets", folder, splits=["test"])) == ["pets.test"]
    with pytest.raises(RegistrationError, match=r"no split 'dev'.*it holds train, test"):
        import_huggingface(catalog, "pets", folder, splits=["dev"])


def test_hub_parquet_layout_splits_by_file_name_never_merged(catalog: Catalog, tmp_path: Path) -> None:
    folder = peers.hf_hub_parquet(tmp_path / "hub")
    versions = import_huggingface(catalog, "hub", folder)
    assert {name: v.rows for name, v in versions.items()} == {"hub.test": 1, "hub.train": 4}
    assert [r["text"] for r in all_rows(catalog, "hub.train")] == peers.TEXTS
    assert versions["hub.train"].kinds["voice"] == "audio"
    before = catalog_state(catalog)
    with pytest.raises(RegistrationError, match=r"holds the splits test, train; import it with `batchscope import huggingface`"):
        import_parquet(catalog, "merged", folder)
    assert catalog_state(catalog) == before


def test_readme_configs_name_config_and_split(catalog: Catalog, tmp_path: Path) -> None:
    folder = peers.hf_configs(tmp_path / "repo")
    versions = import_huggingface(catalog, "cfg", folder)
    assert {name: v.rows for name, v in versions.items()} == {"cfg.train": 3, "cfg.test": 1, "cfg.small.train": 1}
    assert [r["text"] for r in all_rows(catalog, "cfg.test")] == [peers.TEXTS[3]]


def _path_images(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """``Dataset.to_parquet`` of an Image column built from absolute file paths: no bytes stored, only the paths."""
    media = tmp_path / "media"
    media.mkdir()
    contents = [peers.png(10 * i) for i in range(len(peers.TEXTS))]
    for i, data in enumerate(contents):
        (media / f"{i}.png").write_bytes(data)
    data = peers.hf_dataset(image_paths=[str(media / f"{i}.png") for i in range(len(contents))])
    assert data.data.column("picture")[0].as_py() == {"bytes": None, "path": str(media / "0.png")}
    (tmp_path / "paths" / "data").mkdir(parents=True)
    data.to_parquet(str(tmp_path / "paths" / "data" / "train-00000-of-00001.parquet"))
    return media, contents


def test_path_only_images_are_refused_at_import_unless_copied(catalog: Catalog, tmp_path: Path) -> None:
    media, contents = _path_images(tmp_path)
    with pytest.raises(RegistrationError, match=r"row 0 column 'picture': holds only the path .*--copy-media"):
        import_huggingface(catalog, "pics", tmp_path / "paths")
    with pytest.raises(RegistrationError, match=r"is outside the media folder .*--media-root"):
        import_huggingface(catalog, "pics", tmp_path / "paths", copy_media=True)
    assert catalog.datasets() == []
    versions = import_huggingface(catalog, "pics", tmp_path / "paths", copy_media=True, media_root=str(media))
    rows = all_rows(catalog, "pics.train")
    assert [r["picture"] for r in rows] == [{"bytes": data, "path": f"{i}.png"} for i, data in enumerate(contents)]
    assert versions["pics.train"].kinds["picture"] == "image"


def test_copy_media_refuses_a_relative_path_that_escapes(catalog: Catalog, tmp_path: Path) -> None:
    import pyarrow as pa

    (tmp_path / "secret.png").write_bytes(peers.png(1))
    (tmp_path / "export").mkdir()
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({"image": pa.array([{"bytes": None, "path": "../secret.png"}], image)})
    pq.write_table(table, tmp_path / "export" / "part-0.parquet")
    with pytest.raises(RegistrationError, match=r"part-0.parquet row 0 column 'image': '../secret.png' is outside"):
        import_parquet(catalog, "escape", tmp_path / "export", copy_media=True)


def _mds_stored(encoding: str, data: bytes) -> bytes:
    """The bytes mosaicml-streaming's MDS writer stores for an image given as ``data``."""
    from bench.peers import import_streaming

    import_streaming()
    from streaming.base.format.mds.encodings import mds_encode

    return mds_encode(encoding, Image.open(io.BytesIO(data)))


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_mds_keeps_encoded_images_and_every_value(catalog: Catalog, tmp_path: Path, compression: str | None) -> None:
    folder = peers.mds_folder(tmp_path / "mds", compression=compression)
    version = import_mds(catalog, "mds", folder, key="text")
    rows = all_rows(catalog, "mds")
    assert [r["text"] for r in rows] == peers.TEXTS
    assert [r["n"] for r in rows] == [0, 1, 2, 3]
    assert [r["score"] for r in rows] == [0.0, 0.25, 0.5, 0.75]
    assert [r["meta"] for r in rows] == ['{"i": %d, "tags": ["x"]}' % i for i in range(4)]
    assert [r["photo"]["bytes"] for r in rows] == [_mds_stored("jpeg", peers.jpeg(50 * i)) for i in range(4)]
    assert rows[0]["photo"]["bytes"][:2] == b"\xff\xd8"  # still JPEG, never decoded and re-encoded
    assert [r["mask"]["bytes"] for r in rows] == [_mds_stored("png", peers.png(30 * i, (3, 3))) for i in range(4)]
    assert version.kinds == {"mask": "image", "meta": "json", "n": "scalar", "photo": "image", "score": "scalar", "text": "text"}


def test_mds_refuses_pickle_and_a_truncated_shard(catalog: Catalog, tmp_path: Path) -> None:
    folder = peers.mds_folder(tmp_path / "mds")
    index = (folder / "index.json").read_text()
    (folder / "index.json").write_text(index.replace('"json"', '"pkl"'))
    with pytest.raises(RegistrationError, match=r"MDS encoding 'pkl' is pickled objects can run code"):
        import_mds(catalog, "mds", folder)
    (folder / "index.json").write_text(index)
    shard = max(folder.glob("shard.*.mds"), key=os.path.getsize)
    shard.write_bytes(shard.read_bytes()[:-40])
    with pytest.raises(RegistrationError, match=rf"{shard.name} sample \d: offsets .* lie outside the file"):
        import_mds(catalog, "mds", folder)
    assert catalog.datasets() == []
    shutil.rmtree(folder)


def test_arrow_ipc_files_split_by_name_and_a_mixed_split_is_refused(catalog: Catalog, tmp_path: Path) -> None:
    import pyarrow as pa

    folder = tmp_path / "ipc"
    folder.mkdir()
    for split, rows in (("train", [1, 2, 3]), ("test", [4])):
        table = pa.table({"n": rows})
        with pa.ipc.new_file(folder / f"{split}-00000-of-00001.arrow", table.schema) as sink:  # the random-access format
            sink.write_table(table)
    versions = import_huggingface(catalog, "ipc", folder)
    assert {name: [r["n"] for r in all_rows(catalog, name)] for name in versions} == {"ipc.test": [4], "ipc.train": [1, 2, 3]}
    pq.write_table(pa.table({"n": [5]}), folder / "train-00001-of-00001.parquet")
    with pytest.raises(RegistrationError, match=r"split 'train' mixes Arrow and Parquet files"):
        import_huggingface(catalog, "ipc", folder)


def test_a_broken_arrow_file_is_refused_by_name(catalog: Catalog, tmp_path: Path) -> None:
    folder = peers.hf_saved_dict(tmp_path / "saved")
    broken = folder / "test" / "data-00000-of-00001.arrow"
    broken.write_bytes(b"not arrow at all")
    with pytest.raises(RegistrationError, match=rf"{broken}: not an Arrow IPC file or stream"):
        import_huggingface(catalog, "pets", folder)
    assert catalog.datasets() == []  # every split is checked before any is imported

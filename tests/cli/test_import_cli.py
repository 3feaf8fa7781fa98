"""``batchscope import ...`` through real subprocesses of the console script."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from loaders import Catalog

BATCHSCOPE = str(Path(sys.executable).parent / "batchscope")


def batchscope(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BATCHSCOPE, *map(str, args)], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def imported(done: subprocess.CompletedProcess[str]) -> str:
    """The version id an import printed, after checking it printed nothing else on stdout."""
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"[0-9a-f]{32}\n", done.stdout), done.stdout
    return done.stdout.strip()


def rows(catalog: Catalog, ref: str) -> list[dict]:
    return [row for _, _, table in catalog.resolve(ref).iter_tables() for row in table.to_pylist()]


def test_import_jsonl_prints_the_version_id(tmp_path: Path) -> None:
    data = tmp_path / "notes.jsonl"
    data.write_text("".join(json.dumps({"id": f"n{i}", "text": f"note {i}"}) + "\n" for i in range(7)))
    root = tmp_path / "root"
    version_id = imported(
        batchscope("import", "jsonl", "notes", data, "--key", "id", "--tag", "v1", "--rows-per-shard", "4", "--root", root)
    )
    catalog = Catalog(root)
    version = catalog.resolve("notes@v1")
    assert version.id == version_id and [s.rows for s in version.shards] == [4, 3]
    assert rows(catalog, "notes@v1") == [{"id": f"n{i}", "text": f"note {i}"} for i in range(7)]


def test_import_jsonl_bad_line_is_one_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"a": 1}\n{"a": \n')
    root = tmp_path / "root"
    done = batchscope("import", "jsonl", "bad", data, "--root", root)
    assert done.returncode == 1 and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and re.search(r"error: .*bad\.jsonl:2: invalid JSON", lines[0]), done.stderr
    assert Catalog(root).datasets() == []


def test_import_parquet_images_and_webdataset(tmp_path: Path) -> None:
    root = tmp_path / "root"
    spark = tmp_path / "spark"
    spark.mkdir()
    pq.write_table(pa.table({"x": [1, 2, 3]}), spark / "part-00000-abc.snappy.parquet")
    (spark / "_SUCCESS").write_text("")
    imported(batchscope("import", "parquet", "numbers", spark, "--tag", "v1", "--root", root))

    buffer = io.BytesIO()
    Image.new("RGB", (3, 2), (9, 9, 9)).save(buffer, format="PNG")
    (tmp_path / "pets" / "cat").mkdir(parents=True)
    (tmp_path / "pets" / "cat" / "1.png").write_bytes(buffer.getvalue())
    imported(batchscope("import", "images", "pets", tmp_path / "pets", "--tag", "v1", "--root", root))

    with tarfile.open(tmp_path / "shard-0.tar", "w") as tar:
        for name, data in (("k0.txt", b"zero"), ("k0.cls", b"0"), ("k1.txt", b"one"), ("k1.cls", b"1")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    imported(batchscope("import", "webdataset", "wds", tmp_path / "shard-0.tar", "--tag", "v1", "--root", root))

    catalog = Catalog(root)
    assert catalog.datasets() == ["numbers", "pets", "wds"]
    assert rows(catalog, "numbers@v1") == [{"x": 1}, {"x": 2}, {"x": 3}]
    image = {"bytes": buffer.getvalue(), "path": "cat/1.png"}
    assert rows(catalog, "pets@v1") == [{"id": "cat/1.png", "image": image, "label": "cat"}]
    assert rows(catalog, "wds@v1") == [{"id": "k0", "cls": 0, "txt": "zero"}, {"id": "k1", "cls": 1, "txt": "one"}]


def test_import_unreadable_image_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "pets" / "dog").mkdir(parents=True)
    (tmp_path / "pets" / "dog" / "x.jpg").write_bytes(b"\xff\xd8 truncated")
    done = batchscope("import", "images", "pets", tmp_path / "pets", "--root", tmp_path / "root")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert re.search(r"error: .*dog/x\.jpg: not a readable image", done.stderr), done.stderr
    assert Catalog(tmp_path / "root").datasets() == []


def test_import_huggingface_prints_one_line_per_split_and_copies_media(tmp_path: Path) -> None:
    from tests.support import peers

    folder = peers.hf_saved_dict(tmp_path / "saved")
    root = tmp_path / "root"
    done = batchscope("import", "huggingface", "pets", folder, "--tag", "v1", "--root", root)
    assert done.returncode == 0, done.stderr
    catalog = Catalog(root)
    assert done.stdout == "".join(f"pets.{s} {catalog.resolve(f'pets.{s}@v1').id}\n" for s in ("train", "test"))
    media = tmp_path / "media"
    media.mkdir()
    (media / "a.png").write_bytes(peers.png(7))
    (tmp_path / "hub" / "data").mkdir(parents=True)
    peers.hf_dataset(image_paths=[str(media / "a.png")] * 4).to_parquet(str(tmp_path / "hub" / "data" / "train-00000-of-00001.parquet"))
    refused = batchscope("import", "huggingface", "pics", tmp_path / "hub", "--root", root)
    assert refused.returncode == 1 and "holds only the path" in refused.stderr and "--copy-media" in refused.stderr
    copied = batchscope("import", "huggingface", "pics", tmp_path / "hub", "--copy-media", "--media-root", media, "--root", root)
    assert copied.returncode == 0, copied.stderr
    assert [r["picture"] for r in rows(catalog, "pics.train")] == [{"bytes": peers.png(7), "path": "a.png"}] * 4


def test_import_mds_prints_the_version_id(tmp_path: Path) -> None:
    from tests.support import peers

    folder = peers.mds_folder(tmp_path / "mds")
    root = tmp_path / "root"
    version_id = imported(batchscope("import", "mds", "shots", folder, "--key", "text", "--root", root))
    assert Catalog(root).resolve("shots").id == version_id
    assert [r["text"] for r in rows(Catalog(root), "shots")] == peers.TEXTS

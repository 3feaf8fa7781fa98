"""Importers: JSONL, foreign Parquet, image folders and WebDataset tars round-trip through the catalog."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from loaders import Catalog, RegistrationError
from loaders.importers import import_images, import_jsonl, import_parquet, import_webdataset
from loaders.importers.writer import MAX_ROW_GROUP_ROWS


def all_rows(catalog: Catalog, ref: str) -> list[dict]:
    """Every record of a version, read back through ``version.read`` shard by shard."""
    version = catalog.resolve(ref)
    rows = []
    for shard, info in enumerate(version.shards):
        rows += version.read(shard, list(range(info.rows)))
    return rows


def catalog_state(catalog: Catalog) -> tuple[list[str], list[str]]:
    """What a failed import must not change: the datasets and the files under ``data/``."""
    data = Path(catalog.path("data"))
    files = sorted(str(p.relative_to(data)) for p in data.rglob("*")) if data.exists() else []
    return catalog.datasets(), files


def png(size: tuple[int, int] = (4, 3), color: tuple[int, int, int] = (200, 10, 10), fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return Catalog(tmp_path / "root")


# -- JSONL ---------------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[object], opener=open) -> Path:
    with opener(path, "wt", encoding="utf-8") as out:
        for row in rows:
            out.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def write_zst(path: Path, rows: list[dict]) -> Path:
    with pa.output_stream(str(path), compression="zstd") as out:
        out.write("".join(json.dumps(r) + "\n" for r in rows).encode())
    return path


def test_jsonl_round_trip_across_compressions_and_files(catalog: Catalog, tmp_path: Path) -> None:
    plain = [
        {"id": "a", "text": "first", "score": 1, "meta": {"lang": "en"}},
        {"id": "b", "text": "second", "score": 2.5, "tags": ["x", "y"]},
        {"id": "c", "text": None, "score": 3, "meta": {"lang": "fr", "words": 4}},
    ]
    gz = [{"id": "d", "text": "fourth", "score": -1}, {"id": "e", "text": "fifth", "tags": []}]
    zst = [{"id": "f", "text": "sixth", "score": 0}, {"id": "g", "text": "seventh", "score": 7}]
    bz = [{"id": "h", "text": "eighth"}]
    files = [
        write_jsonl(tmp_path / "a.jsonl", plain),
        write_jsonl(tmp_path / "b.jsonl.gz", gz, opener=gzip.open),
        write_zst(tmp_path / "c.jsonl.zst", zst),
        write_jsonl(tmp_path / "d.jsonl.bz2", bz, opener=bz2.open),
    ]
    version = import_jsonl(catalog, "notes", files, key="id", tag="v1", rows_per_shard=3, row_group_size=2)
    assert version.id == catalog.resolve("notes@v1").id
    assert [s.rows for s in version.shards] == [3, 3, 2]
    assert [s.row_groups for s in version.shards] == [(2, 1), (2, 1), (2,)]
    assert version.schema.names == ["id", "text", "score", "meta", "tags"]
    assert version.schema.field("score").type == pa.float64()
    expected = []
    for row in plain + gz + zst + bz:
        meta = row.get("meta")
        expected.append(
            {
                "id": row["id"],
                "text": row.get("text"),
                "score": None if row.get("score") is None else float(row["score"]),
                "meta": None if meta is None else {"lang": meta["lang"], "words": meta.get("words")},
                "tags": row.get("tags"),
            }
        )
    assert all_rows(catalog, "notes@v1") == expected
    assert catalog.resolve("notes@v1").sample("c")["meta"] == {"lang": "fr", "words": 4}


def test_jsonl_keys_seen_only_in_later_lines_are_kept(catalog: Catalog, tmp_path: Path) -> None:
    rows = [{"a": 1}] * 3 + [{"a": 2, "late": "here"}]
    import_jsonl(catalog, "late", write_jsonl(tmp_path / "x.jsonl", rows), tag="v1")
    assert [r["late"] for r in all_rows(catalog, "late@v1")] == [None, None, None, "here"]


def test_jsonl_bad_line_names_file_and_line_and_changes_nothing(catalog: Catalog, tmp_path: Path) -> None:
    import_jsonl(catalog, "ok", write_jsonl(tmp_path / "ok.jsonl", [{"a": 1}]), tag="v1")
    before = catalog_state(catalog)
    bad = write_jsonl(tmp_path / "bad.jsonl", ['{"a": 1}', "", '{"a": 2}', '{"a": 3,}'])
    with pytest.raises(RegistrationError, match=r"bad\.jsonl:4: invalid JSON"):
        import_jsonl(catalog, "bad", bad)
    with pytest.raises(RegistrationError, match=r"bad\.jsonl:4: invalid JSON"):
        import_jsonl(catalog, "ok", bad)
    assert catalog_state(catalog) == before


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"a": 1}', "[1, 2]"], r"x\.jsonl:2: expected a JSON object, got list"),
        (['{"a": 1}', '{"a": 2}', '{"a": "three"}'], r"x\.jsonl:3: column 'a' holds string here but int64 in earlier lines"),
        (['{"a": [1, "x"]}'], r"x\.jsonl:1: cannot be stored as Arrow columns"),
        (['{"a": {}}'], r"column 'a' .* always an empty object"),
    ],
)
def test_jsonl_inconsistent_values_are_named(catalog: Catalog, tmp_path: Path, lines: list[str], message: str) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", lines)
    with pytest.raises(RegistrationError, match=message):
        import_jsonl(catalog, "x", path)
    assert catalog_state(catalog) == ([], [])


def test_jsonl_mixed_column_can_be_imported_as_json_text(catalog: Catalog, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"a": 1}, {"a": "three"}, {"a": {"b": [1]}}, {"a": None}])
    version = import_jsonl(catalog, "x", path, json_columns=["a"], tag="v1")
    assert version.kinds["a"] == "json"
    assert [r["a"] for r in all_rows(catalog, "x@v1")] == ["1", '"three"', '{"b": [1]}', None]


def test_jsonl_empty_input_and_duplicate_keys_are_errors(catalog: Catalog, tmp_path: Path) -> None:
    with pytest.raises(RegistrationError, match="no JSON records found"):
        import_jsonl(catalog, "x", write_jsonl(tmp_path / "empty.jsonl", ["", "  "]))
    dup = write_jsonl(tmp_path / "dup.jsonl", [{"id": "a"}, {"id": "b"}, {"id": "a"}])
    with pytest.raises(RegistrationError, match=r"dup\.jsonl:3: duplicate key 'a' in column 'id' \(first at .*dup\.jsonl:1\)"):
        import_jsonl(catalog, "x", dup, key="id")
    with pytest.raises(RegistrationError, match="key column 'nope' is not among the imported columns"):
        import_jsonl(catalog, "x", dup, key="nope")
    with pytest.raises(RegistrationError, match="no such file or directory"):
        import_jsonl(catalog, "x", tmp_path / "missing.jsonl")
    assert catalog_state(catalog) == ([], [])


def test_reimporting_the_same_input_returns_the_same_version(catalog: Catalog, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"id": i, "v": i * i} for i in range(10)])
    first = import_jsonl(catalog, "x", path, key="id", row_group_size=4)
    files = catalog_state(catalog)[1]
    assert import_jsonl(catalog, "x", path, key="id", row_group_size=4).id == first.id
    assert catalog_state(catalog)[1] == files
    assert [v.id for v in catalog.versions("x")] == [first.id]


def test_default_row_groups_hold_fewer_rows_when_rows_are_large(catalog: Catalog, tmp_path: Path) -> None:
    small = write_jsonl(tmp_path / "small.jsonl", [{"i": i} for i in range(2500)])
    big = write_jsonl(tmp_path / "big.jsonl", [{"i": i, "text": "x" * 100_000} for i in range(60)])
    assert import_jsonl(catalog, "small", small).shards[0].row_groups == (MAX_ROW_GROUP_ROWS, MAX_ROW_GROUP_ROWS, 500)
    groups = import_jsonl(catalog, "big", big).shards[0].row_groups
    assert sum(groups) == 60 and 10 <= groups[0] <= 30


def test_progress_reaches_its_total(catalog: Catalog, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"i": i} for i in range(600)])
    seen: list[tuple[int, int | None]] = []
    import_jsonl(catalog, "x", path, progress=lambda done, total: seen.append((done, total)))
    done = [d for d, _ in seen]
    assert done == sorted(done) and seen[-1] == (2 * path.stat().st_size, 2 * path.stat().st_size)


records = st.lists(
    st.fixed_dictionaries(
        {"text": st.text(max_size=20), "n": st.integers(-(2**62), 2**62)},
        optional={
            "x": st.none() | st.floats(allow_nan=False, allow_infinity=False),
            "tags": st.lists(st.text(max_size=5), max_size=3),
        },
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=records)
def test_jsonl_round_trips_any_records(tmp_path: Path, rows: list[dict]) -> None:
    directory = tmp_path / os.urandom(6).hex()
    directory.mkdir()
    catalog = Catalog(directory / "root")
    version = import_jsonl(catalog, "h", write_jsonl(directory / "h.jsonl", rows), rows_per_shard=5, row_group_size=2)
    columns = version.schema.names
    assert all_rows(catalog, f"h@{version.id}") == [{c: r.get(c) for c in columns} for r in rows]


# -- Parquet from other tools --------------------------------------------------------------------


def test_parquet_from_hugging_face_keeps_feature_metadata(catalog: Catalog, tmp_path: Path) -> None:
    features = {
        "picture": {"_type": "Image"},
        "media": {"_type": "Video"},
        "label": {"dtype": "int64", "_type": "Value"},
    }
    hf = json.dumps({"info": {"features": features}})
    media = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table(
        {
            "picture": pa.array([{"bytes": png(), "path": f"{i}.png"} for i in range(5)], media),
            "media": pa.array([{"bytes": b"\x00\x00\x00\x18ftypmp42", "path": None}] * 5, media),
            "label": pa.array(range(5), pa.int64()),
        }
    ).replace_schema_metadata({"huggingface": hf})
    folder = tmp_path / "hf"
    folder.mkdir()
    pq.write_table(table.slice(0, 3), folder / "train-00000-of-00002.parquet")
    pq.write_table(table.slice(3), folder / "train-00001-of-00002.parquet")
    version = import_parquet(catalog, "hf", folder, tag="v1", row_group_size=2)
    assert version.schema.metadata[b"huggingface"] == hf.encode()
    assert version.kinds == {"picture": "image", "media": "video", "label": "scalar"}
    assert all_rows(catalog, "hf@v1") == table.to_pylist()
    assert version.shards[0].row_groups == (2, 2, 1)


def test_parquet_from_pandas_drops_the_index(catalog: Catalog, tmp_path: Path) -> None:
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "columns": [{"name": "text", "field_name": "text", "pandas_type": "unicode"}],
        "pandas_version": "2.2.0",
    }
    table = pa.table({"text": ["a", "b", "c"], "__index_level_0__": [10, 11, 12]}).replace_schema_metadata(
        {"pandas": json.dumps(pandas_meta)}
    )
    path = tmp_path / "frame.parquet"
    pq.write_table(table, path)
    version = import_parquet(catalog, "frame", path, tag="v1")
    assert version.schema.names == ["text"]
    assert b"pandas" not in (version.schema.metadata or {})
    assert all_rows(catalog, "frame@v1") == [{"text": "a"}, {"text": "b"}, {"text": "c"}]


def test_parquet_from_spark_ignores_markers_and_reads_partitions(catalog: Catalog, tmp_path: Path) -> None:
    out = tmp_path / "spark-out"
    for lang, rows in (("en", [1, 2, 3]), ("fr", [4, 5])):
        folder = out / f"lang={lang}"
        folder.mkdir(parents=True)
        name = f"part-0000{rows[0]}-2f1c-c000.snappy.parquet"
        table = pa.table({"n": pa.array(rows, pa.int32()), "w": [str(r) for r in rows]})
        pq.write_table(table, folder / name, compression="snappy")
        (folder / f".{name}.crc").write_bytes(b"crc")
    (out / "_SUCCESS").write_bytes(b"")
    (out / "._SUCCESS.crc").write_bytes(b"crc")
    version = import_parquet(catalog, "spark", out, tag="v1", key="n")
    assert version.schema.names == ["n", "w", "lang"]
    assert all_rows(catalog, "spark@v1") == [
        {"n": n, "w": str(n), "lang": lang} for lang, ns in (("en", [1, 2, 3]), ("fr", [4, 5])) for n in ns
    ]
    assert catalog.resolve("spark@v1").sample("5")["lang"] == "fr"


def test_parquet_widens_compatible_types_and_names_incompatible_files(catalog: Catalog, tmp_path: Path) -> None:
    pq.write_table(pa.table({"a": pa.array([1], pa.int32())}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"a": pa.array([2], pa.int64()), "b": ["x"]}), tmp_path / "2.parquet")
    version = import_parquet(catalog, "w", [tmp_path / "1.parquet", tmp_path / "2.parquet"], tag="v1")
    assert version.schema.field("a").type == pa.int64()
    assert all_rows(catalog, "w@v1") == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]
    pq.write_table(pa.table({"a": ["text"]}), tmp_path / "3.parquet")
    before = catalog_state(catalog)
    with pytest.raises(RegistrationError, match=r"3\.parquet: column 'a' is string but int32 in .*1\.parquet"):
        import_parquet(catalog, "w", [tmp_path / "1.parquet", tmp_path / "3.parquet"])
    (tmp_path / "fake.parquet").write_text("not parquet")
    with pytest.raises(RegistrationError, match=r"fake\.parquet: not a readable Parquet file"):
        import_parquet(catalog, "w", tmp_path / "fake.parquet")
    pq.write_table(pa.table({"a": pa.array([], pa.int64())}), tmp_path / "empty.parquet")
    with pytest.raises(RegistrationError, match=r"no rows found in .*empty\.parquet"):
        import_parquet(catalog, "w", tmp_path / "empty.parquet")
    (tmp_path / "nothing").mkdir()
    with pytest.raises(RegistrationError, match="directory holds no Parquet files"):
        import_parquet(catalog, "w", tmp_path / "nothing")
    assert catalog_state(catalog) == before


# -- image folders -------------------------------------------------------------------------------


def image_folder(root: Path) -> dict[str, bytes]:
    files = {
        "cat/1.png": png(color=(1, 2, 3)),
        "cat/2.jpg": png((8, 6), fmt="JPEG"),
        "dog/a.webp": png((5, 5), fmt="WEBP"),
        "dog/puppies/b.png": png((2, 2)),
        "top.png": png((3, 3)),
    }
    for relative, data in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
    (root / "cat" / "notes.txt").write_text("not an image")
    (root / ".DS_Store").write_bytes(b"\0")
    return files


def test_image_folder_round_trip(catalog: Catalog, tmp_path: Path) -> None:
    files = image_folder(tmp_path / "pets")
    version = import_images(catalog, "pets", tmp_path / "pets", tag="v1", row_group_size=2)
    assert version.kinds == {"id": "text", "image": "image", "label": "text"}
    labels = {"cat/1.png": "cat", "cat/2.jpg": "cat", "dog/a.webp": "dog", "dog/puppies/b.png": "dog", "top.png": None}
    assert all_rows(catalog, "pets@v1") == [
        {"id": rel, "image": {"bytes": files[rel], "path": rel}, "label": labels[rel]} for rel in sorted(files)
    ]
    assert version.shards[0].row_groups == (2, 2, 1)


def test_unreadable_image_is_named_and_changes_nothing(catalog: Catalog, tmp_path: Path) -> None:
    image_folder(tmp_path / "pets")
    (tmp_path / "pets" / "dog" / "broken.jpg").write_bytes(png(fmt="JPEG")[:40])
    with pytest.raises(RegistrationError, match=r"dog/broken\.jpg: not a readable image"):
        import_images(catalog, "pets", tmp_path / "pets")
    (tmp_path / "empty" / "cat").mkdir(parents=True)
    with pytest.raises(RegistrationError, match="no image files found"):
        import_images(catalog, "pets", tmp_path / "empty")
    assert catalog_state(catalog) == ([], [])


def test_media_rows_get_small_row_groups_by_default(catalog: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "big"
    (root / "noise").mkdir(parents=True)
    for i in range(12):
        buffer = io.BytesIO()
        Image.frombytes("L", (700, 700), os.urandom(700 * 700)).save(buffer, format="PNG")
        (root / "noise" / f"{i:02d}.png").write_bytes(buffer.getvalue())
    groups = import_images(catalog, "big", root).shards[0].row_groups
    assert sum(groups) == 12 and max(groups) <= 5


# -- WebDataset ----------------------------------------------------------------------------------


def write_tar(path: Path, members: list[tuple[str, bytes]], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_webdataset_round_trip(catalog: Catalog, tmp_path: Path) -> None:
    image = png()
    video = b"\x1aE\xdf\xa3fake-webm"
    shard0 = write_tar(
        tmp_path / "shard-000000.tar",
        [
            ("s/000.jpg", image), ("s/000.txt", "a cat".encode()), ("s/000.cls", b"3"), ("s/000.json", b'{"w": 4}'),
            ("s/001.jpg", image), ("s/001.txt", "a dog".encode()), ("s/001.cls", b" 7\n"), ("s/001.json", b"[]"),
        ],
    )  # fmt: skip
    shard1 = write_tar(
        tmp_path / "shard-000001.tar.gz",
        [("s/002.webm", video), ("s/002.seg.json", b"{}"), ("s/002.cls", b"1"), ("s/003.txt", "only text".encode())],
        mode="w:gz",
    )
    version = import_webdataset(catalog, "wds", [shard0, shard1], tag="v1", row_group_size=3)
    assert version.schema.names == ["id", "cls", "jpg", "json", "seg_json", "txt", "webm"]
    assert version.kinds == {
        "id": "text", "cls": "scalar", "jpg": "image", "json": "json", "seg_json": "json", "txt": "text", "webm": "video",
    }  # fmt: skip
    empty = {name: None for name in version.schema.names}
    assert all_rows(catalog, "wds@v1") == [
        {**empty, "id": "s/000", "jpg": {"bytes": image, "path": "s/000.jpg"}, "txt": "a cat", "cls": 3, "json": '{"w": 4}'},
        {**empty, "id": "s/001", "jpg": {"bytes": image, "path": "s/001.jpg"}, "txt": "a dog", "cls": 7, "json": "[]"},
        {**empty, "id": "s/002", "webm": {"bytes": video, "path": "s/002.webm"}, "seg_json": "{}", "cls": 1},
        {**empty, "id": "s/003", "txt": "only text"},
    ]
    assert catalog.resolve("wds@v1").sample("s/002")["cls"] == 1


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("a.json", b"{nope")], r"bad\.tar: member a\.json: invalid JSON"),
        ([("a.cls", b"cat")], r"bad\.tar: member a\.cls: expected an integer class"),
        ([("a.txt", b"x"), ("b.txt", b"y"), ("a.cls", b"1")], r"bad\.tar: member a\.cls: duplicate key 'a'"),
        ([("README", b"no extension")], "no samples found"),
        ([], "no samples found"),
        ([("a.txt", b"\xff\xfe")], r"bad\.tar: member a\.txt: not UTF-8 text"),
    ],
)
def test_webdataset_bad_members_are_named(catalog: Catalog, tmp_path: Path, members: list, message: str) -> None:
    with pytest.raises(RegistrationError, match=message):
        import_webdataset(catalog, "wds", write_tar(tmp_path / "bad.tar", members))
    assert catalog_state(catalog) == ([], [])


def test_webdataset_rejects_a_file_that_is_not_a_tar(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "x.tar").write_bytes(b"plain text, not a tar archive" * 30)
    with pytest.raises(RegistrationError, match=r"x\.tar: not a readable tar archive"):
        import_webdataset(catalog, "wds", tmp_path / "x.tar")
    assert catalog_state(catalog) == ([], [])

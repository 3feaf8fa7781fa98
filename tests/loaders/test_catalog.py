"""Catalog: content-addressed version ids, tags, verified reads and bad input that leaves the catalog unchanged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders import Catalog, ChecksumMismatch, DatasetNotFound, RegistrationError, SampleNotFound, VersionNotFound
from loaders.catalog.version import _OPEN, clear_read_caches


def _write(path: Path, table: pa.Table, row_group: int = 2) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group)
    return str(path)


def _snapshot(root: str) -> dict[str, bytes]:
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name != ".lock":
                full = os.path.join(dirpath, name)
                files[os.path.relpath(full, root)] = Path(full).read_bytes()
    return files


def _forget_open_shards() -> None:
    clear_read_caches()
    _OPEN.clear()


rows = st.lists(st.tuples(st.text(max_size=8), st.integers(-5, 5)), min_size=1, max_size=12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows, change=st.integers(0, 11))
def test_same_content_same_id_any_change_new_id(tmp_path, data, change):
    table = pa.table({"text": [t for t, _ in data], "n": [n for _, n in data]})
    base = tmp_path / f"case-{abs(hash((tuple(data), change)))}"
    catalog = Catalog(base / "catalog")
    first = catalog.register("ds", [_write(base / "a.parquet", table)])
    before = _snapshot(catalog.root)
    again = catalog.register("ds", [str(base / "a.parquet")])
    assert again.id == first.id
    assert _snapshot(catalog.root) == before  # nothing new written
    # Identical bytes at another path are another manifest (the URI is part of the content).
    index = change % len(data)
    edited = table.set_column(1, "n", pa.array([n + (1 if i == index else 0) for i, (_, n) in enumerate(data)], pa.int64()))
    changed = catalog.register("ds", [_write(base / "b.parquet", edited)])
    assert changed.id != first.id
    assert changed.manifest.parent == first.id


def test_tags_move_and_resolve(tmp_path):
    catalog = Catalog(tmp_path / "c")
    v1 = catalog.register("ds", [_write(tmp_path / "1.parquet", pa.table({"x": [1, 2, 3]}))], tag="v1")
    v2 = catalog.register("ds", [_write(tmp_path / "2.parquet", pa.table({"x": [1, 2]}))], tag="v2")
    assert catalog.resolve("ds@v1").id == v1.id
    assert catalog.resolve("ds").id == v2.id  # bare name: latest
    assert catalog.resolve(f"ds@{v1.id[:8]}").id == v1.id
    catalog.tag(f"ds@{v1.id}", "prod")
    assert catalog.tags("ds")["prod"] == v1.id
    catalog.tag("ds@v2", "prod")
    assert catalog.resolve("ds@prod").id == v2.id
    assert [v.id for v in catalog.versions("ds")] == [v1.id, v2.id]
    with pytest.raises(VersionNotFound, match="tags: latest, prod, v1, v2"):
        catalog.resolve("ds@nope")
    with pytest.raises(DatasetNotFound, match="datasets: ds"):
        catalog.resolve("other@v1")


def test_random_access_and_keys(tmp_path):
    catalog = Catalog(tmp_path / "c")
    table = pa.table({"id": [f"k{i}" for i in range(11)], "text": [f"t{i}" for i in range(11)]})
    paths = [_write(tmp_path / "a.parquet", table.slice(0, 7), 3), _write(tmp_path / "b.parquet", table.slice(7), 3)]
    version = catalog.register("ds", paths, key="id")
    assert version.read(1, [2, 0]) == [{"id": "k9", "text": "t9"}, {"id": "k7", "text": "t7"}]
    assert version.sample("k5") == {"id": "k5", "text": "t5"}
    assert version.locate(8) == (1, 1)
    with pytest.raises(SampleNotFound, match="no row with key 'zz'"):
        version.sample("zz")
    keyless = catalog.register("keyless", paths)
    record = keyless.read(0, [3])[0]
    assert keyless.sample(keyless.key_of(record)) == record


def test_shard_changed_after_registration_is_detected(tmp_path):
    catalog = Catalog(tmp_path / "c")
    path = _write(tmp_path / "a.parquet", pa.table({"text": ["aaaa"] * 9}), 3)
    version = catalog.register("ds", [path], tag="v1")
    _forget_open_shards()
    data = bytearray(Path(path).read_bytes())
    start = version.shards[0].boundaries[1]
    data[start + 10] ^= 0xFF  # flip a byte inside row group 1, same size
    Path(path).write_bytes(bytes(data))
    assert version.read(0, [0]) == [{"text": "aaaa"}]  # row group 0 is intact and verified
    with pytest.raises(ChecksumMismatch, match=r"dataset ds version \w{12} shard 0 .*row group 1"):
        version.read(0, [4])
    _forget_open_shards()
    Path(path).write_bytes(bytes(data[:-20]))
    with pytest.raises(ChecksumMismatch, match="registered as"):
        catalog.resolve("ds@v1").read(0, [0])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: [_not_parquet(d)], "not a Parquet file"),
        (lambda d: [_truncated(d)], "not a Parquet file|footer|truncated"),
        (lambda d: [_write(d / "a.parquet", pa.table({"x": [1]})), _write(d / "b.parquet", pa.table({"y": ["s"]}))], "schema differs"),
        (lambda d: [str(d / "missing.parquet")], "no such file"),
    ],
)
def test_bad_registrations_name_the_file_and_change_nothing(tmp_path, make, message):
    catalog = Catalog(tmp_path / "c")
    catalog.register("ds", [_write(tmp_path / "ok.parquet", pa.table({"x": [1, 2]}))], tag="v1")
    before = _snapshot(catalog.root)
    files = make(tmp_path)
    with pytest.raises(RegistrationError, match=message) as info:
        catalog.register("ds", files, tag="v1")
    assert ".parquet" in str(info.value)
    assert _snapshot(catalog.root) == before


def _not_parquet(directory: Path) -> str:
    path = directory / "x.parquet"
    path.write_text("hello, not parquet")
    return str(path)


def _truncated(directory: Path) -> str:
    path = Path(_write(directory / "t.parquet", pa.table({"x": list(range(100))})))
    path.write_bytes(path.read_bytes()[:-30])
    return str(path)


def test_interrupted_registration_leaves_no_partial_version(tmp_path):
    big = tmp_path / "big"
    paths = []
    for i in range(6):
        table = pa.table({"blob": [os.urandom(1 << 20) for _ in range(24)]})
        paths.append(_write(big / f"part-{i}.parquet", table, 4))
    catalog = Catalog(tmp_path / "c")
    code = "import sys; from loaders import Catalog; Catalog(sys.argv[1]).register('big', sys.argv[2:], tag='v1')"
    for delay in (0.05, 0.3, 0.6):
        process = subprocess.Popen([sys.executable, "-c", code, catalog.root, *paths])
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        versions_dir = Path(catalog.root) / "datasets" / "big" / "versions"
        manifests = list(versions_dir.glob("*.json")) if versions_dir.exists() else []
        for manifest in manifests:  # anything visible is complete and loadable
            json.loads(manifest.read_text())
        if manifests:
            assert catalog.resolve("big").rows == 144
    version = catalog.register("big", paths, tag="v1")
    assert version.rows == 144


def test_kinds_inferred_and_overridden(tmp_path):
    catalog = Catalog(tmp_path / "c")
    table = pa.table(
        {
            "text": ["a"],
            "input_ids": [[1, 2]],
            "loss_mask": [[0, 1]],
            "labels": [[-100, 2]],
            "messages": [[{"role": "user", "content": "hi"}]],
            "image": [{"bytes": b"x", "path": "a.png"}],
            "video": [b"\x00"],
            "meta": [{"a": 1}],
            "score": [0.5],
        }
    )
    version = catalog.register("kinds", [_write(tmp_path / "k.parquet", table)], kinds={"meta": "text"})
    assert version.kinds == {
        "text": "text",
        "input_ids": "tokens",
        "loss_mask": "mask",
        "labels": "labels",
        "messages": "chat",
        "image": "image",
        "video": "video",
        "meta": "text",
        "score": "scalar",
    }
    with pytest.raises(RegistrationError, match="unknown field kind 'nope'"):
        catalog.register("kinds", [str(tmp_path / "k.parquet")], kinds={"text": "nope"})

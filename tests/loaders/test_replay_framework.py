"""The plug-in interface of replays and the Arrow shard format: frameworks found by name and imported lazily, a
missing one named with its extra; Arrow IPC files (stream and file formats) registered in place, checked per batch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaders import Catalog
from loaders.catalog.version import clear_read_caches
from loaders.errors import ChecksumMismatch, FrameworkMissing, RegistrationError, ReplayError
from loaders.replay import framework as registry
from loaders.replay.batch_index import stable_order
from loaders.replay.framework import FRAMEWORKS, Framework, framework, framework_class


def test_every_framework_module_imports_without_its_framework_and_implements_the_interface():
    code = (
        "import sys, loaders.replay.hf, loaders.replay.hf_trainer, loaders.replay.grain, loaders.replay.run; "
        "print(sorted({'datasets', 'torch', 'grain', 'accelerate', 'transformers'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
    for name in FRAMEWORKS:
        found = framework(name)
        assert isinstance(found, Framework) and found.name == name and found.extra in ("hf", "grain")


class _Unavailable:
    name = "imaginary"
    title = "An imaginary trainer"
    extra = "imaginary"
    requires = ("batchscope_no_such_module_anywhere",)


def test_a_framework_whose_package_is_missing_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(FRAMEWORKS, "imaginary", f"{__name__}:_Unavailable")
    with pytest.raises(
        FrameworkMissing,
        match=r"replaying An imaginary trainer needs batchscope_no_such_module_anywhere, which is not "
        r"installed: pip install 'batchscope\[imaginary\]'",
    ):
        framework("imaginary")
    with pytest.raises(ReplayError, match=r"no replay for framework 'nope'; known: .*hf"):
        framework_class("nope")
    assert registry.extra_of("hf-trainer") == "hf"


def _table(rows: int) -> pa.Table:
    return pa.table({"id": [f"r{i}" for i in range(rows)], "tokens": [[i, i + 1] for i in range(rows)]})


@pytest.mark.parametrize("ipc", ["stream", "file"])
def test_arrow_ipc_files_are_a_version_read_in_place_and_checked_per_batch(tmp_path, ipc):
    path = tmp_path / f"data.{ipc}.arrow"
    table = _table(10)
    with (pa.ipc.new_stream if ipc == "stream" else pa.ipc.new_file)(str(path), table.schema) as writer:
        writer.write_table(table, max_chunksize=4)
    catalog = Catalog(tmp_path / "catalog")
    version = catalog.register("ipc", [str(path)], key="id", shard_format="arrow-stream")
    assert version.shards[0].row_groups == (4, 4, 2) and version.kinds["tokens"] == "tokens"
    assert [version.record(i)["id"] for i in range(10)] == [f"r{i}" for i in range(10)] and version.find("r7") == (0, 7)
    assert catalog.register("ipc", [str(path)], key="id", shard_format="arrow-stream").id == version.id
    data = bytearray(path.read_bytes())
    data[version.shards[0].boundaries[1] + 120] ^= 0xFF  # inside the second record batch's body
    path.write_bytes(bytes(data))
    clear_read_caches()  # what this process decoded before was checked then; a fresh read checks again
    fresh = Catalog(catalog.root).resolve("ipc@latest")
    assert fresh.record(1)["id"] == "r1"  # the first batch is untouched
    with pytest.raises(ChecksumMismatch, match=r"record batch 1 of shard .*data\.\w+\.arrow .* does not match its registered checksum"):
        fresh.record(5)


def test_a_parquet_file_is_not_an_arrow_shard_and_versions_keep_their_ids(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(_table(6), tmp_path / "data.parquet", row_group_size=3)
    catalog = Catalog(tmp_path / "catalog")
    with pytest.raises(RegistrationError, match=r"data.parquet: not a readable Arrow IPC file"):
        catalog.register("x", [str(tmp_path / "data.parquet")], shard_format="arrow-stream")
    parquet = catalog.register("x", [str(tmp_path / "data.parquet")])
    assert "shard_format" not in parquet.manifest.content() and parquet.shard_format == "parquet"
    with pytest.raises(RegistrationError, match=r"unknown shard format 'csv'; known formats: arrow-stream, parquet"):
        catalog.register("y", [str(tmp_path / "data.parquet")], shard_format="csv")


@given(st.lists(st.integers(min_value=0, max_value=40), max_size=200))
def test_the_batch_index_orders_positions_as_a_stable_sort_does(values):
    array = np.asarray(values, dtype=np.int64)
    assert stable_order(array).tolist() == np.argsort(array, kind="stable").tolist()

"""Row groups decoded ahead of use: bounded, exact, and a damaged row group still fails loudly where it is read."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import Catalog, ChecksumMismatch, ReadPlan, Source
from loaders.catalog.version import _OPEN, clear_read_caches
from loaders.storage.shards import _owned
from loaders.storage.staging import Staging


def test_speculative_stages_are_bounded_and_needed_ones_are_not():
    staging = Staging(limit=3, threads=2)
    for key in range(10):
        staging.stage(key, lambda key=key: pa.table({"k": [key]}))
        staging.take(0) and None  # taken stages leave room
        assert len([k for k in range(10) if k in staging]) <= 3
    kept = [k for k in range(10) if k in staging]
    assert kept and all(staging.take(k).result().column("k").to_pylist() == [k] for k in kept)
    staging = Staging(limit=2, threads=3)
    gate = threading.Event()
    for key in range(2):
        staging.stage(("slow", key), lambda: gate.wait(30) and pa.table({"k": [0]}))
    staging.stage(("hint", 0), lambda: pa.table({"k": [1]}))
    assert ("hint", 0) not in staging  # every stage is still running: a hint is skipped
    staging.stage(("needed", 0), lambda: pa.table({"k": [2]}), needed=True)
    assert staging.take(("needed", 0)).result().column("k").to_pylist() == [2]
    gate.set()
    assert all(staging.take(("slow", k)).result().num_rows == 1 for k in range(2))


def test_owned_copies_only_tables_that_point_into_the_source_buffer():
    source = pa.py_buffer(np.arange(16, dtype=np.int64).tobytes())
    view = pa.Array.from_buffers(pa.int64(), 8, [None, pa.py_buffer(source)[64:]])
    inside = pa.table({"x": view})
    copied = _owned(inside, source)
    assert copied.equals(inside)
    address = copied.column("x").chunk(0).buffers()[1].address
    assert not source.address <= address < source.address + source.size
    elsewhere = pa.table({"x": pa.array(range(8), pa.int64())})
    assert _owned(elsewhere, source) is elsewhere


def _dataset(tmp_path: Path) -> tuple[Catalog, str]:
    catalog = Catalog(tmp_path / "c")
    path = tmp_path / "a.parquet"
    table = pa.table({"id": [f"r{i}" for i in range(60)], "text": [f"row {i} " * 20 for i in range(60)]})
    pq.write_table(table, path, row_group_size=10, compression="none")  # plain pages: decoding may be zero-copy
    catalog.register("ds", [str(path)], key="id", tag="v1")
    return catalog, str(path)


def test_staged_reads_equal_direct_reads(tmp_path):
    catalog, _ = _dataset(tmp_path)
    version = catalog.resolve("ds@v1")
    indices = np.random.default_rng(0).permutation(60)
    clear_read_caches()
    version.prefetch_indices(indices)
    staged = version.read_indices(indices)
    clear_read_caches()
    direct = [version.record(int(i)) for i in indices]
    assert staged == direct and [r["id"] for r in staged] == [f"r{i}" for i in indices]


def test_a_damaged_row_group_fails_where_it_is_read_even_when_staged(tmp_path):
    catalog, path = _dataset(tmp_path)
    run = catalog.create_run("r", ReadPlan([Source("ds@v1")], seed=0, global_batch_size=4, steps=15, streams=2))
    version = catalog.resolve("ds@v1")
    clear_read_caches()
    _OPEN.clear()
    data = bytearray(Path(path).read_bytes())
    data[version.shards[0].boundaries[3] + 5] ^= 0xFF  # inside row group 3 (rows 30-39), same size
    Path(path).write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatch, match=r"dataset ds version \w{12} shard 0 .*row group 3"):
        with run.reader(0, 1, ledger=False) as reader:  # stages every row group ahead; must not hang or skip
            for _ in reader:
                pass
    clear_read_caches()

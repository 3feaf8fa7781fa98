"""Remote storage end to end: catalogs and shards on a real S3 API server, the same behind a
fault-injecting proxy, and shards served over HTTP by nginx with range requests."""

from __future__ import annotations

import io
import random
from concurrent.futures import wait
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import Catalog, storage
from loaders.errors import ChecksumMismatch, RegistrationError, StorageError
from tests.support.faultproxy import FaultProxy, Faults
from tests.support.nginx import NginxServer
from tests.support.s3server import S3Bucket


@pytest.fixture(autouse=True)
def _private_disk_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BATCHSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def source_table(rows: int = 9, *, salt: str = "") -> pa.Table:
    return pa.table(
        {
            "id": [f"{salt}r{i:03d}" for i in range(rows)],
            "text": [f"row {i} of {salt or 'the table'}: " + "lorem ipsum " * (i + 1) for i in range(rows)],
            "value": [i * 1.5 for i in range(rows)],
        }
    )


def parquet_bytes(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=3, compression="zstd")
    return buffer.getvalue()


def upload_shards(bucket: S3Bucket, prefix: str, tables: list[pa.Table]) -> list[str]:
    return [bucket.put(f"{prefix}/part-{i}.parquet", parquet_bytes(t)) for i, t in enumerate(tables)]


def all_rows(version) -> list[dict]:  # type: ignore[no-untyped-def]
    return [row for shard, info in enumerate(version.shards) for row in version.read(shard, range(info.rows))]


def flip_byte_in_row_group(data: bytes, boundaries: tuple[int, ...], group: int) -> bytes:
    """The same file with one byte changed inside row group ``group``'s segment (same size)."""
    middle = (boundaries[group] + boundaries[group + 1]) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]


# -- S3 ----------------------------------------------------------------------
def test_catalog_on_s3_registers_and_reads_s3_shards(s3_bucket: S3Bucket) -> None:
    tables = [source_table(salt="a"), source_table(7, salt="b")]
    uris = upload_shards(s3_bucket, "data/web", tables)
    catalog = Catalog(f"{s3_bucket.uri}/catalog")
    registered = catalog.register("web", uris, key="id", tag="v1")
    assert catalog.datasets() == ["web"]
    assert catalog.tags("web")["v1"] == registered.id
    version = catalog.resolve("web@v1")
    assert [s.uri for s in version.shards] == uris
    assert [s.row_groups for s in version.shards] == [(3, 3, 3), (3, 3, 1)]
    assert all_rows(version) == tables[0].to_pylist() + tables[1].to_pylist()
    assert version.sample("br004") == tables[1].to_pylist()[4]
    # The catalog itself lives in the bucket.
    assert storage.list_names(f"{s3_bucket.uri}/catalog/datasets/web/versions") == [f"{registered.id}.json"]


def test_local_catalog_with_s3_shards(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    table = source_table(8)
    (uri,) = upload_shards(s3_bucket, "data/local", [table])
    version = Catalog(tmp_path / "catalog").register("remote-shards", [uri], key="id")
    assert version.read(0, [7, 0, 4]) == [table.to_pylist()[i] for i in (7, 0, 4)]
    assert Catalog(tmp_path / "catalog").resolve("remote-shards").id == version.id


def test_shard_changed_in_place_on_s3_is_a_checksum_mismatch(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    table = source_table(9, salt="changed")
    data = parquet_bytes(table)
    uri = s3_bucket.put("data/changed/part-0.parquet", data)
    version = Catalog(tmp_path / "catalog").register("changed", [uri], key="id")
    assert version.read(0, [0]) == [table.to_pylist()[0]]  # row group 0 read and verified
    s3_bucket.put("data/changed/part-0.parquet", flip_byte_in_row_group(data, version.shards[0].boundaries, 1))
    with pytest.raises(ChecksumMismatch, match=r"row group 1 of shard s3://.*part-0\.parquet"):
        version.read(0, [4])


def test_shard_resized_on_s3_is_a_checksum_mismatch(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    data = parquet_bytes(source_table(6, salt="resized"))
    uri = s3_bucket.put("data/resized/part-0.parquet", data)
    version = Catalog(tmp_path / "catalog").register("resized", [uri])
    s3_bucket.put("data/resized/part-0.parquet", parquet_bytes(source_table(12, salt="resized")))
    with pytest.raises(ChecksumMismatch, match="changed after registration"):
        version.read(0, [0])


def test_replaced_object_is_never_answered_from_the_disk_cache(s3_bucket: S3Bucket) -> None:
    uri = s3_bucket.put("blob.bin", b"A" * 100)
    assert storage.read_range(uri, 10, 20) == b"A" * 20
    s3_bucket.put("blob.bin", b"B" * 120)
    assert storage.stat(uri) == storage.FileStat(True, 120)  # what the read path does when it opens a shard
    assert storage.read_range(uri, 10, 20) == b"B" * 20


def test_missing_objects(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    uri = f"{s3_bucket.uri}/nothing-here.parquet"
    assert storage.stat(uri) == storage.FileStat(False, 0)
    with pytest.raises(FileNotFoundError):
        storage.read_range(uri, 0, 4)
    with pytest.raises(RegistrationError, match="no such file"):
        Catalog(tmp_path / "catalog").register("missing", [uri])


def test_small_files_and_logs_on_s3(s3_bucket: S3Bucket) -> None:
    path = f"{s3_bucket.uri}/logs/ledger.jsonl"
    storage.append_line(path, '{"step": 0}')
    storage.append_line(path, '{"step": 1}')
    assert storage.read_bytes(path) == b'{"step": 0}\n{"step": 1}\n'
    assert storage.write_if_absent(f"{s3_bucket.uri}/logs/once.json", b"1")
    assert not storage.write_if_absent(f"{s3_bucket.uri}/logs/once.json", b"2")
    assert storage.list_names(f"{s3_bucket.uri}/logs") == ["ledger.jsonl", "once.json"]


# -- S3 behind a fault-injecting proxy -----------------------------------------
def test_reads_through_failing_and_stalling_storage_return_exact_bytes(
    s3_bucket: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = [source_table(9, salt="f0"), source_table(9, salt="f1")]
    uris = upload_shards(s3_bucket, "data/faulty", tables)
    blob = bytes(random.Random(5).randbytes(200_000))
    blob_uri = s3_bucket.put("data/faulty/blob.bin", blob)
    version = Catalog(tmp_path / "catalog").register("faulty", uris, key="id")  # registered against healthy storage

    faults = Faults(fail=0.3, truncate=0.05, stall=0.15, stall_seconds=0.2, seed=20240601)
    with FaultProxy(s3_bucket.server.endpoint, faults) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        rng = random.Random(11)
        for _ in range(30):
            offset = rng.randrange(len(blob) - 1)
            length = rng.randrange(1, min(30_000, len(blob) - offset) + 1)
            assert storage.read_range(blob_uri, offset, length, cache=False) == blob[offset : offset + length]
        assert all_rows(version) == tables[0].to_pylist() + tables[1].to_pylist()
    failed = proxy.counts["500"] + proxy.counts["503"] + proxy.counts["slowdown"]
    assert failed >= 10, proxy.counts  # the faults really happened...
    assert proxy.counts["truncate"] >= 1 and proxy.counts["stall"] >= 1, proxy.counts
    assert proxy.counts["pass"] + proxy.counts["stall"] >= 30  # ...and every read still got its bytes


def test_spent_retry_budget_names_the_uri(s3_bucket: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (uri,) = upload_shards(s3_bucket, "data/down", [source_table(6, salt="down")])
    version = Catalog(tmp_path / "catalog").register("down", [uri])
    monkeypatch.setenv("BATCHSCOPE_RETRY_ATTEMPTS", "3")
    with FaultProxy(s3_bucket.server.endpoint, Faults(fail=1.0, seed=1)) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        with pytest.raises(StorageError, match=f"{uri} failed after 3 attempts"):
            storage.read_range(uri, 0, 100, cache=False)
        assert proxy.counts["requests"] == 3
        with pytest.raises(StorageError, match=f"stat {uri} failed after 3 attempts"):
            version.read(0, [0])


def test_prefetch_warms_the_disk_cache(s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    blob = bytes(random.Random(3).randbytes(50_000))
    uri = s3_bucket.put("data/prefetch.bin", blob)
    ranges = [(offset, 4_000) for offset in range(0, 48_000, 6_000)]
    with FaultProxy(s3_bucket.server.endpoint, Faults(fail=0.0)) as counter:
        monkeypatch.setenv("AWS_ENDPOINT_URL", counter.endpoint)
        futures = storage.prefetch(uri, ranges)
        assert len(futures) == len(ranges)
        done, _ = wait(futures, timeout=60)
        assert all(f.exception() is None for f in done) and len(done) == len(ranges)
        requests_after_prefetch = counter.counts["requests"]
        assert counter.counts["method:GET"] >= len(ranges)
        for offset, length in ranges:
            assert storage.read_range(uri, offset, length) == blob[offset : offset + length]
        assert counter.counts["requests"] == requests_after_prefetch  # every read was a disk-cache hit


# -- HTTP (nginx) --------------------------------------------------------------
def test_shards_over_http_register_and_read(nginx_server: NginxServer, tmp_path: Path) -> None:
    tables = [source_table(9, salt="h0"), source_table(5, salt="h1")]
    urls = [nginx_server.put(f"http-read/part-{i}.parquet", parquet_bytes(t)) for i, t in enumerate(tables)]
    version = Catalog(tmp_path / "catalog").register("over-http", urls, key="id", tag="v1")
    assert [s.uri for s in version.shards] == urls
    assert all_rows(version) == tables[0].to_pylist() + tables[1].to_pylist()
    assert version.sample("h1r003") == tables[1].to_pylist()[3]
    assert any(p.is_file() for p in (tmp_path / "cache").rglob("*")), "remote ranges should be in the disk cache"


def test_http_shards_through_a_faulty_proxy(nginx_server: NginxServer, tmp_path: Path) -> None:
    table = source_table(12, salt="hp")
    nginx_server.put("http-faulty/part-0.parquet", parquet_bytes(table))
    with FaultProxy(nginx_server.url, Faults(fail=0.3, truncate=0.1, stall=0.1, stall_seconds=0.2, seed=99)) as proxy:
        url = f"{proxy.endpoint}/http-faulty/part-0.parquet"
        version = Catalog(tmp_path / "catalog").register("http-faulty", [url], key="id")  # registration retries too
        assert all_rows(version) == table.to_pylist()
    assert proxy.counts["500"] + proxy.counts["503"] + proxy.counts["slowdown"] >= 1, proxy.counts


def test_http_shard_changed_in_place_is_a_checksum_mismatch(nginx_server: NginxServer, tmp_path: Path) -> None:
    data = parquet_bytes(source_table(9, salt="hc"))
    url = nginx_server.put("http-changed/part-0.parquet", data)
    version = Catalog(tmp_path / "catalog").register("http-changed", [url])
    nginx_server.put("http-changed/part-0.parquet", flip_byte_in_row_group(data, version.shards[0].boundaries, 2))
    with pytest.raises(ChecksumMismatch, match="row group 2"):
        version.read(0, [8])


def test_missing_http_file(nginx_server: NginxServer, tmp_path: Path) -> None:
    url = f"{nginx_server.url}/no/such/file.parquet"
    assert storage.stat(url) == storage.FileStat(False, 0)
    with pytest.raises(RegistrationError, match="no such file"):
        Catalog(tmp_path / "catalog").register("missing-http", [url])

"""The disk cache of remote byte ranges: round trips, LRU budget, damage, several processes, full disks."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders import storage
from loaders.storage import disk_cache
from loaders.storage.disk_cache import DiskCache, parse_bytes
from tests.support.s3server import S3Bucket, env_for_subprocess


def content(uri: str, offset: int, length: int) -> bytes:
    """Deterministic bytes standing in for a remote range."""
    out = bytearray()
    counter = 0
    while len(out) < length:
        out += hashlib.sha256(f"{uri}|{offset}|{counter}".encode()).digest()
        counter += 1
    return bytes(out[:length])


def entry_size(length: int, validator: str = "v") -> int:
    return 18 + len(validator) + length


def test_round_trip_and_validator(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, budget=1 << 20)
    data = content("s3://b/x", 0, 100)
    assert cache.get("s3://b/x", 0, 100, validator="100:1") is None
    assert cache.put("s3://b/x", 0, 100, data, validator="100:1")
    assert cache.get("s3://b/x", 0, 100, validator="100:1") == data
    assert cache.get("s3://b/x", 0, 100, validator="100:2") is None  # the file was replaced upstream
    assert cache.get("s3://b/x", 1, 100, validator="100:1") is None
    newer = content("s3://b/x", 0, 100)[::-1]
    assert cache.put("s3://b/x", 0, 100, newer, validator="100:2")
    assert cache.get("s3://b/x", 0, 100, validator="100:2") == newer
    assert cache.get("s3://b/x", 0, 100, validator="100:1") is None


def test_put_refuses_a_wrong_length(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="got 3 bytes"):
        DiskCache(tmp_path, budget=1000).put("s3://b/x", 0, 4, b"abc", validator="v")


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_damaged_entries_are_dropped_not_served(tmp_path: Path, damage: str) -> None:
    cache = DiskCache(tmp_path, budget=1 << 20)
    data = content("s3://b/x", 0, 500)
    cache.put("s3://b/x", 0, 500, data, validator="v")
    path = cache.path("s3://b/x", 0, 500)
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[-100] ^= 0xFF
    elif damage == "truncate":
        raw = raw[:-1]
    else:
        raw = bytearray()
    path.write_bytes(bytes(raw))
    assert cache.get("s3://b/x", 0, 500, validator="v") is None
    assert not path.exists()
    assert cache.get_or_fetch("s3://b/x", 0, 500, validator="v", fetch=lambda: data) == data
    assert cache.get("s3://b/x", 0, 500, validator="v") == data


def test_evict(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, budget=1 << 20)
    cache.put("s3://b/x", 8, 4, b"abcd", validator="v")
    assert cache.evict("s3://b/x", 8, 4)
    assert cache.get("s3://b/x", 8, 4, validator="v") is None
    assert not cache.evict("s3://b/x", 8, 4)


def test_least_recently_used_entries_go_first(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, budget=3 * entry_size(300))
    for name in "abc":
        cache.put(f"s3://b/{name}", 0, 300, content(name, 0, 300), validator="v")
    assert cache.usage() == 3 * entry_size(300)
    assert cache.get("s3://b/a", 0, 300, validator="v") is not None  # a is now the most recent
    cache.put("s3://b/d", 0, 300, content("d", 0, 300), validator="v")  # over budget: trim to 90%
    present = {name for name in "abcd" if cache.get(f"s3://b/{name}", 0, 300, validator="v") is not None}
    assert present == {"a", "d"}
    assert cache.usage() <= cache.budget


def test_a_range_larger_than_the_budget_is_served_not_stored(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, budget=100)
    data = content("big", 0, 1000)
    assert cache.get_or_fetch("s3://b/big", 0, 1000, validator="v", fetch=lambda: data) == data
    assert cache.usage() == 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=st.lists(st.tuples(st.integers(0, 15), st.integers(1, 400), st.booleans()), min_size=1, max_size=40))
def test_usage_never_exceeds_the_budget(tmp_path_factory: pytest.TempPathFactory, operations: list[tuple[int, int, bool]]) -> None:
    cache = DiskCache(tmp_path_factory.mktemp("lru"), budget=2000)
    for key, length, read in operations:
        uri = f"s3://b/{key}"
        if read:
            found = cache.get(uri, 0, length, validator="v")
            assert found is None or found == content(uri, 0, length)
        else:
            cache.put(uri, 0, length, content(uri, 0, length), validator="v")
        assert cache.usage() <= cache.budget


def test_stale_temporary_files_are_removed_by_trim(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, budget=1 << 20)
    cache.put("s3://b/x", 0, 10, content("x", 0, 10), validator="v")
    folder = cache.path("s3://b/x", 0, 10).parent
    stale, fresh = folder / ".tmp-1-stale", folder / ".tmp-2-fresh"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    cache.trim()
    assert not stale.exists()
    assert fresh.exists()  # may belong to a live writer


def test_one_fetch_per_range_for_concurrent_threads(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, budget=1 << 20)
    release = threading.Event()
    fetched: list[int] = []

    def fetch() -> bytes:
        fetched.append(1)
        release.wait(10)
        return content("s", 0, 64)

    results: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get_or_fetch("s3://b/s", 0, 64, validator="v", fetch=fetch))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(10)
    assert results == [content("s", 0, 64)] * 8
    assert fetched == [1]


def test_unwritable_directory_serves_uncached_and_warns_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"a file where the cache directory should be")
    cache = DiskCache(blocker, budget=1 << 20)
    with caplog.at_level(logging.WARNING, logger="batchscope.storage"):
        for offset in range(0, 500, 100):
            data = content("u", offset, 100)
            assert cache.get_or_fetch("s3://b/u", offset, 100, validator="v", fetch=lambda d=data: d) == data
    warnings = [r for r in caplog.records if "cannot be written" in r.getMessage()]
    assert len(warnings) == 1
    assert cache.write_failures == 1  # later writes are paused, not attempted
    assert not cache.writable


def test_parse_bytes() -> None:
    assert parse_bytes("1048576") == 1 << 20
    assert parse_bytes("512M") == 512 << 20
    assert parse_bytes("10GiB") == 10 << 30
    assert parse_bytes("1.5k") == 1536
    assert parse_bytes("0") == 0
    with pytest.raises(ValueError, match="byte count"):
        parse_bytes("lots")


def test_default_cache_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHSCOPE_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("BATCHSCOPE_CACHE_BYTES", "1M")
    cache = disk_cache.default_cache()
    assert cache is not None and (cache.directory, cache.budget) == (tmp_path / "c", 1 << 20)
    monkeypatch.setenv("BATCHSCOPE_CACHE_BYTES", "0")
    assert disk_cache.default_cache() is None


def _hammer(directory: str, budget: int, seed: int, rounds: int) -> tuple[int, int]:
    """Worker process: read random ranges through a shared cache directory; count wrong answers and hits."""
    import random

    cache = DiskCache(directory, budget=budget)
    rng = random.Random(seed)
    wrong = 0
    for _ in range(rounds):
        i = rng.randrange(40)
        uri, offset, length = f"s3://bucket/file-{i % 5}", i * 1000, 700 + i * 37
        expected = content(uri, offset, length)
        got = cache.get_or_fetch(uri, offset, length, validator="v1", fetch=lambda: expected)
        wrong += got != expected
    return wrong, cache.hits


def test_several_processes_share_one_cache_without_torn_files(tmp_path: Path) -> None:
    budget = 12_000  # about a third of the ranges: processes keep evicting each other's entries
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        results = pool.starmap(_hammer, [(str(tmp_path), budget, seed, 300) for seed in range(4)])
    assert [wrong for wrong, _ in results] == [0, 0, 0, 0]
    assert sum(hits for _, hits in results) > 0
    cache = DiskCache(tmp_path, budget=budget)
    leftovers = [p for p in tmp_path.rglob(".tmp-*")]
    assert leftovers == []
    for path in (tmp_path / "ranges").rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            assert disk_cache._decode(raw, len(raw) - 18 - 2, "v1") is not None, f"torn or damaged entry {path}"
    # Between two scans a process writes at most budget/8 bytes plus one entry; the others do not see them yet.
    assert cache.usage() <= budget + 4 * (budget // 8 + 18 + 2 + 700 + 39 * 37)


DISK_FULL_SCRIPT = """
import json, logging, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)          # a write past the limit fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))   # no file of this process may grow past 2 KiB
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
from loaders import storage, disk_cache
uri, expected_path = sys.argv[1], sys.argv[2]
expected = open(expected_path, "rb").read()
ranges = [(0, 100), (1000, 8000), (9000, 100), (100, 5000), (0, 100), (20000, 3000)]
wrong = sum(storage.read_range(uri, o, n) != expected[o:o + n] for o, n in ranges)
cache = disk_cache.default_cache()
print(json.dumps({"wrong": wrong, "hits": cache.hits, "write_failures": cache.write_failures}))
"""


def test_disk_full_while_writing_the_cache_reads_continue_uncached(s3_bucket: S3Bucket, tmp_path: Path) -> None:
    """A real write failure: the reading process may not grow any file past 2 KiB (RLIMIT_FSIZE → EFBIG)."""
    expected = os.urandom(30_000)
    uri = s3_bucket.put("data/blob.bin", expected)
    (tmp_path / "expected.bin").write_bytes(expected)
    cache_dir = tmp_path / "full-cache"
    run = subprocess.run(
        [sys.executable, "-c", DISK_FULL_SCRIPT, uri, str(tmp_path / "expected.bin")],
        env=env_for_subprocess(s3_bucket.server, BATCHSCOPE_CACHE_DIR=str(cache_dir)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["wrong"] == 0
    assert report["write_failures"] == 1
    assert report["hits"] == 1  # the small range cached before the failure is served from disk
    assert run.stderr.count("cannot be written") == 1
    assert "File too large" in run.stderr
    assert list(cache_dir.rglob(".tmp-*")) == []
    stored = [p for p in cache_dir.rglob("*") if p.is_file()]
    assert len(stored) == 1 and stored[0].stat().st_size < 2048


def test_storage_read_range_caches_only_remote_ranges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCHSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    local = tmp_path / "local.bin"
    local.write_bytes(b"0123456789")
    assert storage.read_range(str(local), 2, 3) == b"234"
    assert storage.prefetch(str(local), [(0, 4)]) == []
    assert not (tmp_path / "cache").exists()

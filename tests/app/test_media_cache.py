"""The media cache: one make per key however many requests ask at once, remembered decode failures, the byte budget."""

from __future__ import annotations

import threading
import time

import pytest

from app.http_semantics import etag
from app.media_cache import MediaCache
from loaders.errors import DecodeError, StorageError
from loaders.storage.cache import ByteLRU


def cache(budget: int = 1000) -> MediaCache:
    return MediaCache(ByteLRU(budget=budget, size_of=lambda v: getattr(v, "nbytes", None) or len(v)))


def test_concurrent_requests_make_a_value_once() -> None:
    media = cache()
    threads = 8
    asked = []
    made = []
    lock = threading.Lock()

    def make() -> bytes:
        deadline = time.monotonic() + 10
        while len(asked) < threads and time.monotonic() < deadline:  # every request is in flight before this one ends
            time.sleep(0.005)
        time.sleep(0.05)
        made.append(1)
        return b"thumbnail"

    results: list[bytes] = []

    def request() -> None:
        with lock:
            asked.append(1)
        results.append(media.get_or_make(("thumb", "v", "k"), make))

    workers = [threading.Thread(target=request) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert results == [b"thumbnail"] * threads and len(made) == 1
    assert media.get_or_make(("thumb", "v", "k"), lambda: b"other") == b"thumbnail"


def test_decode_failures_are_remembered_other_errors_are_not() -> None:
    media = cache()
    calls = []

    def broken() -> bytes:
        calls.append(1)
        raise DecodeError("dataset d version v shard 0 row 3 column image: cannot decode image: image file is truncated")

    for _ in range(3):
        with pytest.raises(DecodeError, match="row 3 column image: cannot decode"):
            media.get_or_make("k", broken)
    assert len(calls) == 1

    def unavailable() -> bytes:
        calls.append(1)
        raise StorageError("s3 is down")

    for _ in range(2):
        with pytest.raises(StorageError):
            media.get_or_make("s3", unavailable)
    assert len(calls) == 3  # a passing outage is retried on the next request


def test_values_over_the_budget_are_made_but_not_kept() -> None:
    media = cache(budget=100)
    assert media.get_or_make("big", lambda: b"x" * 500) == b"x" * 500
    assert media.used == 0
    for i in range(30):
        media.get_or_make(i, lambda: b"y" * 10)
        assert media.used <= media.budget
    assert media.used == 100


def test_etags_are_strong_and_differ_by_address() -> None:
    a, b = etag("thumb", "v1", "k", "image", 256), etag("thumb", "v1", "k", "image", 128)
    assert a.startswith('"') and a.endswith('"') and a != b and a == etag("thumb", "v1", "k", "image", 256)

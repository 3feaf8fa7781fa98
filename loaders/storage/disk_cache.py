"""A read-through disk cache of remote byte ranges: byte budget, LRU eviction, safe across processes.

Each cached range is one file, named by a hash of ``(uri, offset, length)``,
holding a small header (magic, CRC-32, length, validator) and the bytes.
Files appear only through ``os.replace`` of a complete temporary file, so a
reader sees a whole entry or none; a damaged entry fails its CRC and is
dropped. Hits bump the file's mtime, which is the LRU clock; eviction scans
the directory, oldest first, and tolerates files other processes removed.
A failed write (disk full, file-size limit, read-only directory) is logged
once and the bytes are served uncached.

Settings: ``BATCHSCOPE_CACHE_DIR`` (default ``~/.cache/batchscope``) and
``BATCHSCOPE_CACHE_BYTES`` (default ``10G``; ``0`` turns the cache off).

>>> cache = DiskCache("/tmp/bs-cache-doc", budget=1 << 20)
>>> cache.get_or_fetch("s3://b/x", 0, 4, validator="4:1", fetch=lambda: b"PAR1")
b'PAR1'
>>> cache.get("s3://b/x", 0, 4, validator="4:1")
b'PAR1'
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
import time
import uuid
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable

log = logging.getLogger("batchscope.storage")

_HEADER = struct.Struct("<4sIQH")  # magic, crc32 of the bytes, length, validator length
_MAGIC = b"BSR1"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_SECONDS = 600.0
_WRITE_PAUSE_SECONDS = 30.0
_DEFAULT_BUDGET = "10G"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text: str) -> int:
    """Parse a byte count such as ``1048576``, ``512M`` or ``10GiB`` (binary units).

    >>> parse_bytes("512M")
    536870912
    """
    raw = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = raw[-1] if raw and raw[-1] in "KMGT" else ""
    number = raw[: len(raw) - len(unit)].strip()
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a byte count (examples: 1048576, 512M, 10G)") from None
    if value < 0:
        raise ValueError(f"byte count {text!r} is negative")
    return int(value)


class _Clock:
    """Nanosecond timestamps that strictly increase within a process, used as LRU access times."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def now(self) -> int:
        with self._lock:
            self._last = max(time.time_ns(), self._last + 1)
            return self._last


class DiskCache:
    """Byte ranges of remote files on local disk, bounded by ``budget`` bytes (LRU)."""

    def __init__(self, directory: str | os.PathLike[str], *, budget: int) -> None:
        self.directory = Path(directory).expanduser()
        self.budget = budget
        self.hits = 0
        self.misses = 0
        self.write_failures = 0
        self._ranges = self.directory / "ranges"
        self._lock = threading.Lock()
        self._clock = _Clock()
        self._inflight: dict[tuple[str, str], Future[bytes]] = {}
        self._used: int | None = None  # bytes found by the last scan plus bytes written since
        self._written_since_scan = 0
        self._trimming = False
        self._paused_until = 0.0
        self._warned = False

    def __repr__(self) -> str:
        return f"DiskCache({str(self.directory)!r}, budget={self.budget})"

    # -- entries -----------------------------------------------------------
    def path(self, uri: str, offset: int, length: int) -> Path:
        """The file that holds (or would hold) the range."""
        digest = hashlib.sha256(f"{uri}\n{offset}\n{length}".encode()).hexdigest()
        return self._ranges / digest[:2] / digest[2:]

    @property
    def writable(self) -> bool:
        """False while writes are paused after a failed write (disk full)."""
        return time.monotonic() >= self._paused_until

    def get(self, uri: str, offset: int, length: int, *, validator: str) -> bytes | None:
        """The cached bytes, or None when absent, stale (other validator) or damaged."""
        path = self.path(uri, offset, length)
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError:
            self.misses += 1
            return None
        data = _decode(raw, length, validator)
        if data is None:
            if _decode(raw, length, None) is None:
                _unlink(path)  # damaged: drop it; a stale entry is simply replaced by the next put
            self.misses += 1
            return None
        stamp = self._clock.now()
        try:
            os.utime(path, ns=(stamp, stamp))
        except OSError:
            pass  # evicted meanwhile; the bytes we read are complete
        self.hits += 1
        return data

    def put(self, uri: str, offset: int, length: int, data: bytes, *, validator: str) -> bool:
        """Store the range; return False when it was not stored (too big, writes paused, write failed)."""
        if len(data) != length:
            raise ValueError(f"cache put for {uri} bytes {offset}+{length}: got {len(data)} bytes")
        encoded_validator = validator.encode()
        size = _HEADER.size + len(encoded_validator) + len(data)
        if size > self.budget or not self.writable:
            return False
        path = self.path(uri, offset, length)
        tmp = path.parent / f"{_TMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as handle:
                handle.write(_HEADER.pack(_MAGIC, zlib.crc32(data), len(data), len(encoded_validator)))
                handle.write(encoded_validator)
                handle.write(data)
            stamp = self._clock.now()
            os.utime(tmp, ns=(stamp, stamp))
            os.replace(tmp, path)
        except OSError as exc:
            _unlink(tmp)
            self._write_failed(exc)
            return False
        with self._lock:
            self._written_since_scan += size
            if self._used is not None:
                self._used += size
            due = self._used is None or self._used > self.budget or self._written_since_scan > self.budget // 8
        if due:
            self.trim()
        return True

    def get_or_fetch(self, uri: str, offset: int, length: int, *, validator: str, fetch: Callable[[], bytes]) -> bytes:
        """The cached bytes, else ``fetch()``'s, stored on the way; one fetch per range at a time in this process."""
        data = self.get(uri, offset, length, validator=validator)
        if data is not None:
            return data
        key = (str(self.path(uri, offset, length)), validator)
        with self._lock:
            flight = self._inflight.get(key)
            leader = flight is None
            if flight is None:
                flight = self._inflight[key] = Future()
        if not leader:
            return flight.result()
        try:
            # A leader that finished between our first look and taking the lock has stored the range: look again.
            data = self.get(uri, offset, length, validator=validator)
            if data is None:
                data = fetch()
                self.put(uri, offset, length, data, validator=validator)
            flight.set_result(data)
            return data
        except BaseException as exc:
            flight.set_exception(exc)
            raise
        finally:
            with self._lock:
                self._inflight.pop(key, None)

    def evict(self, uri: str, offset: int, length: int) -> bool:
        """Remove the cached range (e.g. after its bytes failed a checksum); True when a file was removed."""
        return _unlink(self.path(uri, offset, length))

    # -- budget ------------------------------------------------------------
    def _entries(self) -> list[tuple[int, int, str]]:
        """``(access time ns, size, path)`` of every entry; removes stale temporary files on the way."""
        found: list[tuple[int, int, str]] = []
        stale_before = time.time() - _STALE_TMP_SECONDS
        try:
            shards = list(os.scandir(self._ranges))
        except OSError:
            return found
        for shard in shards:
            try:
                entries = list(os.scandir(shard.path))
            except OSError:
                continue
            for entry in entries:
                try:
                    info = entry.stat()
                except OSError:
                    continue  # removed by another process
                if entry.name.startswith(_TMP_PREFIX):
                    if info.st_mtime < stale_before:
                        _unlink(Path(entry.path))  # left by a process that died mid-write
                    continue
                found.append((info.st_mtime_ns, info.st_size, entry.path))
        return found

    def usage(self) -> int:
        """Bytes currently stored (all processes), by a directory scan."""
        return sum(size for _, size, _ in self._entries())

    def trim(self) -> int:
        """Evict least-recently-used entries until usage is at most 90% of the budget; return bytes freed."""
        with self._lock:
            if self._trimming:
                return 0
            self._trimming = True
        try:
            entries = self._entries()
            used = sum(size for _, size, _ in entries)
            freed = 0
            if used > self.budget:
                target = self.budget * 9 // 10
                for _, size, path in sorted(entries):
                    if used - freed <= target:
                        break
                    _unlink(Path(path))
                    freed += size  # counted even when another process removed it first
            with self._lock:
                self._used = used - freed
                self._written_since_scan = 0
            return freed
        finally:
            with self._lock:
                self._trimming = False

    def _write_failed(self, exc: OSError) -> None:
        with self._lock:
            self.write_failures += 1
            self._paused_until = time.monotonic() + _WRITE_PAUSE_SECONDS
            warn = not self._warned
            self._warned = True
        if warn:
            log.warning(
                "disk cache %s cannot be written (%s: %s); reading uncached, trying again every %.0f s",
                self.directory,
                type(exc).__name__,
                exc,
                _WRITE_PAUSE_SECONDS,
            )


def _decode(raw: bytes, length: int, validator: str | None) -> bytes | None:
    """The payload of a cache file when it is whole, of ``length`` bytes and (if given) of ``validator``."""
    if len(raw) < _HEADER.size:
        return None
    magic, crc, size, vlen = _HEADER.unpack_from(raw)
    start = _HEADER.size + vlen
    if magic != _MAGIC or size != length or len(raw) != start + size:
        return None
    if validator is not None and raw[_HEADER.size : start] != validator.encode():
        return None
    data = raw[start:]
    return data if zlib.crc32(data) == crc else None


def _unlink(path: Path) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


# -- the process-wide cache and prefetch pool ------------------------------
_CACHES: dict[tuple[str, int, int], DiskCache] = {}
_POOLS: dict[int, tuple[ThreadPoolExecutor, threading.BoundedSemaphore]] = {}
_GLOBAL_LOCK = threading.Lock()


def settings() -> tuple[Path, int]:
    """``(directory, budget)`` from ``BATCHSCOPE_CACHE_DIR`` and ``BATCHSCOPE_CACHE_BYTES``."""
    directory = os.environ.get("BATCHSCOPE_CACHE_DIR") or os.path.join("~", ".cache", "batchscope")
    budget = parse_bytes(os.environ.get("BATCHSCOPE_CACHE_BYTES") or _DEFAULT_BUDGET)
    return Path(directory).expanduser(), budget


def default_cache() -> DiskCache | None:
    """The cache the environment configures (one per directory, budget and process), or None when off."""
    directory, budget = settings()
    if budget <= 0:
        return None
    key = (str(directory), budget, os.getpid())
    with _GLOBAL_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = DiskCache(directory, budget=budget)
    return cache


def evict(uri: str, offset: int, length: int) -> bool:
    """Drop one range from the default cache (call it when the range's bytes fail their checksum)."""
    cache = default_cache()
    return cache.evict(uri, offset, length) if cache is not None else False


def background(tasks: Iterable[Callable[[], object]]) -> list[Future[None]]:
    """Run ``tasks`` on the bounded prefetch pool; tasks beyond the queue bound are dropped.

    ``BATCHSCOPE_PREFETCH_THREADS`` (default 4) threads, at most
    ``BATCHSCOPE_PREFETCH_QUEUE`` (default 64) tasks queued or running.
    """
    pid = os.getpid()
    with _GLOBAL_LOCK:
        pool = _POOLS.get(pid)
        if pool is None:  # new process (or forked child): threads do not survive a fork
            threads = max(1, int(os.environ.get("BATCHSCOPE_PREFETCH_THREADS") or 4))
            queue = max(threads, int(os.environ.get("BATCHSCOPE_PREFETCH_QUEUE") or 64))
            pool = _POOLS[pid] = (
                ThreadPoolExecutor(max_workers=threads, thread_name_prefix="batchscope-prefetch"),
                threading.BoundedSemaphore(queue),
            )
    executor, slots = pool
    futures: list[Future[None]] = []
    for task in tasks:
        if not slots.acquire(blocking=False):
            break

        def run(task: Callable[[], object] = task) -> None:
            try:
                task()
            finally:
                slots.release()

        futures.append(executor.submit(run))
    return futures

"""Shards checked whole against their version's checksums before DuckDB reads them, remembered per process.

DuckDB reads a local shard file itself, so the file is first read once here and every segment of it (one per row
group, and the footer) is hashed and compared with the digests registration recorded. A shard that differs is a
``ChecksumMismatch`` naming dataset, version and shard, and the query is refused. A checked file is remembered with
its size, inode, and modification and change times (the change time moves on any write, and cannot be set back),
so a repeated query costs one ``stat`` per shard, and a file written after its check is checked again.

Remote shards (S3, HTTP) are not read by DuckDB: :mod:`loaders.query.session` loads their rows through the read
path, which checks each row group it fetches.

>>> verified_files(catalog.resolve("web-text@v1"))        # doctest: +SKIP
['/data/web-text/part-0.parquet', '/data/web-text/part-1.parquet']
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Sequence

from .. import storage
from ..catalog.version import DatasetVersion
from ..errors import ChecksumMismatch
from ..storage.pool import map_in_order
from ..storage.shards import ShardInfo

_CHUNK = 8 << 20
#: ``(path, shard checksum)`` → the file's ``(size, inode, device, mtime_ns, ctime_ns)`` when its bytes were checked.
_CHECKED: dict[tuple[str, str], tuple[int, ...]] = {}
_LOCK = threading.Lock()


class CheckCounter:
    """How many shard files this process has hashed (tests and benchmarks read it)."""

    files = 0


def _signature(path: str) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns)


def _hash_range(handle: object, start: int, end: int) -> str:
    digest = hashlib.sha256()
    position = start
    handle.seek(start)  # type: ignore[attr-defined]
    while position < end:
        chunk = handle.read(min(_CHUNK, end - position))  # type: ignore[attr-defined]
        if not chunk:
            break
        digest.update(chunk)
        position += len(chunk)
    return digest.hexdigest()[:32] if position == end else ""


def _check(version: DatasetVersion, number: int) -> None:
    """Hash every segment and the footer of shard ``number`` and compare them with the manifest (ChecksumMismatch)."""
    shard: ShardInfo = version.shards[number]
    where = version.where(number)
    path = shard.uri
    before = _signature(path)
    if before is None:
        raise ChecksumMismatch(f"{where}: shard file {path} is missing")
    if before[0] != shard.size:
        raise ChecksumMismatch(f"{where}: shard {path} is {before[0]} bytes, registered as {shard.size} bytes (changed after registration)")
    bounds = list(shard.boundaries)
    with open(path, "rb") as handle:
        for segment, (start, end) in enumerate(zip(bounds, bounds[1:])):
            if _hash_range(handle, start, end) != shard.segment_digests[segment]:
                raise ChecksumMismatch(
                    f"{where}: bytes {start}-{end} of shard {path} do not match their registered checksum (changed after registration)"
                )
        if _hash_range(handle, bounds[-1], shard.size) != shard.footer_digest:
            raise ChecksumMismatch(f"{where}: footer of shard {path} changed after registration")
    after = _signature(path)
    if after != before:  # written while it was being checked: what was hashed may not be what is there
        raise ChecksumMismatch(f"{where}: shard {path} changed while it was being checked")
    with _LOCK:
        _CHECKED[(path, shard.checksum)] = after
        CheckCounter.files += 1


def is_local(version: DatasetVersion) -> bool:
    """True when every shard of ``version`` is a local file (DuckDB reads those itself)."""
    return all(not storage.is_remote(shard.uri) for shard in version.shards)


def verified_files(version: DatasetVersion) -> list[str]:
    """The local shard files of ``version``, each checked against the manifest unless unchanged since its last check.

    Files are hashed in parallel; the first shard that fails raises ``ChecksumMismatch`` naming it.
    """
    if not is_local(version):
        raise ValueError(f"{version.ref} has shards that are not local files")
    stale: list[int] = []
    for number, shard in enumerate(version.shards):
        with _LOCK:
            checked = _CHECKED.get((shard.uri, shard.checksum))
        if checked is None or checked != _signature(shard.uri):
            stale.append(number)
    if stale:
        map_in_order(lambda number: _check(version, number), stale)
    return [shard.uri for shard in version.shards]


def forget(paths: Sequence[str] | None = None) -> None:
    """Forget the checks of ``paths`` (all when None): the next query hashes them again (tests and benchmarks)."""
    with _LOCK:
        if paths is None:
            _CHECKED.clear()
            return
        for key in [k for k in _CHECKED if k[0] in set(paths)]:
            del _CHECKED[key]

"""Checked segments: the byte ranges a shard format cuts a file into, each hashed once and checked on every fetch.

Every shard format but Parquet describes a file the same way: ``ShardInfo.boundaries`` are the byte offsets where
each row group's segment starts, plus where the last one ends, and ``segment_digests`` the digest of each segment.
:func:`hash_range` computes a digest at registration (streaming the bytes once); :func:`fetch` reads one segment
back, checks it and returns exactly the bytes it checked, so a file changed after registration is refused, naming
it and the bytes, never decoded.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "f.bin")
>>> _ = open(path, "wb").write(bytes(range(10)))
>>> hash_range(path, 2, 6) == digest(bytes(range(2, 6)))
True
>>> group_starts([0, 3, 5, 9, 12], 8)
[0, 3]
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from ..errors import ChecksumMismatch, RegistrationError
from . import files as storage
from .shards import ShardInfo

_HASH_CHUNK = 8 << 20


def digest(data: bytes | memoryview) -> str:
    """The digest a manifest records for a segment (the first 32 hex digits of its SHA-256)."""
    return hashlib.sha256(data).hexdigest()[:32]


def hash_range(uri: str, start: int, end: int, *, prefix: bytes = b"") -> str:
    """The digest of ``prefix`` followed by bytes ``[start, end)`` of ``uri``, read in chunks."""
    h = hashlib.sha256(prefix)
    position = start
    while position < end:
        chunk = storage.read_range(uri, position, min(_HASH_CHUNK, end - position), cache=False)
        if not chunk:
            raise RegistrationError(f"{uri}: file ended at byte {position}, expected {end}")
        h.update(chunk)
        position += len(chunk)
    return h.hexdigest()[:32]


def group_starts(item_starts: Sequence[int] | np.ndarray, group_bytes: int) -> list[int]:
    """Which items begin a row group: items are cut into groups of about ``group_bytes`` bytes each (an item that
    starts in a group stays whole in it), given each item's starting byte offset, in file order."""
    starts = np.asarray(item_starts, dtype=np.int64)
    if not len(starts):
        return []
    buckets = (starts - starts[0]) // max(1, group_bytes)
    return np.flatnonzero(np.concatenate([[True], buckets[1:] != buckets[:-1]])).tolist()


def fetch(shard: ShardInfo, group: int, *, where: str, prefix: bytes = b"", cache: bool = True) -> bytes:
    """Segment ``group`` of ``shard``, checked against its digest (computed over ``prefix`` and the segment)."""
    start, end = shard.boundaries[group], shard.boundaries[group + 1]
    data = storage.read_range(shard.uri, start, end - start, cache=cache)
    if len(data) != end - start or digest(prefix + data) != shard.segment_digests[group]:
        storage.evict(shard.uri, start, end - start)
        raise ChecksumMismatch(
            f"{where}: row group {group} of shard {shard.uri} (bytes {start}-{end}) does not match its registered checksum"
        )
    return data

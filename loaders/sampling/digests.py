"""Sample and batch digests: 64-bit address hashes combined with splitmix64, vectorized over a batch.

A sample's digest pins what the model was given: its global index, the
address ``(dataset, version, shard, row)`` of every document in it, and the
inputs that transforms made. A record's own values need no hashing: versions
are immutable and every row group is checked against its registered checksum
when read, so the address pins those bytes (the key included). That makes the
digest of an untransformed sample pure integer arithmetic, which numpy does
for a whole batch at once; only made inputs (token ids, crops...) are hashed
with sha256.

The batch digest is a sha256 of the run, step, rank, world size and the
sample digests in order.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any, Iterable, Sequence

import numpy as np

from ..catalog.records import digest as value_digest
from ..order.permutation import derive_key
from ..order.permutation import mix64 as _mix
from ..order.permutation import mix64_array as _mix_np

_M64 = (1 << 64) - 1
_INDEX_SALT = 0x5EED_D16E_57AB_1E5A
#: Bumped whenever the definition below changes (ledgers record it).
DIGEST_FORMAT = 2


@lru_cache(maxsize=1024)
def version_hash(dataset: str, version: str) -> int:
    """A 64-bit hash naming one dataset version."""
    return derive_key("address", dataset, version)


def document_hash(dataset: str, version: str, shard: int, row: int) -> int:
    """The 64-bit hash of one document's address."""
    return _mix(_mix(version_hash(dataset, version) ^ shard) ^ row)


def document_hashes(versions: np.ndarray, shards: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Vectorized :func:`document_hash` (``versions`` holds :func:`version_hash` values)."""
    with np.errstate(over="ignore"):
        return _mix_np(_mix_np(versions.astype(np.uint64) ^ shards.astype(np.uint64)) ^ rows.astype(np.uint64))


def made_hash(made: dict[str, Any]) -> int:
    """The 64-bit hash of the inputs transforms made (0 when they made none)."""
    if not made:
        return 0
    return int(value_digest(made, 16), 16) or 1


def sample_digest(index: int, documents: Iterable[int], made: int = 0) -> int:
    """The digest of one sample from its index, its documents' hashes in order and its made-inputs hash."""
    acc = _mix(index ^ _INDEX_SALT)
    for doc in documents:
        acc = _mix(acc ^ doc)
    return _mix(acc ^ made) if made else acc


def sample_digests(indices: np.ndarray, documents: np.ndarray, made: np.ndarray | None = None) -> np.ndarray:
    """Vectorized :func:`sample_digest` for single-document samples (``made`` = 0 where nothing was made)."""
    with np.errstate(over="ignore"):
        acc = _mix_np(_mix_np(indices.astype(np.uint64) ^ np.uint64(_INDEX_SALT)) ^ documents)
        if made is not None and made.any():
            mixed = _mix_np(acc ^ made)
            acc = np.where(made != 0, mixed, acc)
    return acc


def hex_digests(digests: np.ndarray) -> list[str]:
    """Sample digests as 16-character hex strings (how the ledger and the inspector show them)."""
    return [f"{d:016x}" for d in digests.tolist()]


def batch_digest(run: str, step: int, rank: int, world_size: int, digests: np.ndarray | Sequence[int]) -> str:
    """The digest of a whole batch: 32 hex characters."""
    header = f"batchscope.batch/{DIGEST_FORMAT}\x1f{run}\x1f{step}\x1f{rank}\x1f{world_size}\x1f".encode()
    body = np.asarray(digests, dtype=np.uint64).astype("<u8").tobytes()
    return hashlib.sha256(header + body).hexdigest()[:32]

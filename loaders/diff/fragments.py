"""Fragments: the compact form in which rows travel to the hash partitions (key hash, row index, column hashes, key)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .hashing import combine, fmix, hash_array
from .schema import MatchPlan

_KEYLESS_SEEDS = (1, 2)
_NO_COLUMNS_SEEDS = (101, 202)
#: A fragment split by partition: ``(side, partition, batch)`` triples.
Pieces = list[tuple[int, int, pa.RecordBatch]]


def key_hashes(key: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A 128-bit hash of each key as two ``uint64`` arrays; integer keys are used as they are (exact)."""
    if isinstance(key, pa.ChunkedArray):
        key = key.combine_chunks()
    if pa.types.is_integer(key.type):
        wide = key.cast(pa.uint64() if pa.types.is_unsigned_integer(key.type) else pa.int64())
        k1 = wide.fill_null(0).to_numpy().view(np.uint64).copy()
        k2 = np.zeros(len(key), np.uint64)
        if key.null_count:
            k2[~key.is_valid().to_numpy(zero_copy_only=False)] = 1
        return k1, k2
    return hash_array(key, seed=11), hash_array(key, seed=12)


def fragment(table: pa.Table, index: np.ndarray, side: int, plan: MatchPlan) -> pa.RecordBatch:
    """The compact form of rows: ``k1, k2`` (key hash), ``i`` (global row index), ``h0..`` (column hashes), ``key``."""
    key = None
    hashes: list[np.ndarray] = []
    if plan.key is not None:
        key = table.column(plan.key).combine_chunks()
        if plan.key_as_text:
            key = pc.cast(key, pa.string())
        k1, k2 = key_hashes(key)
        hashes = [hash_array(table.column(c)) for c in plan.compared]
    elif plan.compared:
        per_column = [hash_array(table.column(c)) for c in plan.compared]
        k1, k2 = combine(per_column, seed=_KEYLESS_SEEDS[0]), combine(per_column, seed=_KEYLESS_SEEDS[1])
    else:  # nothing comparable: every row is its own, side-specific key
        k1 = fmix(index.view(np.uint64) ^ np.uint64(_NO_COLUMNS_SEEDS[side]))
        k2 = fmix(index.view(np.uint64) ^ np.uint64(_NO_COLUMNS_SEEDS[1 - side] * 7))
    arrays: list[pa.Array] = [pa.array(k1), pa.array(k2), pa.array(index), *(pa.array(h) for h in hashes)]
    names = ["k1", "k2", "i", *(f"h{j}" for j in range(len(hashes)))]
    if key is not None:
        arrays.append(key)
        names.append("key")
    return pa.RecordBatch.from_arrays(arrays, names=names)


def partition(side: int, batch: pa.RecordBatch, buckets: int) -> Pieces:
    """Split a fragment by key hash into ``buckets`` partitions."""
    if buckets == 1 or batch.num_rows == 0:
        return [(side, 0, batch)]
    k = batch.column(0).to_numpy() ^ batch.column(1).to_numpy()
    spread = fmix(k) >> np.uint64(32)
    bucket = ((spread * np.uint64(buckets)) >> np.uint64(32)).astype(np.uint16 if buckets <= 1 << 16 else np.int64)
    order = np.argsort(bucket, kind="stable")  # a radix sort for 16-bit ids
    counts = np.bincount(bucket, minlength=buckets)
    taken = batch.take(pa.array(order))
    out, start = [], 0
    for index, count in enumerate(counts.tolist()):
        if count:
            out.append((side, index, taken.slice(start, count)))
        start += count
    return out

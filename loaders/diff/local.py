"""Matching rows inside a pair of changed shards, before anything is hashed: the cheap path for the usual edits.

A new version usually rewrites a shard with the same keys in roughly the same
place: some rows edited, a few added or removed, maybe reordered. For the
i-th changed shard of A and the i-th of B, rows are paired by key within the
pair (sorted keys, or keys in the same order, need no sort) and their values
compared directly, column by column, with vectorized equality. Only the rows
left over (keys not found in the pair, keys repeated inside a shard) become
fragments for the hash partitions. Keyless shards of equal length are
compared position by position.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .fragments import Pieces, fragment, key_hashes, partition
from .hashing import equal_values
from .matching import pair_unique
from .schema import MatchPlan


@dataclass
class Outcome:
    """What one task found: fragments for the partitions, rows changed in place, and how many were equal."""

    pieces: Pieces
    changed: pa.Table | None = None
    unchanged: int = 0


def match_pair(left: pa.Table, right: pa.Table, first_a: int, first_b: int, plan: MatchPlan, buckets: int) -> Outcome:
    """Match the rows of a shard pair (``first_a``/``first_b``: global index of their first rows)."""
    na, nb = left.num_rows, right.num_rows
    if plan.key is not None:
        key_a, key_b = left.column(plan.key), right.column(plan.key)
        if plan.key_as_text:
            key_a, key_b = pc.cast(key_a, pa.string()), pc.cast(key_b, pa.string())
        pairs = pair_unique(*key_hashes(key_a), *key_hashes(key_b))
        pos_a, pos_b = pairs.a, pairs.b
        in_place = len(pos_a) == na == nb and bool(np.all(pos_a == np.arange(na))) and bool(np.all(pos_b == pos_a))
        differs = _differs(left, right, pos_a, pos_b, plan, in_place)
    else:
        differs = _differs(left, right, np.arange(na), np.arange(nb), plan, True)
        equal = ~differs.any(axis=1)
        pos_a = pos_b = np.flatnonzero(equal)
        differs = differs[equal]
    is_changed = differs.any(axis=1)
    changed = _changed_rows(right, pos_a[is_changed], pos_b[is_changed], differs[is_changed], first_a, first_b, plan)
    pieces = _leftovers(left, pos_a, first_a, 0, plan, buckets) + _leftovers(right, pos_b, first_b, 1, plan, buckets)
    return Outcome(pieces, changed, len(pos_a) - int(is_changed.sum()))


def _differs(left: pa.Table, right: pa.Table, pos_a: np.ndarray, pos_b: np.ndarray, plan: MatchPlan, in_place: bool) -> np.ndarray:
    """Per pair and compared column: do the values differ?"""
    out = np.zeros((len(pos_a), len(plan.compared)), bool)
    if not len(pos_a):
        return out
    take_a, take_b = pa.array(pos_a), pa.array(pos_b)
    for j, column in enumerate(plan.compared):
        x, y = left.column(column), right.column(column)
        if not in_place:
            x, y = x.take(take_a), y.take(take_b)
        out[:, j] = ~equal_values(x, y)
    return out


def _changed_rows(
    right: pa.Table, pos_a: np.ndarray, pos_b: np.ndarray, differs: np.ndarray, first_a: int, first_b: int, plan: MatchPlan
) -> pa.Table | None:
    if not len(pos_a) or plan.key is None:
        return None
    rows, cols = np.nonzero(differs)
    offsets = np.zeros(len(pos_a) + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=len(pos_a)), out=offsets[1:])
    key = right.column(plan.key).take(pa.array(pos_b)).combine_chunks()
    return pa.table(
        {
            "key": pc.cast(key, pa.string()) if plan.key_as_text else key,
            "a": pa.array(first_a + pos_a),
            "b": pa.array(first_b + pos_b),
            "columns": pa.ListArray.from_arrays(pa.array(offsets), pa.array(cols.astype(np.int16), pa.int16())),
        }
    )


def _leftovers(table: pa.Table, paired: np.ndarray, first: int, side: int, plan: MatchPlan, buckets: int) -> Pieces:
    """Fragments of the rows of one shard that were not paired."""
    if len(paired) == table.num_rows:
        return []
    if not len(paired):
        return partition(side, fragment(table, first + np.arange(table.num_rows), side, plan), buckets)
    keep = np.ones(table.num_rows, bool)
    keep[paired] = False
    rest = np.flatnonzero(keep)
    return partition(side, fragment(table.take(pa.array(rest)), first + rest, side, plan), buckets)

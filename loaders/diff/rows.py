"""Row-level matching of the changed shards: pair rows by key partition by partition, classify them, list the changes.

The scan (:mod:`.scan`) matches shard pairs locally and leaves the other rows
in hash partitions; these are matched partition by partition
(:mod:`.matching`): paired rows whose column hashes differ are ``changed``,
unpaired rows ``added`` or ``removed``. Together with the locally matched
rows, the result is one change table sorted by key.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..catalog.version import DatasetVersion
from ..engine import ordered, resolve_engine
from .matching import pair_in_order, pair_unique
from .scan import MatchPlan, Partitions, scan

if TYPE_CHECKING:
    from ..engine import Engine

#: Change codes stored in the change table.
CODES: dict[str, int] = {"added": 0, "removed": 1, "changed": 2, "edited": 3}
NAMES: dict[int, str] = {code: name for name, code in CODES.items()}
#: Default rows per partition (per side) held in memory while matching.
PARTITION_ROWS = 1_000_000
_EXAMPLES = 5
_MAX_BUCKETS = 4096  # beyond this, partitions grow instead of multiplying spill files
_ORDER = np.array([CODES["changed"], CODES["added"], CODES["removed"]], np.int8)  # blocks of a partition's change rows

__all__ = ["CODES", "NAMES", "PARTITION_ROWS", "Match", "MatchPlan", "change_schema", "hex_keys", "match_rows", "sort_changes"]


@dataclass
class Match:
    """The outcome of matching the scanned shards (rows of unchanged shards are not included)."""

    added: int = 0
    removed: int = 0
    changed: int = 0
    unchanged: int = 0
    a_duplicates: int = 0
    b_duplicates: int = 0
    a_examples: list[str] = field(default_factory=list)
    b_examples: list[str] = field(default_factory=list)
    changes: pa.Table | None = None

    def merge(self, other: "Match") -> None:
        """Add the counters of another part of the match (examples: the first ones, in the order parts are merged)."""
        self.added += other.added
        self.removed += other.removed
        self.changed += other.changed
        self.unchanged += other.unchanged
        self.a_duplicates += other.a_duplicates
        self.b_duplicates += other.b_duplicates
        self.a_examples = (self.a_examples + other.a_examples)[:_EXAMPLES]
        self.b_examples = (self.b_examples + other.b_examples)[:_EXAMPLES]


def change_schema(key_type: pa.DataType) -> pa.Schema:
    """The change table: one row per added, removed, changed or edited row; ``columns`` index the compared columns."""
    return pa.schema(
        [
            ("key", key_type),
            ("change", pa.int8()),
            ("a", pa.int64()),
            ("b", pa.int64()),
            ("columns", pa.list_(pa.int16())),
            ("similarity", pa.float32()),
        ]
    )


def match_rows(
    a: DatasetVersion,
    b: DatasetVersion,
    plan: MatchPlan,
    *,
    partition_rows: int = PARTITION_ROWS,
    workers: int | None = None,
    engine: "str | Engine | None" = None,
) -> Match:
    """Match the rows of ``plan.a_shards`` of ``a`` against those of ``plan.b_shards`` of ``b``, on ``engine``.

    ``workers`` (threads of a local engine made for this call) is kept for callers that pinned it.
    """
    rows = max(sum(a.shards[s].rows for s in plan.a_shards), sum(b.shards[s].rows for s in plan.b_shards))
    buckets = min(_MAX_BUCKETS, max(1, math.ceil(rows / partition_rows)))
    key_type = None if plan.key is None else pa.string() if plan.key_as_text else a.schema.field(plan.key).type
    scan_engine = _engine(engine, workers)
    match = Match()
    tables = []
    with tempfile.TemporaryDirectory(prefix="batchscope-diff-") as spill:
        partitions = Partitions(buckets, spill, flush_rows=max(1, partition_rows // 2))
        scanned = scan(a, b, plan, partitions, engine=scan_engine, pair_rows=partition_rows // 4)
        partitions.flush_all()
        match.unchanged += scanned.unchanged
        for table in scanned.changed:
            match.changed += table.num_rows
            tables.append(_local_changes(table).cast(change_schema(key_type or pa.string())))
        columns = len(plan.compared) if plan.key else 0
        found = ordered(
            scan_engine,
            match_bucket,
            _Buckets(partitions, columns, key_type),
            labels=[f"key bucket {bucket} of {buckets} ({a.ref} against {b.ref})" for bucket in range(buckets)],
        )
        for bucket_match, table in found:  # in bucket order, whichever finished first
            match.merge(bucket_match)
            tables.append(table.cast(change_schema(key_type or pa.string())))
    match.changes = sort_changes(pa.concat_tables(tables))
    return match


def _engine(engine: "str | Engine | None", workers: int | None) -> Engine:
    if workers is not None and engine is None:
        from ..engine.local import LocalEngine

        return LocalEngine(threads=workers)
    return resolve_engine(engine)


@dataclass(frozen=True)
class BucketTask:
    """Match one key bucket: its fragments from both sides."""

    a: list[pa.RecordBatch]
    b: list[pa.RecordBatch]
    columns: int
    key_type: pa.DataType | None


class _Buckets(Sequence[BucketTask]):
    """The matching tasks, one per bucket, each loaded (from memory or spill files) when the engine submits it."""

    def __init__(self, partitions: Partitions, columns: int, key_type: pa.DataType | None) -> None:
        self.partitions, self.columns, self.key_type = partitions, columns, key_type

    def __len__(self) -> int:
        return self.partitions.buckets

    def __getitem__(self, bucket: int) -> BucketTask:  # type: ignore[override]
        if not 0 <= bucket < len(self):
            raise IndexError(bucket)
        load = self.partitions.load
        return BucketTask(load(0, bucket), load(1, bucket), self.columns, self.key_type)


def match_bucket(task: BucketTask) -> tuple[Match, pa.Table]:
    """Task: match one bucket; its counters and change rows."""
    found = Match()
    table = _match_bucket(_Side.of(task.a, task.columns, task.key_type), _Side.of(task.b, task.columns, task.key_type), found)
    return found, table


def _local_changes(table: pa.Table) -> pa.Table:
    """Change rows of a locally matched shard pair (key, a, b, columns) in the change table's layout."""
    n = table.num_rows
    return pa.table(
        {
            "key": table.column("key"),
            "change": pa.array(np.full(n, CODES["changed"], np.int8)),
            "a": table.column("a"),
            "b": table.column("b"),
            "columns": table.column("columns"),
            "similarity": pa.nulls(n, pa.float32()),
        }
    )


def sort_changes(changes: pa.Table) -> pa.Table:
    """Order a change table by key (then change, a, b): the stable order pages follow."""
    order = pc.sort_indices(changes, sort_keys=[("key", "ascending"), ("change", "ascending"), ("a", "ascending"), ("b", "ascending")])
    return changes.take(order)


def hex_keys(k1: np.ndarray, k2: np.ndarray) -> pa.Array:
    """32 hex digits per row from two ``uint64`` hashes (the keys of keyless rows), without a Python loop."""
    n = len(k1)
    raw = np.empty((n, 2), ">u8")
    raw[:, 0] = k1
    raw[:, 1] = k2
    nibbles = raw.view(np.uint8).reshape(n, 16)
    digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    text = np.empty((n, 32), np.uint8)
    text[:, 0::2] = digits[nibbles >> 4]
    text[:, 1::2] = digits[nibbles & 15]
    offsets = np.arange(n + 1, dtype=np.int32) * 32
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(text.tobytes()))


@dataclass
class _Side:
    """One side of a partition as numpy arrays."""

    k1: np.ndarray
    k2: np.ndarray
    index: np.ndarray
    hashes: list[np.ndarray]
    keys: pa.Array | None

    @classmethod
    def of(cls, batches: list[pa.RecordBatch], columns: int, key_type: pa.DataType | None) -> "_Side":
        """One side of a partition from its fragments; ``key_type`` is ``None`` for keyless matching."""
        batches = [b for b in batches if b.num_rows]

        def col(name: str, dtype: type) -> np.ndarray:
            parts = [b.column(name).to_numpy() for b in batches]
            return np.concatenate(parts) if parts else np.empty(0, dtype)

        keys = None
        if key_type is not None:
            keys = pa.concat_arrays([b.column("key") for b in batches]) if batches else pa.array([], key_type)
        hashes = [col(f"h{j}", np.uint64) for j in range(columns)]
        side = cls(col("k1", np.uint64), col("k2", np.uint64), col("i", np.int64), hashes, keys)
        return side.in_row_order()

    def in_row_order(self) -> "_Side":
        """The same rows ordered by row index: fragments arrive in whatever order their tasks finished."""
        order = np.argsort(self.index, kind="stable")
        if np.array_equal(order, np.arange(len(order))):
            return self
        keys = self.keys.take(pa.array(order)) if self.keys is not None else None
        return _Side(self.k1[order], self.k2[order], self.index[order], [h[order] for h in self.hashes], keys)

    def __len__(self) -> int:
        return len(self.k1)

    def key_values(self, positions: np.ndarray) -> pa.Array:
        """Key values at ``positions`` (keyless: the 32-hex-digit row hashes)."""
        if self.keys is not None:
            return self.keys.take(pa.array(positions, pa.int64()))
        return hex_keys(self.k1[positions], self.k2[positions])


def _match_bucket(a: _Side, b: _Side, out: Match) -> pa.Table:
    """Match one partition; update ``out``'s counters and return the partition's change rows."""
    pairs = pair_unique(a.k1, a.k2, b.k1, b.k2)
    a_pos, b_pos = pairs.a, pairs.b
    paired_a = np.zeros(len(a), bool)
    paired_a[a_pos] = True
    paired_b = np.zeros(len(b), bool)
    paired_b[b_pos] = True
    if pairs.tricky_a is not None and pairs.tricky_b is not None:
        in_a, in_b = np.flatnonzero(pairs.tricky_a), np.flatnonzero(pairs.tricky_b)
        ordered = pair_in_order(a.k1[in_a], a.k2[in_a], a.index[in_a], b.k1[in_b], b.k2[in_b], b.index[in_b])
        a_pos, b_pos = np.concatenate([a_pos, in_a[ordered.a]]), np.concatenate([b_pos, in_b[ordered.b]])
        paired_a[in_a[ordered.a]] = True
        paired_b[in_b[ordered.b]] = True
        out.a_duplicates += ordered.extra_a
        out.b_duplicates += ordered.extra_b
        for side, positions, examples in ((a, in_a[ordered.repeated_a], out.a_examples), (b, in_b[ordered.repeated_b], out.b_examples)):
            wanted = positions[: max(0, _EXAMPLES - len(examples))]
            examples.extend(str(v) for v in side.key_values(wanted).to_pylist())
    removed, added = np.flatnonzero(~paired_a), np.flatnonzero(~paired_b)
    per_column = [ha[a_pos] != hb[b_pos] for ha, hb in zip(a.hashes, b.hashes)]
    is_changed = np.logical_or.reduce(per_column) if per_column else np.zeros(len(a_pos), bool)
    differs = np.stack([d[is_changed] for d in per_column], axis=1) if per_column else np.zeros((int(is_changed.sum()), 0), bool)
    changed = int(is_changed.sum())
    out.added += len(added)
    out.removed += len(removed)
    out.changed += changed
    out.unchanged += len(a_pos) - changed
    ca, cb = a_pos[is_changed], b_pos[is_changed]
    rows, cols = np.nonzero(differs)
    offsets = np.zeros(changed + len(added) + len(removed) + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=changed), out=offsets[1 : changed + 1])
    offsets[changed + 1 :] = offsets[changed]
    keys = [b.key_values(np.concatenate([cb, added])), a.key_values(removed)]
    return pa.table(
        {
            "key": pa.concat_arrays(keys),
            "change": pa.array(np.repeat(_ORDER, [changed, len(added), len(removed)])),
            "a": pa.array(np.concatenate([a.index[ca], np.full(len(added), -1), a.index[removed]]).astype(np.int64)),
            "b": pa.array(np.concatenate([b.index[cb], b.index[added], np.full(len(removed), -1)]).astype(np.int64)),
            "columns": pa.ListArray.from_arrays(pa.array(offsets), pa.array(cols.astype(np.int16), pa.int16())),
            "similarity": pa.nulls(changed + len(added) + len(removed), pa.float32()),
        }
    )

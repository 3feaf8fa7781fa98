"""Reading the changed shards of both versions: pairs matched locally, everything else into hash partitions.

Every row group is read through the verified read path
(:class:`loaders.storage.shards.OpenShard`: bytes checked against the manifest, only
the key and compared columns decoded, the process-wide row-group cache left
alone), as tasks of the scan engine (:mod:`loaders.engine`: threads here, or
Ray tasks): one per pair of changed shards small enough to hold (the i-th
changed shard of A and the i-th of B, matched locally by :mod:`.local`), one
per range of row groups of the other changed shards. What a pair leaves over,
and every row of the ranges, become fragments (:mod:`.fragments`) split by key
hash into partitions. Partitions stay in memory when one is enough and are
spilled to Arrow files in a temporary directory otherwise, so memory is
bounded by the tasks in flight, ``flush_rows`` and one partition per matching
task, never by the table size. Results are the same whatever order tasks
finish in: partitions are put in row order before they are matched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pyarrow as pa

from ..catalog.version import DatasetVersion
from ..engine import Engine
from ..storage.shards import OpenShard, ShardInfo
from .fragments import Pieces, fragment, partition
from .local import Outcome, match_pair
from .schema import MatchPlan

__all__ = ["MatchPlan", "Partitions", "ScanResult", "scan"]

#: Rows of row groups one task of an unpaired shard reads (at least one row group).
RANGE_ROWS = 262_144


@dataclass
class ScanResult:
    """What scanning found besides the partitions: rows matched locally."""

    changed: list[pa.Table] = field(default_factory=list)
    unchanged: int = 0


@dataclass(frozen=True)
class PairTask:
    """Read a changed shard of A and one of B whole and match them locally."""

    a: ShardInfo
    a_where: str
    first_a: int
    b: ShardInfo
    b_where: str
    first_b: int
    columns: tuple[str, ...]
    plan: MatchPlan
    buckets: int


@dataclass(frozen=True)
class RangeTask:
    """Turn the rows of row groups ``[first_group, last_group)`` of one changed shard into partitioned fragments."""

    shard: ShardInfo
    where: str
    side: int
    first_group: int
    last_group: int
    first_row: int
    columns: tuple[str, ...]
    plan: MatchPlan
    buckets: int


def run_pair(task: PairTask) -> Outcome:
    """Task: both shards read whole (verified), matched locally."""
    left = _read_shard(task.a, task.a_where, list(task.columns))
    right = _read_shard(task.b, task.b_where, list(task.columns))
    return match_pair(left, right, task.first_a, task.first_b, task.plan, task.buckets)


def run_range(task: RangeTask) -> Outcome:
    """Task: every row of a range of row groups becomes a fragment, split by partition."""
    opened = OpenShard(task.shard, where=task.where, cache=False)
    pieces: Pieces = []
    first = task.first_row
    for group in range(task.first_group, task.last_group):
        rows = task.shard.row_groups[group]
        table = opened.read_row_group(group, columns=list(task.columns))
        pieces += partition(task.side, fragment(table, np.arange(first, first + rows, dtype=np.int64), task.side, task.plan), task.buckets)
        first += rows
    return Outcome(pieces)


def _read_shard(shard: ShardInfo, where: str, columns: list[str]) -> pa.Table:
    opened = OpenShard(shard, where=where, cache=False)
    groups = [opened.read_row_group(group, columns=columns) for group in range(len(shard.row_groups))]
    if groups:
        return pa.concat_tables(groups)
    return pa.schema([opened.metadata.schema.to_arrow_schema().field(c) for c in columns]).empty_table()


def scan(a: DatasetVersion, b: DatasetVersion, plan: MatchPlan, partitions: "Partitions", *, engine: Engine, pair_rows: int) -> ScanResult:
    """Read every changed shard once on ``engine``; match shard pairs of at most ``pair_rows`` rows each locally."""
    pairs = [
        (sa, sb)
        for sa, sb in zip(plan.a_shards, plan.b_shards)
        if max(a.shards[sa].rows, b.shards[sb].rows) <= pair_rows
        and (plan.key is not None or (bool(plan.compared) and a.shards[sa].rows == b.shards[sb].rows))
    ]
    paired_a, paired_b = {sa for sa, _ in pairs}, {sb for _, sb in pairs}
    columns = tuple(dict.fromkeys(([plan.key] if plan.key else []) + list(plan.compared)))
    tasks: list[PairTask | RangeTask] = [
        PairTask(
            a.shards[sa], a.where(sa), a.index_of(sa, 0), b.shards[sb], b.where(sb), b.index_of(sb, 0), columns, plan, partitions.buckets
        )
        for sa, sb in pairs
    ]
    labels = [f"{a.where(sa)} and {b.where(sb)}" for sa, sb in pairs]
    for side, version, shards in ((0, a, plan.a_shards), (1, b, plan.b_shards)):
        unpaired = [s for s in shards if s not in (paired_a if side == 0 else paired_b)]
        for task in _range_tasks(version, side, unpaired, columns, plan, partitions.buckets):
            tasks.append(task)
            labels.append(task.where)
    result = ScanResult()
    for _, done in engine.run(_run_task, tasks, labels=labels, work="cpu"):
        partitions.add(done.pieces)
        result.unchanged += done.unchanged
        if done.changed is not None and done.changed.num_rows:
            result.changed.append(done.changed)
    return result


def _run_task(task: PairTask | RangeTask) -> Outcome:
    """Task: a shard pair or a range of row groups."""
    return run_pair(task) if isinstance(task, PairTask) else run_range(task)


def _range_tasks(
    version: DatasetVersion, side: int, shards: Sequence[int], columns: tuple[str, ...], plan: MatchPlan, buckets: int
) -> list[RangeTask]:
    """Ranges of about ``RANGE_ROWS`` rows of row groups of each unpaired shard."""
    out = []
    for shard in shards:
        info = version.shards[shard]
        first_row = version.index_of(shard, 0)
        start, rows = 0, 0
        for group, count in enumerate(info.row_groups):
            rows += count
            if rows >= RANGE_ROWS or group == len(info.row_groups) - 1:
                out.append(RangeTask(info, version.where(shard), side, start, group + 1, first_row, columns, plan, buckets))
                first_row += rows
                start, rows = group + 1, 0
    return out


class Partitions:
    """Per-side, per-partition fragments: in memory for a single partition, spilled to Arrow files otherwise."""

    def __init__(self, buckets: int, directory: str, *, flush_rows: int) -> None:
        self.buckets = buckets
        self.directory = directory
        self.flush_rows = flush_rows
        self.pieces: dict[tuple[int, int], list[pa.RecordBatch]] = {}
        self.files: dict[tuple[int, int], list[str]] = {}
        self.buffered = 0

    def add(self, pieces: Pieces) -> None:
        """Keep fragments; spill everything buffered once ``flush_rows`` rows are waiting (several partitions only)."""
        for side, bucket, batch in pieces:
            self.pieces.setdefault((side, bucket), []).append(batch)
            self.buffered += batch.num_rows
        if self.buckets > 1 and self.buffered >= self.flush_rows:
            self.flush()

    def flush(self) -> None:
        """Write each buffered partition piece to its own Arrow file."""
        for (side, bucket), batches in self.pieces.items():
            paths = self.files.setdefault((side, bucket), [])
            path = os.path.join(self.directory, f"{side}-{bucket}-{len(paths)}.arrow")
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, batches[0].schema) as writer:
                writer.write_table(pa.Table.from_batches(batches).combine_chunks())
            paths.append(path)
        self.pieces = {}
        self.buffered = 0

    def flush_all(self) -> None:
        """With several partitions, spill what is still buffered, so each partition is read from disk when matched."""
        if self.buckets > 1 and self.pieces:
            self.flush()

    def load(self, side: int, bucket: int) -> list[pa.RecordBatch]:
        """Every fragment of one side's partition (the spill directory is removed with everything in it at the end)."""
        batches: list[pa.RecordBatch] = []
        for path in self.files.get((side, bucket), []):
            with pa.OSFile(path, "rb") as source:
                batches += pa.ipc.open_file(source).read_all().to_batches()
        return batches + self.pieces.get((side, bucket), [])

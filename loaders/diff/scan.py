"""Reading the changed shards of both versions: pairs matched locally, everything else into hash partitions.

Every row group is read through the verified read path
(:class:`loaders.storage.shards.OpenShard`: bytes checked against the manifest, only
the key and compared columns decoded, the process-wide row-group cache left
alone) on a small thread pool. The i-th changed shard of A and the i-th of B
are read together and matched locally (:mod:`.local`) when both are small
enough to hold; the rows that leaves over, and every row of unpaired shards,
become fragments (:mod:`.fragments`) split by key hash into partitions.
Partitions stay in memory when one is enough and are spilled to Arrow files
in a temporary directory otherwise, so memory is bounded by the shard pairs
in flight, ``flush_rows`` and one partition, never by the table size.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..catalog.version import DatasetVersion
from ..storage.shards import OpenShard
from .fragments import Pieces, fragment, partition
from .local import Outcome, match_pair
from .schema import MatchPlan

__all__ = ["MatchPlan", "Partitions", "ScanResult", "default_workers", "scan"]


@dataclass
class ScanResult:
    """What scanning found besides the partitions: rows matched locally."""

    changed: list[pa.Table] = field(default_factory=list)
    unchanged: int = 0


def default_workers() -> int:
    """Threads used to read and hash row groups: the usable cores, at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def scan(a: DatasetVersion, b: DatasetVersion, plan: MatchPlan, partitions: "Partitions", *, workers: int, pair_rows: int) -> ScanResult:
    """Read every changed shard once; match shard pairs of at most ``pair_rows`` rows each locally."""
    pairs = [
        (sa, sb)
        for sa, sb in zip(plan.a_shards, plan.b_shards)
        if max(a.shards[sa].rows, b.shards[sb].rows) <= pair_rows
        and (plan.key is not None or (bool(plan.compared) and a.shards[sa].rows == b.shards[sb].rows))
    ]
    paired_a, paired_b = {sa for sa, _ in pairs}, {sb for _, sb in pairs}
    tasks = itertools.chain(
        _pair_tasks(a, b, pairs, plan, partitions.buckets),
        _side_tasks(a, 0, [s for s in plan.a_shards if s not in paired_a], plan, partitions.buckets),
        _side_tasks(b, 1, [s for s in plan.b_shards if s not in paired_b], plan, partitions.buckets),
    )
    result = ScanResult()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="batchscope-diff") as pool:
        for done in _bounded_map(pool, tasks, window=workers + 1):
            partitions.add(done.pieces)
            result.unchanged += done.unchanged
            if done.changed is not None and done.changed.num_rows:
                result.changed.append(done.changed)
    return result


_Task = Callable[[], Outcome]


def _columns(plan: MatchPlan) -> list[str]:
    return list(dict.fromkeys(([plan.key] if plan.key else []) + list(plan.compared)))


def _side_tasks(version: DatasetVersion, side: int, shards: Sequence[int], plan: MatchPlan, buckets: int) -> Iterator[_Task]:
    """One task per row group of unpaired shards: every row becomes a fragment."""
    columns = _columns(plan)
    for shard in shards:
        info = version.shards[shard]
        opened = OpenShard(info, where=version.where(shard))
        first = version.index_of(shard, 0)
        for group, rows in enumerate(info.row_groups):

            def task(opened: OpenShard = opened, group: int = group, first: int = first, rows: int = rows) -> Outcome:
                table = opened.read_row_group(group, columns=columns)
                return Outcome(partition(side, fragment(table, np.arange(first, first + rows, dtype=np.int64), side, plan), buckets))

            yield task
            first += rows


def _pair_tasks(a: DatasetVersion, b: DatasetVersion, pairs: Sequence[tuple[int, int]], plan: MatchPlan, buckets: int) -> Iterator[_Task]:
    """One task per shard pair: both shards read whole, matched locally."""
    columns = _columns(plan)
    for sa, sb in pairs:

        def task(sa: int = sa, sb: int = sb) -> Outcome:
            left = _read_shard(a, sa, columns)
            right = _read_shard(b, sb, columns)
            return match_pair(left, right, a.index_of(sa, 0), b.index_of(sb, 0), plan, buckets)

        yield task


def _read_shard(version: DatasetVersion, shard: int, columns: list[str]) -> pa.Table:
    opened = OpenShard(version.shards[shard], where=version.where(shard))
    groups = [opened.read_row_group(group, columns=columns) for group in range(len(version.shards[shard].row_groups))]
    return pa.concat_tables(groups) if groups else pa.schema([version.schema.field(c) for c in columns]).empty_table()


def _bounded_map(pool: ThreadPoolExecutor, tasks: Iterable[_Task], *, window: int) -> Iterator[Outcome]:
    """Run tasks on the pool with at most ``window`` in flight, yielding results in task order."""
    pending: deque[Future[Outcome]] = deque()
    try:
        for task in tasks:
            pending.append(pool.submit(task))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


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

    def load(self, side: int, bucket: int) -> list[pa.RecordBatch]:
        """Every fragment of one side's partition (and forget them)."""
        batches: list[pa.RecordBatch] = []
        for path in self.files.pop((side, bucket), []):
            with pa.OSFile(path, "rb") as source:
                batches += pa.ipc.open_file(source).read_all().to_batches()
            os.remove(path)
        return batches + self.pieces.pop((side, bucket), [])

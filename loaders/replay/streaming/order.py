"""One epoch of one launch, as each rank's ``DataLoader`` yields it: Streaming's own ``generate_work`` (which calls its
partitioning and shuffling functions) gives every (node, rank, worker) its samples; each worker batches its own
samples; the ``DataLoader`` takes one batch from each worker in turn, skipping workers that have run out.

The result is one array per epoch, ``table[rank, batch]``: column 0 the ``DataLoader`` worker that produced the
batch, columns ``1..batch_size`` its global sample ids (``-1`` past the end of a short batch).

>>> table = dataloader_order(np.arange(12).reshape(1, 1, 2, 2, 3), batch_size=3, drop_last=False)
>>> table[0].tolist()  # worker 0's first batch, worker 1's first, worker 0's second, worker 1's second
[[0, 0, 1, 2], [1, 6, 7, 8], [0, 3, 4, 5], [1, 9, 10, 11]]
"""

from __future__ import annotations

import numpy as np

from ...errors import InvalidPlan
from .library import Streaming
from .settings import Launch
from .source import DatasetView


def dataloader_order(work: np.ndarray, *, batch_size: int, drop_last: bool) -> np.ndarray:
    """Turn Streaming's epoch work, shaped (nodes, ranks per node, workers per rank, batches per worker, batch size)
    with ``-1`` for no sample, into what each rank's ``DataLoader`` yields in order (see the module docstring).

    A worker yields its samples in order, skipping ``-1``; the ``DataLoader`` collates ``batch_size`` consecutive ones
    (the last batch shorter, or dropped with ``drop_last``), and takes batches round-robin from the workers that
    still have one, in worker order.
    """
    nodes, ranks_per_node, workers = work.shape[:3]
    ranks = nodes * ranks_per_node
    flat = work.reshape(ranks, workers, -1)
    dtype = np.int32 if flat.size == 0 or int(flat.max(initial=0)) < np.iinfo(np.int32).max else np.int64
    per_rank: list[np.ndarray] = []
    for rank in range(ranks):
        batches, keys = [], []
        for worker in range(workers):
            ids = flat[rank, worker]
            ids = ids[ids >= 0]
            count = len(ids) // batch_size if drop_last else -(-len(ids) // batch_size)
            padded = np.full(count * batch_size, -1, dtype)
            taken = min(len(ids), count * batch_size)
            padded[:taken] = ids[:taken]
            rows = np.empty((count, batch_size + 1), dtype)
            rows[:, 0] = worker
            rows[:, 1:] = padded.reshape(count, batch_size)
            batches.append(rows)
            keys.append(np.arange(count, dtype=np.int64) * workers + worker)
        order = np.argsort(np.concatenate(keys), kind="stable")
        per_rank.append(np.concatenate(batches)[order])
    steps = {len(rows) for rows in per_rank}
    if len(steps) > 1:
        counts = ", ".join(f"rank {rank}: {len(rows)}" for rank, rows in enumerate(per_rank))
        raise InvalidPlan(
            f"Streaming gives the ranks different numbers of batches in this epoch ({counts}), so a step has no single meaning"
        )
    return np.stack(per_rank) if per_rank else np.empty((0, 0, batch_size + 1), dtype)


def epoch_table(lib: Streaming, view: DatasetView, launch: Launch, *, epoch: int, drop_first: int, drop_last: bool) -> np.ndarray:
    """What each rank of ``launch`` reads in ``epoch`` after the epoch's first ``drop_first`` samples (a resumption),
    computed by Streaming's ``generate_work`` for the launch's physical world; refusals of Streaming (a world its
    partitioner cannot produce, a stream too small for its batching method) become one line naming the launch."""
    world = lib.World(launch.nodes, launch.ranks_per_node, launch.workers_per_rank, 0)
    try:
        work = lib.generate_work(view.batching_method, view, world, epoch, drop_first)
    except (ValueError, RuntimeError, TypeError) as exc:
        message = " ".join(str(part) for part in exc.args) if exc.args else type(exc).__name__
        raise InvalidPlan(
            f"Streaming cannot plan epoch {epoch} on {launch.nodes} node(s) × {launch.ranks_per_node} rank(s) × "
            f"{launch.workers_per_rank} worker(s) (num_canonical_nodes={view.num_canonical_nodes}, partition_algo={view.partition_algo}, "
            f"batching_method={view.batching_method}): {message}"
        ) from exc
    return dataloader_order(np.asarray(work), batch_size=launch.batch_size, drop_last=drop_last)

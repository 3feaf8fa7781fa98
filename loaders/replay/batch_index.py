"""Batch indexes: the dataset positions each rank's batches hold, epoch by epoch, as a framework's sampler yields them.

Samplers such as torch's ``DistributedSampler`` or accelerate's ``BatchSamplerShard`` are O(N) iterators: reaching
step ``s`` means drawing every batch before it. A batch index draws each epoch once, with the framework's own
sampler, and stores what every rank got as arrays, so any ``(epoch, rank, batch)`` is a slice (O(batch), flat in the
step) and any dataset position can be found back (binary search in the sorted copy):

- ``e{E}.positions`` — ``(ranks, longest)`` int64: the positions a rank consumed in epoch ``E`` in order (-1 after
  its last);
- ``e{E}.offsets`` — ``(ranks, batches + 1)`` int64: where each batch of a rank starts in its row (ranks with fewer
  batches repeat their end), and ``e{E}.batches`` the number of batches of each rank;
- ``e{E}.sorted`` and ``e{E}.slots`` — every position of the epoch sorted, and its slot ``rank * longest + offset``.

>>> import tempfile
>>> from loaders.replay.arrays import ArrayStore
>>> index = BatchIndex(ArrayStore(tempfile.mkdtemp(), recorded=None), epochs=1,
...                    draw=lambda epoch: [[[3, 1], [0]], [[2, 4], [1]]])
>>> index.batch(0, 1, 0, 2).tolist()
[2, 4, 1]
>>> index.find(0, 1)
[(0, 0, 1), (1, 1, 2)]
"""

from __future__ import annotations

import itertools
from typing import Callable, Protocol, Sequence

import numpy as np

#: ``draw(epoch)`` → per rank, its batches in order, each a list of dataset positions.
Draw = Callable[[int], Sequence[Sequence[Sequence[int]]]]


class Positions:
    """``n`` positions as a map-style dataset or a source (``positions[i] == i``): what samplers and pipelines see of a
    dataset is only its length, so drawing over positions gives exactly the indices they ask the data for."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


class Arrays(Protocol):
    def array(self, name: str, build: Callable[[], np.ndarray]) -> np.ndarray: ...


def _epoch_arrays(batches: Sequence[Sequence[Sequence[int]]]) -> dict[str, np.ndarray]:
    """The stored arrays of one epoch from every rank's batches."""
    ranks = len(batches)
    sizes = [np.fromiter((len(b) for b in rank), dtype=np.int64, count=len(rank)) for rank in batches]
    lengths = [int(s.sum()) for s in sizes]
    longest = max(lengths) if lengths else 0
    counts = np.asarray([len(rank) for rank in batches], dtype=np.int64)
    most = int(counts.max()) if ranks else 0
    positions = np.full((ranks, longest), -1, dtype=np.int64)
    offsets = np.zeros((ranks, most + 1), dtype=np.int64)
    for r, rank in enumerate(batches):
        positions[r, : lengths[r]] = np.fromiter(itertools.chain.from_iterable(rank), dtype=np.int64, count=lengths[r])
        ends = np.cumsum(sizes[r])
        offsets[r, 1 : len(rank) + 1] = ends
        offsets[r, len(rank) + 1 :] = lengths[r]
    slots = np.flatnonzero(positions.reshape(-1) >= 0)
    values = positions.reshape(-1)[slots]
    order = stable_order(values)
    return {"positions": positions, "offsets": offsets, "batches": counts, "sorted": values[order], "slots": slots[order]}


def stable_order(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` of non-negative integers, by counting: O(n + max) instead of a merge sort
    (positions repeat only where a sampler pads, so only those few are sorted by comparison).

    >>> stable_order(np.array([3, 1, 3, 0, 1])).tolist()
    [3, 1, 4, 0, 2]
    """
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    counts = np.bincount(values)
    starts = np.cumsum(counts) - counts
    occurrence = np.zeros(len(values), dtype=np.int64)
    repeated = np.flatnonzero(counts[values] > 1)
    if len(repeated):
        sub = values[repeated]
        by_value = np.argsort(sub, kind="stable")
        ordered = sub[by_value]
        first = np.r_[True, ordered[1:] != ordered[:-1]]
        at = np.arange(len(ordered))
        occurrence[repeated[by_value]] = at - np.maximum.accumulate(np.where(first, at, 0))
    order = np.empty(len(values), dtype=np.int64)
    order[starts[values] + occurrence] = np.arange(len(values), dtype=np.int64)
    return order


class BatchIndex:
    """Every rank's batches for ``epochs`` epochs, drawn by ``draw(epoch)`` once and kept in ``arrays``."""

    def __init__(self, arrays: Arrays, *, epochs: int, draw: Draw, prefix: str = "") -> None:
        self.arrays = arrays
        self.epochs = epochs
        self.draw = draw
        self.prefix = prefix
        self._drawn: dict[int, dict[str, np.ndarray]] = {}

    def _array(self, epoch: int, part: str) -> np.ndarray:
        def build() -> np.ndarray:
            if epoch not in self._drawn:
                self._drawn[epoch] = _epoch_arrays(self.draw(epoch))
            return self._drawn[epoch][part]

        return self.arrays.array(f"{self.prefix}e{epoch}.{part}", build)

    def prepare(self) -> None:
        """Draw (or check) every epoch now, so that later lookups only slice."""
        for epoch in range(self.epochs):
            for part in ("positions", "offsets", "batches", "sorted", "slots"):
                self._array(epoch, part)
            self._drawn.pop(epoch, None)

    def batches(self, epoch: int, rank: int) -> int:
        """How many batches ``rank`` drew in ``epoch``."""
        return int(self._array(epoch, "batches")[rank])

    def batch(self, epoch: int, rank: int, first: int, stop: int) -> np.ndarray:
        """The positions of batches ``[first, stop)`` of ``rank`` in ``epoch``, in order."""
        offsets = self._array(epoch, "offsets")[rank]
        return np.asarray(self._array(epoch, "positions")[rank, offsets[first] : offsets[stop]])

    def offset(self, epoch: int, rank: int, batch: int) -> int:
        """Where batch ``batch`` of ``rank`` starts among its epoch's positions."""
        return int(self._array(epoch, "offsets")[rank, batch])

    def find(self, epoch: int, position: int) -> list[tuple[int, int, int]]:
        """Every ``(rank, batch, offset in the rank's epoch)`` that drew ``position`` in ``epoch`` (padding samplers
        draw some twice)."""
        values = self._array(epoch, "sorted")
        low, high = np.searchsorted(values, position, "left"), np.searchsorted(values, position, "right")
        if low == high:
            return []
        longest = self._array(epoch, "positions").shape[1]
        offsets = self._array(epoch, "offsets")
        found = []
        for slot in np.asarray(self._array(epoch, "slots")[low:high]).tolist():
            rank, offset = divmod(int(slot), longest)
            batch = int(np.searchsorted(offsets[rank], offset, "right")) - 1
            found.append((rank, batch, offset))
        return sorted(found)

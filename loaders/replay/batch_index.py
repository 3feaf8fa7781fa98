"""Batch indexes: the dataset positions each rank's batches hold, epoch by epoch, as a framework's sampler yields them.

Samplers such as torch's ``DistributedSampler`` or accelerate's ``BatchSamplerShard`` are O(N) iterators: reaching
step ``s`` means drawing every batch before it. A batch index draws each epoch once, with the framework's own
sampler, and stores what every rank got as arrays, so any ``(epoch, rank, batch)`` is a slice (O(batch), flat in the
step) and any dataset position can be found back (binary search in the sorted copy):

- ``e{E}.positions`` — ``(ranks, longest)`` int32 (int64 past 2**31 positions): the positions a rank consumed in
  epoch ``E`` in order (-1 after its last);
- ``e{E}.offsets`` — ``(ranks, batches + 1)`` int32 (or int64): where each batch of a rank starts in its row (ranks
  with fewer batches repeat their end), and ``e{E}.batches`` the number of batches of each rank;
- ``e{E}.sorted`` and ``e{E}.slots`` — every position of the epoch sorted, and its slot ``rank * longest + offset``
  (built from ``positions`` the first time a position is looked for: attaching draws and keeps only the above).

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
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, Union

import numpy as np


@dataclass(frozen=True)
class RankDraw:
    """One rank's epoch as arrays: every position it drew, in order, and the size of each of its batches."""

    positions: np.ndarray
    sizes: np.ndarray

    @classmethod
    def of_batches(cls, batches: Sequence[Sequence[int]]) -> "RankDraw":
        """The draw of a rank whose batches are lists of positions (what a batch sampler yields)."""
        sizes = np.fromiter((len(b) for b in batches), dtype=np.int64, count=len(batches))
        positions = np.fromiter(itertools.chain.from_iterable(batches), dtype=np.int64, count=int(sizes.sum()))
        return cls(positions, sizes)

    @classmethod
    def batched(cls, positions: np.ndarray, batch_size: int, *, drop_last: bool) -> "RankDraw":
        """A sampler's ``positions`` cut into consecutive batches of ``batch_size`` as torch's ``BatchSampler`` cuts them:
        the last batch is short, or dropped with ``drop_last``.

        >>> RankDraw.batched(np.arange(5), 2, drop_last=False).sizes.tolist()
        [2, 2, 1]
        >>> RankDraw.batched(np.arange(5), 2, drop_last=True).positions.tolist()
        [0, 1, 2, 3]
        """
        full, rest = divmod(len(positions), batch_size)
        sizes = np.full(full, batch_size, dtype=np.int64)
        if rest and drop_last:
            positions = positions[: full * batch_size]
        elif rest:
            sizes = np.append(sizes, rest)
        return cls(np.asarray(positions, dtype=np.int64), sizes)


#: ``draw(epoch)`` → per rank, its batches in order: a list of dataset positions per batch, or a :class:`RankDraw`.
Draw = Callable[[int], Sequence[Union[RankDraw, Sequence[Sequence[int]]]]]


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
    def array(self, name: str, build: Callable[[], np.ndarray], *, derived_from: tuple[str, ...] = ()) -> np.ndarray: ...


def _epoch_arrays(drawn: Sequence[RankDraw | Sequence[Sequence[int]]]) -> dict[str, np.ndarray]:
    """The stored arrays of one epoch from every rank's batches."""
    ranks = [d if isinstance(d, RankDraw) else RankDraw.of_batches(d) for d in drawn]
    lengths = [len(d.positions) for d in ranks]
    longest = max(lengths) if lengths else 0
    counts = np.asarray([len(d.sizes) for d in ranks], dtype=np.int64)
    most = int(counts.max()) if ranks else 0
    largest = max((int(d.positions.max()) for d in ranks if len(d.positions)), default=0)
    positions = np.full((len(ranks), longest), -1, dtype=_index_dtype(largest))
    offsets = np.zeros((len(ranks), most + 1), dtype=_index_dtype(longest))
    for r, rank in enumerate(ranks):
        positions[r, : lengths[r]] = rank.positions
        offsets[r, 1 : len(rank.sizes) + 1] = np.cumsum(rank.sizes)
        offsets[r, len(rank.sizes) + 1 :] = lengths[r]
    return {"positions": positions, "offsets": offsets, "batches": counts}


def _index_dtype(largest: int) -> type:
    """int32 for values that fit (half the bytes to write, hash and page in), else int64.

    >>> _index_dtype(2**31 - 1).__name__, _index_dtype(2**31).__name__
    ('int32', 'int64')
    """
    return np.int32 if largest <= np.iinfo(np.int32).max else np.int64


def _inverse_arrays(positions: np.ndarray) -> dict[str, np.ndarray]:
    """``sorted`` and ``slots`` of one epoch (every position drawn, sorted, and where it sits) from its ``positions``."""
    slots = np.flatnonzero(positions.reshape(-1) >= 0)
    values = positions.reshape(-1)[slots]
    order = stable_order(values)
    return {"sorted": values[order], "slots": slots[order]}


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


#: The arrays of an epoch drawn at once (:meth:`BatchIndex.prepare`), and those built from them when first asked for.
FORWARD_PARTS = ("positions", "offsets", "batches")
INVERSE_PARTS = ("sorted", "slots")


class BatchIndex:
    """Every rank's batches for ``epochs`` epochs, drawn by ``draw(epoch)`` once and kept in ``arrays``."""

    def __init__(self, arrays: Arrays, *, epochs: int, draw: Draw, prefix: str = "") -> None:
        self.arrays = arrays
        self.epochs = epochs
        self.draw = draw
        self.prefix = prefix
        self._drawn: dict[int, dict[str, np.ndarray]] = {}
        self._inverse: dict[int, dict[str, np.ndarray]] = {}

    def _name(self, epoch: int, part: str) -> str:
        return f"{self.prefix}e{epoch}.{part}"

    def _array(self, epoch: int, part: str) -> np.ndarray:
        if part in INVERSE_PARTS:  # computed from the kept positions when first asked for: nothing is drawn again
            positions = self._array(epoch, "positions")

            def inverse() -> np.ndarray:
                found = self._inverse.setdefault(epoch, {})
                if part not in found:
                    found.update(_inverse_arrays(np.asarray(positions)))
                return found.pop(part)

            return self.arrays.array(self._name(epoch, part), inverse, derived_from=(self._name(epoch, "positions"),))

        def build() -> np.ndarray:
            if epoch not in self._drawn:
                self._drawn[epoch] = _epoch_arrays(self.draw(epoch))
            return self._drawn[epoch][part]

        return self.arrays.array(self._name(epoch, part), build)

    def prepare(self) -> None:
        """Draw (or check) every epoch now, so that later lookups only slice. The inverse arrays :meth:`find` reads
        are built from the kept positions the first time it is asked (``where``), never as part of attaching."""
        for epoch in range(self.epochs):
            for part in FORWARD_PARTS:
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

"""Global order: (stream, draw) → record, as pure arithmetic over keyed permutations.

One source of ``N`` records is cut into chunks of ``C`` consecutive records
(a few row groups, so a reader touches each row group about once). Each epoch
lays the chunks out in a keyed random order (the partial tail chunk, if any,
last): that is the epoch's sequence of ``N`` records. The sequence is split
into ``K`` contiguous, equal (±1) parts, one per canonical stream, and inside
its part a stream shuffles records within windows of ``w`` chunks. Every step
is a fixed slice of every stream, so the global batch never depends on how
many ranks share the streams, and all streams move through epochs in step.
Everything is O(1) arithmetic: no index arrays, no replay, no build step.

A source with fewer records than streams is laid out over ``ceil(K/N)``
consecutive epochs at a time, so every stream always has records to draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .permutation import permutation


@dataclass(frozen=True)
class SourceOrder:
    """The shuffled, streamed order of one source's records."""

    rows: int
    chunk: int
    streams: int
    window: int
    seed: int
    source: int
    shuffle: bool = True
    stagger: bool = True

    def __post_init__(self) -> None:
        if self.rows <= 0 or self.chunk <= 0 or self.streams <= 0 or self.window <= 0:
            raise ValueError(f"invalid source order {self}")

    @property
    def full_chunks(self) -> int:
        return self.rows // self.chunk

    @property
    def repeats(self) -> int:
        """Epochs laid out together (1 unless the source has fewer records than streams)."""
        return -(-self.streams // self.rows)

    def part(self, stream: int) -> tuple[int, int]:
        """Positions ``[lo, hi)`` of each (super-)epoch sequence that ``stream`` reads."""
        span = self.repeats * self.rows
        return stream * span // self.streams, (stream + 1) * span // self.streams

    def window_of(self, stream: int, j: Any, length: int) -> tuple[Any, Any]:
        """``(start, size)`` of the shuffle window holding position ``j`` of ``stream``'s part (ints or arrays).

        Windows are ``window × chunk`` positions wide, and stream ``k``'s grid
        is shifted by ``k/K`` of a width (its first window is shorter), so the
        streams of a reader move to new row groups at different steps instead
        of all at once: decoding stays spread evenly over the run. (Runs created
        before the shift keep an unshifted grid: ``stagger=False``.)
        """
        width = self.window * self.chunk
        offset = stream * width // self.streams if self.stagger else 0
        shifted = j + offset
        start = shifted // width * width - offset
        end = start + width
        if isinstance(start, np.ndarray):
            start = np.maximum(start, 0)
            end = np.minimum(end, length)
        else:
            start, end = max(start, 0), min(end, length)
        return start, end - start

    def epoch_record(self, epoch: int, position: int) -> int:
        """The record at ``position`` of ``epoch``'s chunk-shuffled sequence."""
        slot, offset = divmod(position, self.chunk)
        if not self.shuffle or slot >= self.full_chunks:
            return position
        return permutation(self.full_chunks, self.seed, "chunks", self.source, epoch)(slot) * self.chunk + offset

    def record(self, stream: int, draw: int) -> tuple[int, int]:
        """``(record index, epoch)`` of the ``draw``-th record ``stream`` takes from this source."""
        lo, hi = self.part(stream)
        length = hi - lo
        layout, j = divmod(draw, length)
        if self.shuffle:
            start, size = self.window_of(stream, j, length)
            j = start + permutation(size, self.seed, "window", self.source, stream, layout, start)(j - start)
        position = lo + j
        epoch = layout * self.repeats + position // self.rows
        return self.epoch_record(epoch, position % self.rows), epoch

    def records(self, stream: int, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized :meth:`record`: ``(record indices, epochs)`` for many draws of one stream."""
        draws = np.asarray(draws, dtype=np.int64)
        lo, hi = self.part(stream)
        length = hi - lo
        layout, j = np.divmod(draws, length)
        if self.shuffle:
            starts, sizes = self.window_of(stream, j, length)
            for lay, begin, size in set(zip(layout.tolist(), starts.tolist(), sizes.tolist())):
                mask = (layout == lay) & (starts == begin)
                j[mask] = begin + permutation(size, self.seed, "window", self.source, stream, lay, begin).map(j[mask] - begin)
        position = lo + j
        epochs = layout * self.repeats + position // self.rows
        within = position % self.rows
        slot, offset = np.divmod(within, self.chunk)
        records = within.copy()
        if self.shuffle and self.full_chunks:
            full = slot < self.full_chunks
            for epoch in set(epochs[full].tolist()):
                mask = full & (epochs == epoch)
                chunks = permutation(self.full_chunks, self.seed, "chunks", self.source, epoch).map(slot[mask])
                records[mask] = chunks * self.chunk + offset[mask]
        return records, epochs

"""Read formats 3–4's order of one source: chunk-aligned stream parts sized by each stream's draw rate.

As in :mod:`loaders.order`, a source of ``N`` records is cut into chunks
(slots) of ``C`` consecutive records, laid out per epoch in a keyed random
order (a partial tail chunk last). Every stream's part of that layout is sized
by how many times per mixture cycle the stream draws from the source (streams
that never draw from it get none), so all streams still move through epochs in
step. Inside its part a stream shuffles records within windows of ``w``
chunks, staggered per stream. When a source has fewer records (or, aligned,
fewer slots) than drawing streams, ``repeats`` consecutive epochs are laid out
together. Everything is O(1) arithmetic.

``aligned`` parts and windows are runs of *whole* slots, so token counts per
slot are enough to find a packed sequence (see :mod:`loaders.order.packing`); packed
plans use them. Unaligned parts are split at record granularity (equal ±1 for
equal rates), which keeps epochs exact for unpacked plans. ``balanced`` aligned parts
(read format 4) are cut where their *records*, not their slots, are closest to the
rates' shares: an epoch's partial last chunk then joins a part that is a chunk short,
so streams that stop at their epoch boundary finish close together.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .permutation import permutation


def slot_shares(rates: Sequence[int], slots: int) -> list[int]:
    """Slots per stream: one for each drawing stream, the rest by largest remainder of ``rates``.

    >>> slot_shares([3, 0, 1], 5)
    [3, 0, 2]
    """
    drawing = [r > 0 for r in rates]
    base = [1 if d else 0 for d in drawing]
    spare = slots - sum(base)
    total = sum(rates)
    exact = [spare * r / total for r in rates]
    shares = [b + int(e) for b, e in zip(base, exact)]
    order = sorted(range(len(rates)), key=lambda i: (-(exact[i] - int(exact[i])), i))
    for i in order[: slots - sum(shares)]:
        shares[i] += 1
    return shares


def record_balanced_bounds(rates: Sequence[int], slot_records: np.ndarray) -> list[int]:
    """Slot boundaries of the streams' parts: each cut at the slot boundary nearest to where the records reach the
    rates' shares, every drawing stream at least one slot, streams that never draw none.

    >>> record_balanced_bounds([1, 1], np.asarray([4, 4, 4, 1]))  # the partial last slot joins the short part
    [0, 2, 4]
    """
    cumulative = np.concatenate([[0], np.cumsum(slot_records)])
    total, slots, rate_total = int(cumulative[-1]), len(slot_records), sum(rates)
    left = sum(1 for r in rates if r > 0)
    bounds, acc = [0], 0
    for rate in rates:
        if rate == 0:
            bounds.append(bounds[-1])
            continue
        left -= 1
        acc += rate
        target = total * acc / rate_total
        cut = int(np.searchsorted(cumulative, target))
        if cut > 0 and (cut > slots or target - cumulative[cut - 1] <= cumulative[cut] - target):
            cut -= 1
        bounds.append(min(max(cut, bounds[-1] + 1), slots - left))
    return bounds


@dataclass(frozen=True)
class LaneOrder:
    """The shuffled, streamed order of one source's records under read formats 3–4."""

    rows: int
    chunk: int
    rates: tuple[int, ...]
    window: int
    seed: int
    source: int
    shuffle: bool = True
    aligned: bool = False
    balanced: bool = False
    _bounds: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _repeats: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.rows <= 0 or self.chunk <= 0 or self.window <= 0 or not any(self.rates):
            raise ValueError(f"invalid source order {self}")
        drawing = sum(1 for r in self.rates if r > 0)
        object.__setattr__(self, "_repeats", -(-drawing // (self.slots if self.aligned else self.rows)))
        if self.aligned and self.balanced:
            epoch = np.minimum(self.chunk, self.rows - np.arange(self.slots, dtype=np.int64) * self.chunk)  # records per slot
            bounds = record_balanced_bounds(self.rates, np.tile(epoch, self.repeats))
            object.__setattr__(self, "_bounds", tuple(bounds))
            return
        units = self.slots if self.aligned else self.rows
        shares = slot_shares(self.rates, self.repeats * units)
        object.__setattr__(self, "_bounds", (0, *itertools.accumulate(shares)))

    @property
    def slots(self) -> int:
        """Chunks per epoch (the last may be partial)."""
        return -(-self.rows // self.chunk)

    @property
    def full_chunks(self) -> int:
        return self.rows // self.chunk

    @property
    def streams(self) -> int:
        return len(self.rates)

    @property
    def repeats(self) -> int:
        """Epochs laid out together (1 unless the source has fewer slots than drawing streams)."""
        return self._repeats

    # -- slots and positions of a layout ----------------------------------------------------
    def slot_range(self, stream: int) -> tuple[int, int]:
        """Slots ``[lo, hi)`` of each layout that ``stream`` reads (aligned parts; empty for a stream that never draws)."""
        assert self.aligned, "only aligned parts are whole slots"
        return self._bounds[stream], self._bounds[stream + 1]

    def slot_start(self, slot: np.ndarray | int) -> np.ndarray | int:
        """Position in the layout's record sequence where ``slot`` starts (``slot`` may equal the layout's end)."""
        epoch, within = np.divmod(slot, self.slots) if isinstance(slot, np.ndarray) else divmod(slot, self.slots)
        return epoch * self.rows + np.minimum(within * self.chunk, self.rows)

    def slot_of(self, position: np.ndarray) -> np.ndarray:
        """The slot holding each layout position."""
        epoch, within = np.divmod(position, self.rows)
        return epoch * self.slots + within // self.chunk

    def part(self, stream: int) -> tuple[int, int]:
        """Positions ``[lo, hi)`` of each layout's record sequence that ``stream`` reads."""
        lo, hi = self._bounds[stream], self._bounds[stream + 1]
        if self.aligned:
            return int(self.slot_start(lo)), int(self.slot_start(hi))
        return lo, hi

    def slot_windows(self, stream: int) -> np.ndarray:
        """Slot boundaries of ``stream``'s shuffle windows (aligned): ``w`` slots wide, staggered by ``k/K`` of a width."""
        lo, hi = self.slot_range(stream)
        return _grid(lo, hi, self.window, stream * self.window // self.streams)

    def windows(self, stream: int) -> np.ndarray:
        """Position boundaries of ``stream``'s shuffle windows: ``w`` chunks wide, staggered by ``k/K`` of a width."""
        if self.aligned:
            return np.asarray(self.slot_start(self.slot_windows(stream)), dtype=np.int64)
        lo, hi = self.part(stream)
        width = self.window * self.chunk
        return _grid(lo, hi, width, stream * width // self.streams)

    def window_of(self, stream: int, position: int) -> tuple[int, int]:
        """``(begin, end)``: the shuffle window of ``stream``'s part holding layout ``position`` (one of :meth:`windows`'
        cells, found by arithmetic when parts are cut at record granularity)."""
        if self.aligned:
            starts = _window_starts(self, stream)
            w = bisect.bisect_right(starts, position) - 1
            return starts[w], starts[w + 1]
        lo, hi = self._bounds[stream], self._bounds[stream + 1]
        width = self.window * self.chunk
        first = lo + width - stream * width // self.streams  # the first boundary after lo (the grid is staggered)
        if position < first:
            return lo, min(first, hi)
        begin = first + (position - first) // width * width
        return begin, min(begin + width, hi)

    def chunk_of_slot(self, layout: int, slot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(epoch, chunk)`` that each slot of ``layout`` holds."""
        slot = np.asarray(slot, dtype=np.int64)
        epoch_in_layout, within = np.divmod(slot, self.slots)
        epochs = layout * self.repeats + epoch_in_layout
        chunks = within.copy()
        if self.shuffle and self.full_chunks:
            full = within < self.full_chunks
            for epoch in np.unique(epochs[full]).tolist():
                mask = full & (epochs == epoch)
                chunks[mask] = permutation(self.full_chunks, self.seed, "chunks", self.source, epoch).map(within[mask])
        return epochs, chunks

    def layout_records(self, layout: int, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(record indices, epochs)`` at layout positions (before the window shuffle)."""
        positions = np.asarray(positions, dtype=np.int64)
        epoch_in_layout, within = np.divmod(positions, self.rows)
        slot, offset = np.divmod(within, self.chunk)
        epochs, chunks = self.chunk_of_slot(layout, epoch_in_layout * self.slots + slot)
        return chunks * self.chunk + offset, epochs

    def shuffled(self, stream: int, layout: int, window_start: int, window_end: int) -> np.ndarray:
        """Layout positions of the aligned window of slots ``[window_start, window_end)`` in the order ``stream`` reads them."""
        begin, end = int(self.slot_start(window_start)), int(self.slot_start(window_end))
        order = np.arange(begin, end, dtype=np.int64)
        if self.shuffle and end - begin > 1:
            order = begin + permutation(end - begin, self.seed, "window", self.source, stream, layout, begin).map(order - begin)
        return order

    # -- draws ---------------------------------------------------------------------------------
    def record(self, stream: int, draw: int) -> tuple[int, int]:
        """:meth:`records` for one draw, in plain integers (cheaper than numpy for a handful of draws)."""
        lo, hi = self.part(stream)
        layout, j = divmod(draw, hi - lo)
        position = lo + j
        if self.shuffle:
            begin, end = self.window_of(stream, position)
            position = begin + permutation(end - begin, self.seed, "window", self.source, stream, layout, begin)(position - begin)
        epoch_in_layout, within = divmod(position, self.rows)
        slot, offset = divmod(within, self.chunk)
        epoch = layout * self.repeats + epoch_in_layout
        if self.shuffle and slot < self.full_chunks:
            slot = permutation(self.full_chunks, self.seed, "chunks", self.source, epoch)(slot)
        return slot * self.chunk + offset, epoch

    def records(self, stream: int, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(record indices, epochs)`` of ``stream``'s ``draws``-th records from this source."""
        draws = np.asarray(draws, dtype=np.int64)
        lo, hi = self.part(stream)
        layout, j = np.divmod(draws, hi - lo)
        position = lo + j
        if self.shuffle:
            starts = self.windows(stream)
            which = np.searchsorted(starts, position, side="right") - 1
            for lay, w in set(zip(layout.tolist(), which.tolist())):
                mask = (layout == lay) & (which == w)
                begin, end = int(starts[w]), int(starts[w + 1])
                perm = permutation(end - begin, self.seed, "window", self.source, stream, lay, begin)
                position[mask] = begin + perm.map(position[mask] - begin)
        records = np.empty_like(position)
        epochs = np.empty_like(position)
        for lay in np.unique(layout).tolist():
            mask = layout == lay
            records[mask], epochs[mask] = self.layout_records(lay, position[mask])
        return records, epochs


@functools.lru_cache(maxsize=4096)
def _window_starts(order: LaneOrder, stream: int) -> tuple[int, ...]:
    return tuple(order.windows(stream).tolist())


def _grid(lo: int, hi: int, width: int, offset: int) -> np.ndarray:
    """Boundaries of ``[lo, hi)`` cut every ``width`` units, the grid shifted left by ``offset`` (first cell shorter)."""
    inner = np.arange(lo + width - offset, hi, width, dtype=np.int64)
    return np.concatenate([[lo], inner[inner > lo], [hi]]).astype(np.int64)

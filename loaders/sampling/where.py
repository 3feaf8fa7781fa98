"""Where was this read: a record's (step, rank, sample) in a run, per epoch, by inverting the read order.

The order is a chain of invertible maps (see :mod:`loaders.order.lane_order`,
:mod:`loaders.order`, :mod:`loaders.order.step_mixture`): record → slot of its
epoch's chunk layout (the chunk permutation's inverse) → the stream whose
part holds that position → the draw that lands there (the window
permutation's inverse) → the step and position of that draw (the mixture's
table, read backwards: :meth:`loaders.sampling.sampler.Sampler.counter_of`). Nothing scans the ledger or the steps: one epoch
costs a few permutation inversions. Packed runs add one more step: a
document's tokens fall in one or more sequences, found from the tokenized
shuffle window (lossless packing) or the packed block (fixed blocks) that
holds it, so one epoch may list several reads, or none (tokens dropped).

>>> reads = where_read(run, source=0, record=41)               # doctest: +SKIP
>>> [(r.epoch, r.step, r.rank, r.sample) for r in reads.reads]  # doctest: +SKIP
[(0, 3, 1, 2), (1, 17, 0, 5)]
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..errors import SampleNotFound
from ..order.lane_order import LaneOrder
from ..order.permutation import permutation
from ..order.source_order import SourceOrder
from .packer import Packer
from .plan import ResolvedSource
from .sampler import Sampler
from .world_sizes import WorldSizeSpan

#: Epochs listed per call unless the caller asks for another number.
EPOCHS_PER_CALL = 8


class LocatedRun(Protocol):
    """What :func:`where_read` needs of a run (a :class:`loaders.run.Run`, whose ``where`` calls it): its parts."""

    name: str
    sources: list[ResolvedSource]
    sampler: Sampler
    packer: Packer

    @property
    def total_steps(self) -> int: ...

    def world_size_history(self) -> list[WorldSizeSpan]: ...


@dataclass(frozen=True)
class Read:
    """One read of a record by a run: at ``step``, ``rank`` of ``world_size`` consumed it as its ``sample``-th sample."""

    run: str
    epoch: int
    step: int
    rank: int
    world_size: int
    sample: int
    position: int
    index: int


@dataclass
class WhereReads:
    """The reads of one record by one run over epochs ``[first_epoch, next_epoch or epochs)``."""

    run: str
    source: int
    record: int
    epochs: int
    first_epoch: int
    next_epoch: int | None
    reads: list[Read] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        """Distinct steps of the listed reads, ascending."""
        return sorted({r.step for r in self.reads})


# -- inverting the order of one source ---------------------------------------------------------------
def _layout_position(order: LaneOrder | SourceOrder, record: int, epoch: int) -> tuple[int, int]:
    """``(layout, position)``: where ``record`` of ``epoch`` sits in its layout's sequence (before window shuffles)."""
    layout, epoch_in_layout = divmod(epoch, order.repeats)
    slot, offset = divmod(record, order.chunk)
    if order.shuffle and slot < order.full_chunks:
        slot = permutation(order.full_chunks, order.seed, "chunks", order.source, epoch).inverse(slot)
    return layout, epoch_in_layout * order.rows + slot * order.chunk + offset


def _lane_draw(order: LaneOrder, layout: int, position: int) -> tuple[int, int]:
    """``(stream, n)``: read format 3's stream ``stream`` reads layout ``position`` as its ``n``-th draw of the source."""
    for stream in range(order.streams):
        lo, hi = order.part(stream)
        if lo <= position < hi:
            break
    else:  # the parts partition every layout, so this means a bug, never bad input
        raise AssertionError(f"layout position {position} is in no stream's part of source {order.source}")
    unshuffled = position
    if order.shuffle:
        assert not order.aligned, "aligned (lossless packed) windows are inverted from their layout plan"
        width = order.window * order.chunk
        begin, end = _cell(lo, hi, width, stream * width // order.streams, position)
        perm = permutation(end - begin, order.seed, "window", order.source, stream, layout, begin)
        unshuffled = begin + perm.inverse(position - begin)
    return stream, layout * (hi - lo) + unshuffled - lo


def _cell(lo: int, hi: int, width: int, offset: int, x: int) -> tuple[int, int]:
    """The cell holding ``x`` of ``[lo, hi)`` cut every ``width`` on a grid shifted left by ``offset`` (the first
    cell shorter): :func:`loaders.order.lane_order._grid` in O(1)."""
    first = lo + width - offset
    if x < first:
        return lo, min(first, hi)
    begin = first + (x - first) // width * width
    return begin, min(begin + width, hi)


def _source_draw(order: SourceOrder, layout: int, position: int) -> tuple[int, int]:
    """``(stream, n)`` for read formats 1 and 2 (equal parts, windows on the part's own grid)."""
    stream = next(k for k in range(order.streams) if order.part(k)[0] <= position < order.part(k)[1])
    lo, hi = order.part(stream)
    j = position - lo
    if order.shuffle:
        start, size = order.window_of(stream, j, hi - lo)
        j = start + permutation(size, order.seed, "window", order.source, stream, layout, start).inverse(j - start)
    return stream, layout * (hi - lo) + j


# -- the reads of one epoch, as stream counters of samples ------------------------------------------------
def _document(sampler: Sampler, source: int, record: int, epoch: int) -> tuple[int, int]:
    """``(stream, document counter)`` of ``record``'s read in ``epoch`` (unpacked and fixed-block runs)."""
    order = sampler.order(source)
    layout, position = _layout_position(order, record, epoch)
    if isinstance(order, LaneOrder):
        stream, n = _lane_draw(order, layout, position)
    else:
        stream, n = _source_draw(order, layout, position)
    return stream, sampler.counter_of(stream, source, n)


def _lossless_samples(sampler: Sampler, packer: Packer, source: int, record: int, epoch: int) -> tuple[int, list[int]]:
    """``(stream, sample counters)`` of the packed sequences holding ``record``'s tokens in ``epoch``."""
    order = sampler.lane_orders[source]
    layout, position = _layout_position(order, record, epoch)
    slot = int(order.slot_of(np.asarray([position]))[0])
    stream = next(k for k in range(order.streams) if order.rates[k] and order.slot_range(k)[0] <= slot < order.slot_range(k)[1])
    concat = packer.concat
    lane = concat.packers[(stream, source)]
    plan = lane.layout(layout)
    w = int(np.searchsorted(plan.windows, slot, side="right")) - 1
    start, end = int(plan.windows[w]), int(plan.windows[w + 1])
    d = int(np.flatnonzero(order.shuffled(stream, layout, start, end) == position)[0])
    starts = concat.document_starts(stream, source, layout, start, end)
    first = int(plan.token_starts[w]) + int(starts[d])
    length = int(starts[d + 1] - starts[d])
    if length == 0:
        return stream, []
    base = lane.first_sequence(layout)
    seq_len = lane.seq_len
    sequences = [base + q for q in range(first // seq_len, (first + length - 1) // seq_len + 1)]
    if lane.limit is not None:  # read format 4: the lane stopped after its epochs and never read these
        sequences = [n for n in sequences if n < lane.limit]
    return stream, [sampler.counter_of(stream, source, n) for n in sequences]


def _epoch_samples(run: LocatedRun, source: int, record: int, epoch: int) -> tuple[int, list[int]]:
    """``(stream, sample counters)``: the samples of ``stream`` that hold ``record`` in ``epoch``."""
    if run.packer.lossless:
        return _lossless_samples(run.sampler, run.packer, source, record, epoch)
    stream, document = _document(run.sampler, source, record, epoch)
    if run.packer.plan.pack is None:
        return stream, [document]
    return stream, run.packer.block_samples(stream, document)


# -- how many epochs a run reaches --------------------------------------------------------------------------
def epochs_reached(run: LocatedRun, source: int) -> int:
    """Epochs of ``source`` the run's steps reach at least in part (an upper bound: reads past the end are dropped)."""
    sampler, packer, total = run.sampler, run.packer, run.total_steps
    order = sampler.order(source)
    layouts = 0
    for stream in range(sampler.streams):
        if packer.lossless:
            key = (stream, source)
            if key not in packer.concat.packers:
                continue
            assert sampler.step_mixture is not None
            sequences = int(sampler.step_mixture.draws_before(stream, total)[source])
            limit = packer.concat.packers[key].limit
            sequences = sequences if limit is None else min(sequences, limit)
            if sequences:
                layouts = max(layouts, packer.concat.packers[key].locate(sequences - 1)[0] + 1)
            continue
        documents = total * sampler.width
        if packer.plan.pack is not None:
            assert packer.sequences_per_block is not None
            documents = -(-documents // packer.sequences_per_block) * packer.plan.pack.docs_per_block
        drawn = sampler.drawn_before(stream, source, documents)
        lo, hi = order.part(stream)
        if drawn > 0 and hi > lo:
            layouts = max(layouts, -(-drawn // (hi - lo)))
    return layouts * order.repeats


# -- the public function -----------------------------------------------------------------------------------------
def where_read(run: LocatedRun, source: int, record: int, *, first_epoch: int = 0, epochs: int | None = EPOCHS_PER_CALL) -> WhereReads:
    """Every read of ``record`` of ``source`` by ``run`` in epochs ``[first_epoch, first_epoch + epochs)``.

    Reads at or past ``run.total_steps`` are left out; ``next_epoch`` names
    the first epoch not covered when the run reaches further (else ``None``).
    ``epochs=None`` covers every epoch the run reaches.

    >>> where_read(run, 0, 41, epochs=2).steps      # doctest: +SKIP
    [3, 17]
    """
    if not 0 <= source < len(run.sources):
        raise SampleNotFound(f"run {run.name} has no source {source} (sources 0 to {len(run.sources) - 1})")
    rows = run.sources[source].rows
    if not 0 <= record < rows:
        raise SampleNotFound(f"record {record} is outside source {run.sources[source].ref} of run {run.name} ({rows} records)")
    reached = epochs_reached(run, source)
    stop = reached if epochs is None else min(reached, first_epoch + max(epochs, 0))
    result = WhereReads(run.name, source, record, reached, first_epoch, stop if stop < reached else None)
    width, batch = run.sampler.width, run.sampler.global_batch_size
    history = run.world_size_history()
    starts = [span.start_step for span in history]
    packed = run.packer.plan.pack is not None
    dropped = 0
    for epoch in range(first_epoch, stop):
        stream, samples = _epoch_samples(run, source, record, epoch)
        if not samples and packed:
            dropped += 1
        for counter in samples:
            step, offset = divmod(counter, width)
            if step >= run.total_steps:
                continue
            position = stream * width + offset
            world_size = history[bisect.bisect_right(starts, step) - 1].world_size
            rank, sample = divmod(position, batch // world_size)
            result.reads.append(Read(run.name, epoch, step, rank, world_size, sample, position, step * batch + position))
    if dropped:
        result.notes.append(
            f"{dropped} epoch(s) packed none of this document's tokens into a sequence (an empty document, "
            "or tokens past a fixed packing block's last sequence)"
        )
    result.reads.sort(key=lambda r: (r.epoch, r.step, r.position))
    return result

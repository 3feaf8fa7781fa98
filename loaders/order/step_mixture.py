"""Per-step mixtures (read formats 3–4): every global batch carries the weights, within one sample per source.

Over a cycle of ``P`` steps the global batch has ``P·B`` positions, split among
sources by largest-remainder apportionment of the weights: ``c_s`` each. A
source's per-step count is ``f_s = c_s // P`` plus, at ``k_s = c_s mod P`` of the
``P`` steps, one extra. The extras are ``R = B − Σ f_s`` per step, scheduled by
PD² (a Pfair scheduler, optimal when the rates ``k_s / P`` sum to the integer
``R``): at every step prefix ``t`` each source has had ``t·k_s/P`` extras within
one, so its count over *any* window of steps is within ±1 of its share. A
weight too small for one step (0.001 at B=64) is honoured over the smallest
window of steps that can hold it.

Inside a step, positions are a fixed interleave of the ``f_s`` static slots and
the ``R`` flexible ones (so every stream sees every source), and the flexible
slots take that step's extras. Stream ``k`` owns positions ``[k·b, (k+1)·b)``
and draws from source ``s`` ``rate[k, s]`` times per cycle; how many of its
draws from ``s`` precede any (step, position) is a table lookup plus
``cycle × rate``: O(1), no state, and independent of the world size.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .mixture import Mixture


def _group_deadline(i: int, k: int, period: int) -> int:
    """PD² group deadline of subtask ``i`` (1-based) of a heavy task with weight ``k/period``.

    The earliest time ``t >= d(i)`` at which a cascade of forced placements
    ends: ``t = d(j)`` for a subtask ``j >= i`` whose window does not overlap
    the next (b-bit 0), or ``t + 1 = d(j)`` for one whose window is 3 slots.
    """
    j = i
    while True:
        release = (j - 1) * period // k
        deadline = -(-(j * period) // k)
        if j > i and deadline - release == 3:
            return deadline - 1
        if (j * period) % k == 0:
            return deadline
        j += 1


def pfair_extras(rates: Sequence[int], period: int) -> np.ndarray:
    """``E[t, s]`` in {0, 1}: source ``s`` takes an extra at step ``t`` of the cycle (PD² schedule).

    ``rates[s]`` extras per ``period`` steps (each < ``period``); their sum must
    be a multiple of ``period``. Every row sums to ``sum(rates) // period``, and
    for every prefix of ``t`` steps ``|t·rates[s]/period − Σ E[:t, s]| < 1``.

    >>> pfair_extras([1, 1], 2).tolist()
    [[1, 0], [0, 1]]
    """
    total = sum(rates)
    if total % period:
        raise ValueError(f"extras {list(rates)} do not fill whole steps of a {period}-step cycle")
    per_step = total // period
    sources = len(rates)
    taken = [0] * sources
    extras = np.zeros((period, sources), dtype=np.int8)
    for t in range(period):
        ready = []
        for s, k in enumerate(rates):
            i = taken[s] + 1
            if k == 0 or i > k or (i - 1) * period // k > t:
                continue
            deadline = -(-(i * period) // k)
            b_bit = 1 if (i * period) % k else 0
            group = _group_deadline(i, k, period) if 2 * k >= period and b_bit else 0
            ready.append((deadline, -b_bit, -group, s))
        ready.sort()
        for *_, s in ready[:per_step]:
            extras[t, s] = 1
            taken[s] += 1
    _check_pfair(extras, rates, period, per_step)
    return extras


def _draw_numbers(source_at: np.ndarray, streams: int, sources: int) -> tuple[np.ndarray, np.ndarray]:
    """``(draw_at, rates)``: for each (step, position), how many earlier draws of its stream share its source (steps in
    order, positions in order within a step), and each stream's draws per source over the cycle.

    >>> draws, rates = _draw_numbers(np.array([[0, 1, 1, 0], [1, 0, 0, 0]]), 2, 2)
    >>> draws.tolist(), rates.tolist()
    ([[0, 0, 0, 0], [1, 1, 1, 2]], [[2, 2], [3, 1]])
    """
    cycle, batch = source_at.shape
    width = batch // streams if streams else 0
    lanes = source_at[:, : streams * width].reshape(cycle, streams, width).transpose(1, 0, 2).reshape(streams, cycle * width)
    keyed = (np.arange(streams, dtype=np.int64)[:, None] * sources + lanes).ravel()
    order = np.argsort(keyed, kind="stable")
    ranked = keyed[order]
    within = np.arange(len(ranked), dtype=np.int64) - np.searchsorted(ranked, ranked, side="left")
    numbers = np.empty(len(keyed), dtype=np.int64)
    numbers[order] = within
    draw_at = numbers.reshape(streams, cycle, width).transpose(1, 0, 2).reshape(cycle, streams * width)
    rates = np.bincount(keyed, minlength=streams * sources).reshape(streams, sources).astype(np.int64)
    return np.ascontiguousarray(draw_at), rates


def _check_pfair(extras: np.ndarray, rates: Sequence[int], period: int, per_step: int) -> None:
    """Refuse a schedule that breaks the per-step count or the ±1 lag bound (a bug, never bad input)."""
    if not (extras.sum(axis=1) == per_step).all():
        raise AssertionError(f"mixture schedule for rates {list(rates)}/{period} has a step without {per_step} extras")
    cumulative = np.cumsum(extras, axis=0, dtype=np.int64)
    steps = np.arange(1, period + 1, dtype=np.int64)[:, None]
    lag = steps * np.asarray(rates, dtype=np.int64)[None, :] - cumulative * period
    if (np.abs(lag) >= period).any():
        raise AssertionError(f"mixture schedule for rates {list(rates)}/{period} drifts by a whole sample")


@dataclass(frozen=True)
class StepMixture:
    """Which source each (step, position) draws from, and how many of its stream's earlier draws share it.

    ``source_at[t, p]`` and ``draw_at[t, p]`` cover one cycle (``t < cycle``);
    ``rates[k, s]`` is stream ``k``'s draws from source ``s`` per cycle.
    """

    counts: tuple[int, ...]
    cycle: int
    batch: int
    streams: int
    #: ``(source_at, draw_at, rates)``; None for one source, whose tables are made only if asked for (:attr:`one_source`).
    tables: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def one_source(self) -> bool:
        """One source filling every position: its ``n``-th draw by a stream is that stream's counter ``n`` (no tables)."""
        return self.tables is None

    @functools.cached_property
    def _tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.tables is not None:
            return self.tables
        width = self.width  # one source: every position is its stream's next draw
        draw_at = np.arange(self.batch, dtype=np.int64).reshape(1, self.batch) % width
        if self.cycle > 1:
            draw_at = draw_at + np.arange(0, self.cycle * width, width, dtype=np.int64).reshape(self.cycle, 1)
        rates = np.full((self.streams, 1), self.cycle * width, dtype=np.int64)
        return np.zeros((self.cycle, self.batch), dtype=np.int32), draw_at, rates

    @property
    def source_at(self) -> np.ndarray:
        return self._tables[0]

    @property
    def draw_at(self) -> np.ndarray:
        return self._tables[1]

    @property
    def rates(self) -> np.ndarray:
        return self._tables[2]

    def lane_rates(self, source: int) -> tuple[int, ...]:
        """Each stream's draws from ``source`` per cycle (``rates[:, source]``, in plain integers)."""
        if self.one_source:
            return (self.cycle * self.width,) * self.streams
        return tuple(self.rates[:, source].tolist())

    @classmethod
    def build(cls, counts: Sequence[int], cycle: int, batch: int, streams: int) -> "StepMixture":
        """The tables for cycle counts ``counts`` (summing to ``cycle × batch``) over ``streams`` streams."""
        counts = tuple(int(c) for c in counts)
        if sum(counts) != cycle * batch:
            raise ValueError(f"cycle counts {counts} do not fill {cycle} steps of {batch}")
        sources = len(counts)
        if sources == 1 and streams and batch % streams == 0:  # one source: nothing to tabulate (see one_source)
            return cls(counts, cycle, batch, streams)
        static = [c // cycle for c in counts]
        flex = batch - sum(static)
        extras = pfair_extras([c % cycle for c in counts], cycle)
        # One interleave of the static slots and the flexible ones (the last "source" below), spread evenly.
        template = Mixture.build([*static, flex]).source_at if batch else np.empty(0, dtype=np.int32)
        source_at = np.tile(template.astype(np.int32), (cycle, 1))
        if flex:  # rotate which flexible slots get which extra, so the extras visit every stream
            chosen = np.nonzero(extras)[1].reshape(cycle, flex).astype(np.int32)  # each step's extra sources, ascending
            turn = (np.arange(flex)[None, :] - (np.arange(cycle) % flex)[:, None]) % flex
            source_at[:, np.flatnonzero(template == sources)] = np.take_along_axis(chosen, turn, axis=1)
        draw_at, seen = _draw_numbers(source_at, streams, sources)
        return cls(counts, cycle, batch, streams, (source_at, draw_at, seen))

    @property
    def width(self) -> int:
        """Positions per stream per step."""
        return self.batch // self.streams

    def step_counts(self, step: int) -> np.ndarray:
        """How many positions of ``step``'s global batch each source fills."""
        row = self.source_at[step % self.cycle]
        return np.bincount(row, minlength=len(self.counts))

    def draws(self, stream: int, counters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(sources, n)`` for ``stream``'s documents ``counters`` (counter = step·width + offset in the stream).

        ``n`` counts the stream's earlier draws from the same source.
        """
        counters = np.asarray(counters, dtype=np.int64)
        step, offset = np.divmod(counters, self.width)
        cycles, t = np.divmod(step, self.cycle)
        position = stream * self.width + offset
        sources = self.source_at[t, position]
        n = cycles * self.rates[stream][sources] + self.draw_at[t, position]
        return sources, n

    def draw(self, stream: int, counter: int) -> tuple[int, int]:
        """:meth:`draws` of one counter, in plain integers."""
        if self.tables is None:  # one source: the stream's counter is its draw number
            return 0, counter
        step, offset = divmod(counter, self.width)
        cycles, t = divmod(step, self.cycle)
        position = stream * self.width + offset
        source = int(self.source_at[t, position])
        return source, cycles * int(self.rates[stream, source]) + int(self.draw_at[t, position])

    def draws_before(self, stream: int, step: int) -> np.ndarray:
        """How many draws from each source ``stream`` makes in steps ``[0, step)``."""
        cycles, rest = divmod(step, self.cycle)
        lane = self.source_at[:rest, stream * self.width : (stream + 1) * self.width]
        return cycles * self.rates[stream] + np.bincount(lane.ravel(), minlength=len(self.counts))

    def steps_to_draw(self, stream: int, source: int, count: int) -> int:
        """The fewest steps after which ``stream`` has drawn ``count`` times from ``source`` (0 for none)."""
        if count <= 0:
            return 0
        rate = int(self.rates[stream, source])
        if rate == 0:
            raise ValueError(f"stream {stream} never draws from source {source}")
        cycles, rest = divmod(count - 1, rate)
        lane = self.source_at[:, stream * self.width : (stream + 1) * self.width]
        cumulative = np.cumsum((lane == source).sum(axis=1))
        return cycles * self.cycle + int(np.searchsorted(cumulative, rest + 1)) + 1

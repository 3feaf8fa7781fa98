"""The sampler: a run's order as pure arithmetic — the ``n``-th draw of stream ``k`` → (source, record, epoch), and back.

Stream ``k`` owns positions ``[k·b, (k+1)·b)`` of every global batch (``b = global_batch_size / streams``), so its
counter at step ``s`` and offset ``i`` is ``s·b + i``. Read formats 3 and 4 map counters to sources with per-step
mixtures (:mod:`loaders.order.step_mixture`) and sources' draws to records with chunk-aligned stream parts
(:mod:`loaders.order.lane_order`); formats 1 and 2 with one phase-shifted block pattern per stream
(:mod:`loaders.order.mixture`) and equal parts (:mod:`loaders.order`). Nothing here reads data.

>>> sampler = Sampler(plan, sources, counts, read_format=3, cycle_steps=1)   # doctest: +SKIP
>>> sampler.draw(0, 5)                                                          # doctest: +SKIP
(1, 40, 0)
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

import numpy as np

from ..order.lane_order import LaneOrder
from ..order.mixture import Mixture
from ..order.source_order import SourceOrder
from ..order.step_mixture import StepMixture
from .plan import ReadPlan, ResolvedSource, packs_losslessly

#: Draws of one stream computed with plain integers rather than numpy arrays (lookups of a few positions).
SMALL_DRAWS = 32
#: Ranges of draws computed ahead (:meth:`Sampler.prefetch_draws`) kept per stream, at most.
KEPT_PER_STREAM = 4

#: ``(sources, record indices, epochs)`` of a range of one stream's draws.
Drawn = tuple[np.ndarray, np.ndarray, np.ndarray]


class Sampler:
    """Which ``(source, record, epoch)`` each stream's counters draw, for one run's plan and resolved sources.

    ``counts`` and ``cycle_steps`` are the manifest's: the mixture counts per cycle (formats 3–4) or per block.
    Thread-safe; holds only the orders' small caches and the draws :meth:`prefetch_draws` computed ahead.
    """

    def __init__(
        self,
        plan: ReadPlan,
        sources: Sequence[ResolvedSource],
        counts: Sequence[int],
        *,
        read_format: int,
        cycle_steps: int | None = None,
    ) -> None:
        assert plan.streams is not None
        self.streams: int = plan.streams
        self.global_batch_size = plan.global_batch_size
        self.width = plan.global_batch_size // plan.streams
        window, seed, shuffle = plan.shuffle.window_chunks, plan.seed, plan.shuffle.enabled
        self.step_mixture: StepMixture | None = None
        self.lane_orders: list[LaneOrder] = []
        self.mixture: Mixture | None = None
        self.orders: list[SourceOrder] = []
        self._phase: list[int] = []
        self._base: list[list[int]] = []
        if read_format >= 3:  # every step carries the weights (see loaders.order.step_mixture)
            assert cycle_steps is not None
            self.step_mixture = StepMixture.build(counts, int(cycle_steps), self.global_batch_size, self.streams)
            mix = self.step_mixture
            aligned = packs_losslessly(plan, read_format)  # packed sequences are found by token counts per whole chunk
            balanced = aligned and read_format >= 4  # parts cut by records, so streams that stop at epoch ends finish together
            self.lane_orders = [
                LaneOrder(s.rows, s.chunk, mix.lane_rates(i), window, seed, i, shuffle, aligned, balanced) for i, s in enumerate(sources)
            ]
        else:  # read formats 1 and 2: one block pattern per stream, phase-shifted (exact over whole blocks only)
            self.mixture = Mixture.build(counts)
            self.orders = [
                SourceOrder(s.rows, s.chunk, self.streams, window, seed, i, shuffle, stagger=read_format >= 2)
                for i, s in enumerate(sources)
            ]
            block = self.mixture.block
            self._phase = [k * block // self.streams for k in range(self.streams)]
            self._base = [[self.mixture.count_before(s, self._phase[k]) for s in range(len(sources))] for k in range(self.streams)]
        self._lock = threading.Lock()
        self._kept: dict[tuple[int, int, int], Drawn] = {}
        self._tables: dict[tuple[int, int], np.ndarray] = {}

    def order(self, source: int) -> LaneOrder | SourceOrder:
        """The order of ``source``'s records: its lane order (read formats 3–4) or its source order."""
        return self.lane_orders[source] if self.step_mixture is not None else self.orders[source]

    # -- positions of the global batch -----------------------------------------------------
    def positions(self, rank: int, world_size: int) -> range:
        """Positions of the global batch that ``rank`` of ``world_size`` reads (a contiguous range)."""
        per_rank = self.global_batch_size // world_size
        return range(rank * per_rank, (rank + 1) * per_rank)

    def streams_of(self, positions: range) -> list[int]:
        """The canonical streams that ``positions`` of the global batch come from."""
        return sorted({p // self.width for p in positions})

    # -- forward: counters → draws -------------------------------------------------------------
    def draw(self, stream: int, counter: int) -> tuple[int, int, int]:
        """``(source, record index, epoch)`` of the ``counter``-th document of ``stream``."""
        if self.step_mixture is not None:
            sources, records, epochs = self.compute_draws(stream, range(counter, counter + 1))
            return int(sources[0]), int(records[0]), int(epochs[0])
        assert self.mixture is not None
        source, n = self.mixture.draw(counter + self._phase[stream])
        n -= self._base[stream][source]
        record, epoch = self.orders[source].record(stream, n)
        return source, record, epoch

    def draws(self, stream: int, counters: range) -> Drawn:
        """:meth:`compute_draws`, or the draws :meth:`prefetch_draws` kept for exactly this range (then dropped)."""
        with self._lock:
            ahead = self._kept.pop((stream, counters.start, counters.stop), None)
        return ahead if ahead is not None else self.compute_draws(stream, counters)

    def compute_draws(self, stream: int, counters: range) -> Drawn:
        """``(sources, record indices, epochs)`` of documents ``counters`` of ``stream`` (vectorized :meth:`draw`)."""
        orders: Sequence[LaneOrder | SourceOrder]
        if self.step_mixture is not None and len(counters) <= SMALL_DRAWS:
            drawn = self._few_draws(stream, counters)
            return (
                np.asarray([s for s, _, _ in drawn], dtype=np.int32),
                np.asarray([r for _, r, _ in drawn], dtype=np.int64),
                np.asarray([e for _, _, e in drawn], dtype=np.int64),
            )
        counter = np.arange(counters.start, counters.stop, dtype=np.int64)
        if self.step_mixture is not None:
            sources, n = self.step_mixture.draws(stream, counter)
            orders = self.lane_orders
        else:
            assert self.mixture is not None
            sources, n = self.mixture.draw_many(counter + self._phase[stream])
            n = n - np.asarray(self._base[stream], dtype=np.int64)[sources]
            orders = self.orders
        records = np.empty(len(counter), dtype=np.int64)
        epochs = np.empty(len(counter), dtype=np.int64)
        for source in np.unique(sources).tolist():
            picked = sources == source
            records[picked], epochs[picked] = orders[source].records(stream, n[picked])
        return sources, records, epochs

    def prefetch_draws(self, stream: int, counters: range) -> Drawn:
        """:meth:`compute_draws`, kept for the :meth:`draws` call that will ask for exactly this range."""
        drawn = self.compute_draws(stream, counters)
        with self._lock:
            if len(self._kept) >= KEPT_PER_STREAM * self.streams:
                self._kept.clear()
            self._kept[(stream, counters.start, counters.stop)] = drawn
        return drawn

    def _few_draws(self, stream: int, counters: range) -> list[tuple[int, int, int]]:
        """:meth:`compute_draws` of a few counters (a rank's lookup) in plain integers: cheaper than numpy's overhead,
        above all in a fresh process's first calls."""
        assert self.step_mixture is not None
        draw, orders = self.step_mixture.draw, self.lane_orders
        out = []
        for counter in counters:
            source, n = draw(stream, counter)
            out.append((source, *orders[source].record(stream, n)))
        return out

    def addresses(self, step: int, positions: range) -> list[tuple[int, int, int]]:
        """``(source, record index, epoch)`` of ``positions`` of an unpacked ``step``'s global batch."""
        width = self.width
        if self.step_mixture is None:
            return [self.draw(p // width, step * width + p % width) for p in positions]
        out: list[tuple[int, int, int]] = []
        for stream in self.streams_of(positions):  # one vectorized draw per stream, not one per position
            first = max(positions.start, stream * width) - stream * width
            last = min(positions.stop, (stream + 1) * width) - stream * width
            counters = range(step * width + first, step * width + last)
            if len(counters) <= SMALL_DRAWS:
                out.extend(self._few_draws(stream, counters))
                continue
            sources, records, epochs = self.compute_draws(stream, counters)
            out.extend(zip(sources.tolist(), records.tolist(), epochs.tolist()))
        return out

    def sources_at(self, stream: int, counters: np.ndarray) -> np.ndarray:
        """The source each of ``stream``'s ``counters`` draws from (the mixture alone: no record arithmetic)."""
        if self.step_mixture is not None:
            return self.step_mixture.draws(stream, counters)[0]
        assert self.mixture is not None
        return self.mixture.source_at[(counters + self._phase[stream]) % self.mixture.block]

    # -- backward: a source's n-th draw by a stream → the stream's counter ------------------------------
    def counter_of(self, stream: int, source: int, n: int) -> int:
        """The counter of ``stream``'s ``n``-th draw of ``source``: whole cycles of the mixture, then a table lookup."""
        width = self.width
        if self.step_mixture is not None:
            mix = self.step_mixture
            table = self._table(stream, source, lambda: mix.source_at[:, stream * width : (stream + 1) * width])
            cycle, rest = divmod(n, int(mix.rates[stream, source]))
            t, offset = divmod(int(table[rest]), width)
            return (cycle * mix.cycle + t) * width + offset
        mixture = self.mixture
        assert mixture is not None
        blocks, rest = divmod(n + self._base[stream][source], mixture.counts[source])
        table = self._table(-1, source, lambda: mixture.source_at)
        return blocks * mixture.block + int(table[rest]) - self._phase[stream]

    def drawn_before(self, stream: int, source: int, counters: int) -> int:
        """How many of ``stream``'s counters ``[0, counters)`` draw from ``source`` (read formats 3–4: rounded up to whole
        steps, an upper bound mid-step)."""
        if self.step_mixture is not None:
            return int(self.step_mixture.draws_before(stream, -(-counters // self.width))[source])
        assert self.mixture is not None
        return self.mixture.count_before(source, self._phase[stream] + counters) - self._base[stream][source]

    def _table(self, stream: int, source: int, lane: Callable[[], np.ndarray]) -> np.ndarray:
        """Offsets of the source's draws in one cycle of the stream's lane (row-major order = draw order)."""
        key = (stream, source)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = np.flatnonzero(lane() == source)
        return table

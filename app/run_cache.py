"""Runs and recomputed batches kept between requests (a run manifest never changes; batches are pure)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

from loaders import Batch, Catalog, Run
from loaders.run.kinds import claims

from .decode_budget import DecodeBudget

T = TypeVar("T")
#: Computed values kept (measured mixtures and the like), the least recently used dropped first.
VALUES = 32


class RunCache:
    """Open runs by name, the last few batches computed from them, and rendered pages kept by key.

    A run's batch is a pure function of its manifest, step, rank and world
    size, so a cached batch is never stale; only the world-size history
    (which ``run.world_size_at`` re-reads) can change what a URL resolves to.
    A recorded run's batch is what its ledger says, so its key carries the
    ledger entry's digest (a step not recorded yet, or recorded again, is
    read anew).
    Batches of runs whose transforms decode media are computed in one of the
    ``budget``'s large-decode slots, so concurrent requests decode a bounded
    number of them at once.
    """

    def __init__(self, *, batches: int = 64, pages: int = 128, budget: DecodeBudget | None = None) -> None:
        self._budget = budget
        self._runs: dict[str, Run] = {}
        self._pages: OrderedDict[Hashable, bytes] = OrderedDict()
        self._page_capacity = pages
        self._batches: OrderedDict[tuple[object, ...], Batch] = OrderedDict()
        self._values: OrderedDict[Hashable, object] = OrderedDict()
        self._capacity = batches
        self._lock = threading.Lock()

    def run(self, catalog: Catalog, name: str) -> Run:
        """The run ``name`` (opened once per process)."""
        with self._lock:
            found = self._runs.get(name)
        if found is None:
            found = catalog.run(name)
            with self._lock:
                self._runs[name] = found
        return found

    def batch(self, run: Run, step: int, rank: int, world_size: int | None = None) -> Batch:
        """``run.batch(step, rank)`` at the world size in force (or the one given), cached."""
        run.check_step(step)
        size = run.world_size_at(step) if world_size is None else world_size
        key: tuple[object, ...] = (run.name, run.fingerprint, step, rank, size)
        if not claims(run.kind).recomputed:  # written down, not a pure function: a resumed job may record the step again
            entry = run.ledger.entry(step, rank, size)
            key += (entry.digest if entry is not None else None,)
        with self._lock:
            cached = self._batches.get(key)
            if cached is not None:
                self._batches.move_to_end(key)
                return cached
        decodes_media = claims(run.kind).planned and run.plan.decodes_media
        if self._budget is not None and decodes_media:  # its transforms decode media: one of the large-decode slots
            with self._budget.decoding(self._budget.limit, f"a batch of run {run.name} (its transforms decode media)"):
                batch = run.batch(step, rank, world_size=size)
        else:
            batch = run.batch(step, rank, world_size=size)
        with self._lock:
            self._batches[key] = batch
            while len(self._batches) > self._capacity:
                self._batches.popitem(last=False)
        return batch

    def page(self, key: Hashable, render: Callable[[], bytes | None]) -> bytes | None:
        """A rendered page body by ``key`` (which must name everything the page shows), else ``render()``'s.

        ``render`` returns ``None`` for an answer that must not be kept (an error).
        """
        with self._lock:
            body = self._pages.get(key)
            if body is not None:
                self._pages.move_to_end(key)
                return body
        body = render()
        if body is not None:
            with self._lock:
                self._pages[key] = body
                while len(self._pages) > self._page_capacity:
                    self._pages.popitem(last=False)
        return body

    def value(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, kept under ``key`` — which must name everything it depends on (a run's name and fingerprint)."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]  # type: ignore[return-value]
        found = compute()
        with self._lock:
            self._values[key] = found
            while len(self._values) > VALUES:
                self._values.popitem(last=False)
        return found

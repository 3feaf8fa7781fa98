"""Opening a run cold: the mixture tables made by array arithmetic equal the loops they replaced, windows found by
arithmetic equal the window grid, and a fresh process that opens a run and looks up a step imports nothing it does not use."""

from __future__ import annotations

import bisect
import random
import subprocess
import sys

import numpy as np

from loaders.order.lane_order import LaneOrder
from loaders.order.mixture import Mixture, apportion
from loaders.order.step_mixture import StepMixture, pfair_extras


def _mixture_by_loop(counts: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The block pattern as first written: earliest deadline first, one position at a time."""
    block, taken = sum(counts), [0] * len(counts)
    source_at, rank_at = np.empty(block, np.int32), np.empty(block, np.int64)
    for x in range(1, block + 1):
        best, best_deadline = -1, None
        for s, c in enumerate(counts):
            j = taken[s] + 1
            if j > c or (j - 1) * block // c + 1 > x:
                continue
            deadline = -(-(j * block) // c)
            if best_deadline is None or deadline < best_deadline:
                best, best_deadline = s, deadline
        if best < 0:
            best = next(s for s in range(len(counts)) if taken[s] < counts[s])
        source_at[x - 1], rank_at[x - 1] = best, taken[best]
        taken[best] += 1
    return source_at, rank_at


def _step_mixture_by_loop(counts: list[int], cycle: int, batch: int, streams: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The per-step tables as first written: one step, then one position, at a time."""
    sources = len(counts)
    static = [c // cycle for c in counts]
    flex = batch - sum(static)
    extras = pfair_extras([c % cycle for c in counts], cycle)
    template = _mixture_by_loop([*static, flex])[0]
    flexible, width = np.flatnonzero(template == sources), batch // streams
    source_at, draw_at = np.empty((cycle, batch), np.int32), np.empty((cycle, batch), np.int64)
    seen = np.zeros((streams, sources), np.int64)
    for t in range(cycle):
        row = template.copy()
        if flex:
            row[flexible] = np.roll(np.flatnonzero(extras[t]), t % flex)
        source_at[t] = row
        for p, s in enumerate(row.tolist()):
            draw_at[t, p] = seen[p // width, s]
            seen[p // width, s] += 1
    return source_at, draw_at, seen


def test_mixture_tables_equal_the_loops_they_replaced():
    rng = random.Random(0)
    checked = 0
    while checked < 120:
        streams = rng.choice([1, 2, 4, 8, 16])
        batch, cycle = streams * rng.randint(1, 12), rng.randint(1, 30)
        weights = [rng.choice([0.001, 0.05, 0.3, 1, 2]) for _ in range(rng.randint(1, 5))]
        try:
            counts = apportion(weights, cycle * batch)
        except Exception:  # a weight too small for this cycle: not a plan a run would make
            continue
        built = StepMixture.build(counts, cycle, batch, streams)
        for mine, theirs in zip((built.source_at, built.draw_at, built.rates), _step_mixture_by_loop(counts, cycle, batch, streams)):
            assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs), (counts, cycle, batch, streams)
        for counter in (0, 1, rng.randrange(10**6)):
            stream = rng.randrange(streams)
            sources, n = built.draws(stream, np.array([counter]))
            assert built.draw(stream, counter) == (int(sources[0]), int(n[0]))
        pattern = Mixture.build(counts)
        loop = _mixture_by_loop(counts)
        assert np.array_equal(pattern.source_at, loop[0]) and np.array_equal(pattern.rank_at, loop[1])
        checked += 1


def test_windows_found_by_arithmetic_are_the_window_grid():
    rng = random.Random(1)
    for _ in range(500):
        streams = rng.choice([1, 3, 8, 64])
        rates = tuple(rng.choice([0, 1, 2, 5]) for _ in range(streams))
        if not any(rates):
            continue
        order = LaneOrder(rng.choice([7, 100, 5000]), rng.choice([1, 4, 64]), rates, rng.choice([1, 2, 16]), 0, 0)
        stream = rng.randrange(streams)
        lo, hi = order.part(stream)
        if hi <= lo:
            continue
        starts = order.windows(stream).tolist()
        for position in (lo, hi - 1, rng.randrange(lo, hi)):
            w = bisect.bisect_right(starts, position) - 1
            assert order.window_of(stream, position) == (starts[w], starts[w + 1])


_OPEN = """
import sys
from loaders import Catalog, ReadPlan, Source
import pyarrow as pa, pyarrow.parquet as pq
root = sys.argv[1]
pq.write_table(pa.table({"id": ["a", "b", "c", "d"]}), root + "/a.parquet")
catalog = Catalog(root + "/c")
catalog.register("d", [root + "/a.parquet"], key="id", tag="v1")
catalog.create_run("r", ReadPlan([Source("d@v1")], seed=0, global_batch_size=2, steps=10))
"""
_LOOKUP = """
import sys
from loaders import Catalog
print(Catalog(sys.argv[1] + "/c").run("r").addresses(3, 0, world_size=2))
print(sorted(m for m in ("urllib.request", "http.client", "ssl", "pandas", "ray", "duckdb", "torch", "PIL") if m in sys.modules))
"""


def test_a_fresh_process_opening_a_run_imports_no_http_client_and_no_optional_engine(tmp_path):
    subprocess.run([sys.executable, "-c", _OPEN, str(tmp_path)], check=True, timeout=120)
    done = subprocess.run([sys.executable, "-c", _LOOKUP, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True)
    addresses, imported = done.stdout.strip().splitlines()
    assert addresses.startswith("[(0, ")
    assert imported in ("[]", "['ssl']"), imported  # pyarrow.fs brings ssl; nothing else here is needed to look up a step

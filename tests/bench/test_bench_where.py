"""The where benchmark: its synthetic 1e9-row runs answer with reads the forward order agrees with (no timing assertions)."""

from __future__ import annotations

import json
import random

from bench import bench_where
from loaders.sampling.where import where_read


def test_where_benchmark_reads_are_the_forward_orders_and_the_result_has_its_goal(tmp_path):
    runs = bench_where.build_runs(tmp_path / "catalog", (10**9,))
    rng = random.Random(1)
    for run in runs.values():
        for record in [rng.randrange(10**9) for _ in range(3)]:
            reads = where_read(run, 0, record, first_epoch=rng.randrange(10**4), epochs=2).reads
            assert reads
            for read in reads:
                assert run.addresses(read.step, read.rank, world_size=read.world_size)[read.sample] == (0, record, read.epoch)
    result = bench_where.run(tmp_path / "work", quick=True)
    assert json.loads(json.dumps(result)) == result
    assert set(result["goals"]["where_ms"]) == {"target", "measured", "met"}
    assert {(e["plan"], e["n"]) for e in result["results"]} == {(p, n) for p in ("one source", "mixture") for n in bench_where.SIZES}

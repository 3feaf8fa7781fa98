"""Where-was-this-read benchmark: a record's (step, rank, sample) in every epoch listed, at N = 1e6 and 1e9.

batchscope answers with ``loaders.sampling.where.where_read``: it inverts the read
order (chunk and window permutations, the mixture table) for each epoch, with
no reads and no scan. The runs read synthetic manifests that claim N rows
(see :mod:`bench.bench_lookup`): nothing opens a shard. The baseline is the
forward lookup measured in the same run, ``run.addresses(step, rank)``: one
rank's batch at one step. A forward search for a record would have to look
at every step of an epoch; that cost is given as an extrapolation from the
measured per-step cost of the whole global batch, labelled as such.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

from . import harness
from .bench_lookup import BATCH, SEED, TOTAL_STEPS, WORLD_SIZE, write_synthetic_version

NAME = "where"
SIZES = (10**6, 10**9)
#: Epochs listed per lookup (what a sample page shows at once).
EPOCHS = 8
GOAL_MS = 50.0


def build_runs(root: Path, sizes: tuple[int, ...]) -> dict[tuple[str, int], Any]:
    """A fresh catalog at ``root``: per size, a one-source run and a two-source weighted mixture (synthetic versions)."""
    from loaders import Catalog, ReadPlan, Source

    shutil.rmtree(root, ignore_errors=True)
    catalog = Catalog(root)
    runs = {}
    for n in sizes:
        label = harness.count_label(n)
        write_synthetic_version(catalog, f"big-{label}", n)
        write_synthetic_version(catalog, f"small-{label}", max(1, n // 7))
        one = ReadPlan([Source(f"big-{label}@v1")], seed=SEED, global_batch_size=BATCH, steps=TOTAL_STEPS)
        mixed = ReadPlan(
            [Source(f"big-{label}@v1", weight=0.7), Source(f"small-{label}@v1", weight=0.3)],
            seed=SEED,
            global_batch_size=BATCH,
            steps=TOTAL_STEPS,
        )
        runs[("one source", n)] = catalog.create_run(f"where-one-{label}", one)
        runs[("mixture", n)] = catalog.create_run(f"where-mix-{label}", mixed)
    return runs


def measure(run: Any, n: int, *, count: int, rng: random.Random) -> dict[str, Any]:
    """Median and p95 of ``where_read`` over random records (8 epochs, then 1), and the forward baseline."""
    from loaders.sampling.where import where_read

    records = [rng.randrange(n) for _ in range(count)]
    listed = harness.time_calls(lambda r: where_read(run, 0, r, epochs=EPOCHS), records, warmup=1)
    single = harness.time_calls(lambda r: where_read(run, 0, r, epochs=1), records, warmup=1)
    late = harness.time_calls(lambda r: where_read(run, 0, r, first_epoch=10**5, epochs=EPOCHS), records, warmup=1)
    steps = [rng.randrange(TOTAL_STEPS) for _ in range(count)]
    forward = harness.time_calls(lambda s: run.addresses(s, s % WORLD_SIZE, world_size=WORLD_SIZE), steps, warmup=1)
    whole = harness.time_calls(lambda s: run.addresses(s, 0, world_size=1), steps[: max(3, count // 10)], warmup=1)
    _, peak = harness.python_peak(lambda: where_read(run, 0, records[0], epochs=EPOCHS))
    example = where_read(run, 0, records[0], epochs=EPOCHS)
    steps_per_epoch = n / BATCH  # an upper bound's order of magnitude: one source's epoch over whole global batches
    return {
        "n": n,
        "where_8_epochs": listed.to_json(),
        "where_1_epoch": single.to_json(),
        "where_from_epoch_1e5": late.to_json(),
        "forward_rank_lookup": forward.to_json(),
        "forward_global_batch": whole.to_json(),
        "forward_scan_one_epoch_s_extrapolated": round(whole.median * steps_per_epoch, 1),
        "python_peak_bytes": peak,
        "epochs_reached": example.epochs,
        "example": [[r.epoch, r.step, r.rank, r.sample] for r in example.reads[:3]],
    }


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Measure where_read at every size for a one-source run and a mixture."""
    count = 30 if quick else 200
    root = Path(workdir) / "where" / "catalog"
    runs = build_runs(root, SIZES)
    rng = random.Random(SEED)
    results = [{"system": "batchscope", "plan": plan, **measure(r, n, count=count, rng=rng)} for (plan, n), r in runs.items()]
    ratios: dict[str, float | None] = {}
    for entry in results:
        label = f"{entry['plan']} N={harness.count_label(entry['n'])}"
        ratios[f"where 8 epochs / forward rank lookup ({label})"] = harness.ratio(
            entry["where_8_epochs"]["median_ms"], entry["forward_rank_lookup"]["median_ms"]
        )
        ratios[f"forward epoch scan (extrapolated) / where 8 epochs ({label})"] = harness.ratio(
            entry["forward_scan_one_epoch_s_extrapolated"] * 1e3, entry["where_8_epochs"]["median_ms"]
        )
    big = [e for e in results if e["n"] == max(SIZES)]
    worst = max(max(e["where_8_epochs"]["p95_ms"], e["where_from_epoch_1e5"]["p95_ms"]) for e in big)
    small = {e["plan"]: e["where_8_epochs"]["median_ms"] for e in results if e["n"] == min(SIZES)}
    flat = max(harness.ratio(e["where_8_epochs"]["median_ms"], small[e["plan"]]) or 0 for e in big)
    ratios[f"flatness N {harness.count_label(max(SIZES))}/{harness.count_label(min(SIZES))} (worst plan)"] = flat
    goals = {
        "where_ms": harness.goal(f"<= {GOAL_MS:g} ms per lookup of {EPOCHS} epochs at N=1e9 (p95, worst plan)", worst, worst <= GOAL_MS),
    }
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "run.addresses(step, rank)",
            "what": f"the forward lookup of one rank's batch (rank of {WORLD_SIZE}, global batch {BATCH}), same runs, same process",
        },
        results=results,
        ratios=ratios,
        goals=goals,
        notes=[
            f"one lookup = where_read(run, source 0, random record, epochs={EPOCHS}): the (epoch, step, rank, sample) "
            "of each epoch listed, plus how many epochs the run reaches",
            "where_from_epoch_1e5: the same from epoch 100,000 on (the cost does not grow with the epoch)",
            "forward_scan_one_epoch_s_extrapolated = N / global batch x the measured forward lookup of a whole "
            "global batch: what finding a record by scanning the steps would cost (not run)",
            "synthetic versions: manifests claiming N rows, no data files; nothing is read",
        ],
    )

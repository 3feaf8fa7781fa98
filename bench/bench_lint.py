"""Benchmark of ``batchscope lint``: samples/s of linting a whole run against the plain reader's samples/s over the same
run, on the same machine, in the same process.

Three runs, each read whole both ways:

- **pretrain**: the demo's pretraining plan made longer: ``web-text`` (tokenized) and ``sft-chat`` (token ids and loss
  masks) 70/30, packed into 256-token sequences, 16 per step;
- **multimodal**: the demo's multimodal plan: random-resized crops of ``images`` and 4 frames sampled from each
  ``videos`` clip, 8 per step;
- **rl**: GRPO-style rollouts (groups of 8, a quarter with equal rewards, 4-24 completion tokens with log-probabilities;
  the rows of ``bench_rl``), each read once, 256 per step.

The baseline is the production reader, ``run.reader(0, 1, ledger=False)``, over every step, touching every sample's
model inputs (what a training loop consumes). The lint is ``loaders.checks.lint(run)`` with every check at its default
thresholds (it reads every rank's batch of every step through the run-kind interface and judges every sample; it
starts worker processes by itself for runs of :data:`loaders.checks.lint.POOL_MIN_SAMPLES` samples or more; the
single-process figure is reported too). Read caches are emptied before each measurement and the two alternate, so
machine load hits both alike. Goal: lint samples/s ≥ 0.5 × reader samples/s for every run.

    python -m bench --only lint            # python -m bench --quick --only lint for smaller runs
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow.parquet as pq

from bench import harness

NAME = "lint"
FORMAT = 1
RATIO_GOAL = 0.5
#: Steps of the pretraining and multimodal runs, rollouts of the RL run (full, quick).
SIZES = {"pretrain": (480, 120), "multimodal": (120, 40), "rl": (200_000, 50_000)}
RL_BATCH = 256
REPEATS = {False: 3, True: 1}


def _catalog(workdir: Path, *, quick: bool) -> Any:
    """The demo workspace (built once) with the benchmark's runs and the synthetic rollouts added."""
    from batchscope_demo import ensure_demo
    from bench.bench_rl import rollouts_table
    from loaders import Pack, RandomResizedCrop, ReadPlan, SampleFrames, Shuffle, Source, Tokenize, UseTokens

    root = workdir / "lint"
    catalog = ensure_demo(str(root / "demo"), log=lambda _line: None)
    index = 1 if quick else 0
    spec = {"format": FORMAT, "sizes": {k: v[index] for k, v in SIZES.items()}}
    marker = root / "runs.json"
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return catalog
    for name in ("bench-pretrain", "bench-multimodal", "bench-rl"):
        shutil.rmtree(Path(catalog.root) / "runs" / name, ignore_errors=True)
    shutil.rmtree(Path(catalog.root) / "lint", ignore_errors=True)
    rows = spec["sizes"]["rl"]
    data = root / "rollouts"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    paths = []
    for shard, start in enumerate(range(0, rows, 50_000)):
        path = str(data / f"part-{shard:05d}.parquet")
        pq.write_table(rollouts_table(start, min(50_000, rows - start), tokens=(4, 24), seed=shard), path, row_group_size=4096)
        paths.append(path)
    catalog.register("bench-rollouts", paths, key="id", tag=f"rows-{rows}")
    catalog.create_run(
        "bench-pretrain",
        ReadPlan(
            [
                Source("web-text@v1", weight=0.7, transforms=[Tokenize("text")]),
                Source("sft-chat@v1", weight=0.3, transforms=[UseTokens("input_ids", "loss_mask")]),
            ],
            seed=1,
            global_batch_size=16,
            steps=spec["sizes"]["pretrain"],
            streams=4,
            transforms=[Pack(seq_len=256, docs_per_block=24)],
        ),
    )
    catalog.create_run(
        "bench-multimodal",
        ReadPlan(
            [
                Source("images@v1", weight=3, transforms=[RandomResizedCrop("image", size=(64, 64), scale=(0.3, 1.0))]),
                Source("videos@v1", weight=1, transforms=[SampleFrames("video", k=4, stride=6)]),
            ],
            seed=1,
            global_batch_size=8,
            steps=spec["sizes"]["multimodal"],
            streams=2,
        ),
    )
    catalog.create_run(
        "bench-rl",
        ReadPlan(
            [Source(f"bench-rollouts@rows-{rows}")], seed=0, global_batch_size=RL_BATCH, epochs=1, streams=1, shuffle=Shuffle(enabled=False)
        ),
    )
    marker.write_text(json.dumps(spec))
    return catalog


def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    from loaders.catalog.version import clear_read_caches

    clear_read_caches()
    start = time.perf_counter()
    samples = fn()
    return time.perf_counter() - start, samples


def _read(run: Any) -> int:
    samples = 0
    with run.reader(0, 1, ledger=False) as reader:
        for batch in reader:
            for _inputs in batch.inputs:
                samples += 1
    return samples


def measure(catalog: Any, name: str, *, repeats: int) -> dict[str, Any]:
    """Reader, lint (workers chosen by the lint) and single-process lint over run ``name``, alternated ``repeats`` times."""
    from loaders.checks import lint

    run = catalog.run(name)
    reader, linted, single, counts = [], [], [], {}
    for _ in range(repeats):
        seconds, samples = _timed(lambda: _read(run))
        reader.append(samples / seconds)
        outcome: dict[str, Any] = {}

        def lint_all(workers: int | None) -> int:
            outcome["result"] = lint(run, catalog=catalog, workers=workers)
            return outcome["result"].samples

        seconds, samples = _timed(lambda: lint_all(None))
        linted.append(samples / seconds)
        seconds, samples = _timed(lambda: lint_all(1))
        single.append(samples / seconds)
        counts = {k: v for k, v in outcome["result"].counts().items() if v}
    read_rate, lint_rate, single_rate = (statistics.median(x) for x in (reader, linted, single))
    return {
        "run": name,
        "steps": run.total_steps,
        "samples": samples,
        "reader_samples_per_s": round(read_rate, 1),
        "lint_samples_per_s": round(lint_rate, 1),
        "lint_one_process_samples_per_s": round(single_rate, 1),
        "ratio": harness.ratio(lint_rate, read_rate),
        "ratio_one_process": harness.ratio(single_rate, read_rate),
        "findings": counts,
        "runs": repeats,
    }


def run(workdir: Path, *, quick: bool = False) -> dict[str, Any]:
    catalog = _catalog(Path(workdir), quick=quick)
    results = [measure(catalog, f"bench-{name}", repeats=REPEATS[quick]) for name in ("pretrain", "multimodal", "rl")]
    ratios = {r["run"]: r["ratio"] for r in results}
    ratios.update({f"{r['run']} (one process)": r["ratio_one_process"] for r in results})
    goals = {
        f"{r['run']}_lint_over_reader": harness.goal(f">= {RATIO_GOAL}", r["ratio"], r["ratio"] is not None and r["ratio"] >= RATIO_GOAL)
        for r in results
    }
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "run.reader(0, 1, ledger=False) over every step, touching every sample's model inputs (samples/s)",
            "runs": {r["run"]: r["reader_samples_per_s"] for r in results},
        },
        results=results,
        ratios=ratios,
        goals=goals,
        notes=[
            "lint: every check at its default thresholds over every rank's batch of every step, read through the run-kind "
            "interface; worker processes for runs of POOL_MIN_SAMPLES samples or more",
            "read caches emptied before each measurement; reader and lint alternate; medians",
        ],
    )

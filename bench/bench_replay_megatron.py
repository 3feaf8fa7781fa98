"""Megatron-Core replay benchmark: (iteration, rank) lookups, attaching over the run's cached indexes, and replay
against megatron's own way to reach iteration s.

A corpus is written with megatron-core's ``IndexedDatasetBuilder`` and the run's index cache with megatron-core's
``BlendedMegatronDatasetBuilder`` (as the run's rank 0 writes it into ``--data-cache-path``). Then, in one process
(megatron-core already imported, its import time reported apart):

- lookup: ``MegatronReplay.batch(s, r)`` median at iteration 0 and at the last iteration (goal ≤ 1 ms, flat);
- attach: ``MegatronReplay.open`` over the run's cache (builds nothing) against megatron's own build of the same
  indexes, and ``open`` without the cache (megatron builds them into our folder) against that same build;
- reach iteration s = 1e5: megatron's DataLoader with Megatron-LM's pretraining sampler iterated from the start
  (measured over the first iterations, extrapolated to s, labelled so) and resumed at ``consumed_samples(s)`` (what a
  Megatron-LM restart from a checkpoint saved at s does), against ``replay.batch(s, r)`` for every rank.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Any

from . import harness

NAME = "replay_megatron"
GOAL_MS = 1.0
TARGET_ITERATION = 100_000
SETTINGS = {"seq_length": 256, "micro_batch_size": 2, "data_parallel_size": 4, "global_batch_size": 32}


def _argv(data: Path, cache: Path, *, train_iters: int) -> list[str]:
    s = SETTINGS
    return [
        "--data-path", str(data / "corpus"), "--split", "99,1,0", "--seed", "1234", "--seq-length", str(s["seq_length"]),
        "--micro-batch-size", str(s["micro_batch_size"]), "--global-batch-size", str(s["global_batch_size"]),
        "--data-parallel-size", str(s["data_parallel_size"]), "--train-iters", str(train_iters), "--data-cache-path", str(cache),
        "--tokenizer-type", "NullTokenizer", "--vocab-size", "32000",
    ]  # fmt: skip


def _iterate_from_start(replay: Any, *, iterations: int, rank: int) -> float:
    """Seconds to draw ``iterations`` iterations through megatron's dataset, a DataLoader and the pretraining sampler."""
    import torch

    from tests.support.megatron_truth import PretrainingSampler

    args = replay.args
    sampler = PretrainingSampler(len(replay.dataset), 0, args.micro_batch_size, rank, args.data_parallel_size)
    loader = iter(torch.utils.data.DataLoader(replay.dataset, batch_sampler=sampler, num_workers=0))
    start = time.perf_counter()
    for iteration in range(iterations):
        for _ in range(replay.schedule.microbatches_at(iteration)):
            next(loader)
    return time.perf_counter() - start


def _resume_at(replay: Any, iteration: int, *, rank: int) -> float:
    """Seconds for Megatron-LM's restart at ``iteration``: a sampler built at its consumed samples, one iteration drawn."""
    import torch

    from tests.support.megatron_truth import PretrainingSampler

    args = replay.args
    start = time.perf_counter()
    consumed = replay.schedule.consumed(iteration)
    sampler = PretrainingSampler(len(replay.dataset), consumed, args.micro_batch_size, rank, args.data_parallel_size)
    loader = iter(torch.utils.data.DataLoader(replay.dataset, batch_sampler=sampler, num_workers=0))
    for _ in range(replay.schedule.microbatches_at(iteration)):
        next(loader)
    return time.perf_counter() - start


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Measure the Megatron-Core replay (see the module docstring); ``quick`` uses a smaller corpus and fewer repeats."""
    import_start = time.perf_counter()
    from loaders.replay.megatron import MegatronReplay, parse_args
    from loaders.replay.megatron import indexes as megatron_indexes
    from loaders.replay.megatron._extra import megatron_module

    megatron_module("megatron.core.datasets.blended_megatron_dataset_builder")
    import_s = time.perf_counter() - import_start
    from tests.support.megatron_truth import write_corpus

    root = Path(workdir) / NAME
    shutil.rmtree(root, ignore_errors=True)
    documents = 5_000 if quick else 50_000
    write_corpus(root / "data" / "corpus", documents=documents, seed=3, min_len=8, max_len=400)
    args = parse_args(_argv(root / "data", root / "run-cache", train_iters=TARGET_ITERATION))
    split_sizes = megatron_indexes.sizes(args, TARGET_ITERATION)
    tokenizer = megatron_indexes.tokenizer(args)
    build_s = megatron_indexes.build_indexes(args, split_sizes, root / "run-cache", tokenizer_object=tokenizer)  # the run's rank 0

    attach = harness.time_repeated(lambda: MegatronReplay.open(args, work_dir=root / "work-cached"), repeat=3 if quick else 5, warmup=1)
    replay = MegatronReplay.open(args, work_dir=root / "work-cached")
    built_anything = replay.built_seconds is not None or (root / "work-cached").exists()
    empty = parse_args(_argv(root / "data", root / "empty-cache", train_iters=TARGET_ITERATION))
    start = time.perf_counter()
    rebuilt = MegatronReplay.open(empty, work_dir=root / "work-built")
    open_building_s = time.perf_counter() - start

    last = replay.total_iterations - 1
    ranks, repeat = args.data_parallel_size, 60 if quick else 300
    rng = random.Random(1)
    first = harness.time_calls(lambda r: replay.batch(0, r), [rng.randrange(ranks) for _ in range(repeat)], warmup=3)
    final = harness.time_calls(lambda r: replay.batch(last, r), [rng.randrange(ranks) for _ in range(repeat)], warmup=3)
    middle = harness.time_calls(lambda s: replay.batch(s, s % ranks), [rng.randrange(last) for _ in range(repeat)], warmup=3)

    drawn = 50 if quick else 300
    iterate_s = _iterate_from_start(replay, iterations=drawn, rank=0)
    iterate_to_target_s = iterate_s / drawn * TARGET_ITERATION
    resume = harness.time_repeated(lambda: _resume_at(replay, last, rank=0), repeat=5, warmup=1)
    replay_all_ranks = harness.time_repeated(lambda: [replay.batch(last, r) for r in range(ranks)], repeat=20, warmup=2)

    per_rank = args.global_batch_size // ranks
    results = [
        {
            "system": "batchscope MegatronReplay",
            "documents": documents,
            "samples_in_train_dataset": len(replay.dataset),
            "iterations": replay.total_iterations,
            "samples_per_rank_lookup": per_rank,
            "lookup_iteration_0": first.to_json(),
            "lookup_last_iteration": final.to_json(),
            "lookup_random_iteration": middle.to_json(),
            "attach_with_run_cache": attach.to_json(),
            "attach_built_anything": built_anything,
            "open_without_cache_s": round(open_building_s, 3),
            "open_without_cache_megatron_build_s": round(rebuilt.built_seconds or 0.0, 3),
            "replay_iteration_s_all_ranks": replay_all_ranks.to_json(),
            "megatron_import_s": round(import_s, 2),
        },
        {
            "system": "megatron-core DataLoader + Megatron-LM pretraining sampler (rank 0)",
            "iterated_iterations": drawn,
            "iterated_s": round(iterate_s, 3),
            "iterate_to_1e5_s_extrapolated": round(iterate_to_target_s, 1),
            "resume_at_last_iteration": resume.to_json(),
        },
    ]
    ratios = {
        "lookup last / iteration 0 (flatness)": harness.ratio(final.median, first.median),
        "attach with run cache / megatron's own index build": harness.ratio(attach.median, build_s),
        "open without cache / megatron's own index build": harness.ratio(open_building_s, build_s),
        "megatron iterate to 1e5 (extrapolated) / replay all ranks at 1e5": harness.ratio(iterate_to_target_s, replay_all_ranks.median),
        "megatron resume at 1e5 (rank 0) / replay rank 0 at 1e5": harness.ratio(resume.median, final.median),
    }
    worst = max(first.median, final.median) * 1e3
    goals = {
        "lookup_ms": harness.goal(
            f"<= {GOAL_MS:g} ms median per (iteration, rank), {per_rank} samples of {args.seq_length} tokens",
            round(worst, 4),
            worst <= GOAL_MS,
        ),
        "attach_builds_nothing": harness.goal(
            "attaching over the run's cached indexes builds nothing", float(built_anything), not built_anything
        ),
    }
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "megatron-core: BlendedMegatronDatasetBuilder build; GPTDataset through a DataLoader with Megatron-LM's sampler",
            "megatron_build_s": round(build_s, 3),
            "what": "the run's index build (rank 0), and reaching an iteration by iterating or resuming megatron's loader, same process",
        },
        results=results,
        ratios=ratios,
        goals=goals,
        notes=[
            f"settings: {SETTINGS}, --train-iters {TARGET_ITERATION}, NullTokenizer; corpus of random documents (8..400 tokens)",
            "lookups exclude megatron-core's import (megatron_import_s, once per process)",
            f"iterate_to_1e5_s_extrapolated = the measured time of the first {drawn} iterations x {TARGET_ITERATION} / {drawn} (not run)",
            "resume = Megatron-LM restarting from a checkpoint saved at that iteration: its sampler starts at consumed_samples",
            "Megatron-LM's MegatronPretrainingSampler is not on PyPI; the sampler is the statement-for-statement transcription "
            "in tests/support/megatron_truth.py that the replay's tests prove against",
        ],
    )

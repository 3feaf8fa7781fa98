"""OLMo-core replay benchmark: a (step, rank) lookup at step 0 and at the last step, and reaching step 1e5 with
OLMo-core's own data loader.

An OLMo-style corpus (headerless uint16 token files of EOS-terminated documents) is written once; a ``config.json``
made with OLMo-core's config classes describes a run over it (sequence length 64, global batch 8 instances, 4
data-parallel ranks, 2 epochs). batchscope attaches it (``OlmoReplay.attach``: every file pinned, OLMo-core builds each
epoch's global indices once) and answers:

- ``locate(step, rank)``: which instances the rank consumed, with token ranges and documents (nothing read);
- ``batch(step, rank)``: OLMo-core's own batch for the rank (its ``__getitem__``), each instance checked against the
  pinned bytes.

Baselines, same process, same files: OLMo-core's data loader reaching step s as its trainer does: iterating from the
first step (measured over the first batches, extrapolated to s = 1e5, labelled so), and fast-forwarding as a resumed
trainer does (``batches_processed`` set from a checkpoint, then the first batch), measured at s = 1e5. Index builds are
compared with OLMo-core's own build of the same global indices.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from . import bench_replay, harness, peers

NAME = "replay_olmo"
SEQUENCE = 64
INSTANCES_PER_BATCH = 8
RANKS = 4
SEED = 7
FILES = 8
TARGET_STEP = 10**5
QUICK_TARGET_STEP = 10**4
GOAL_MS = 1.0
#: Builds of both epochs' global indices timed each way (medians).
BUILD_REPEATS = 7


def write_corpus(folder: Path, instances: int) -> list[str]:
    """``instances * SEQUENCE`` tokens over ``FILES`` headerless uint16 files, documents of ~500 tokens ending with EOS 0."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED)
    per_file = instances * SEQUENCE // FILES + 37  # a tail that makes no whole instance in every file
    paths = []
    for number in range(FILES):
        tokens = rng.integers(2, 50_000, size=per_file, dtype=np.uint16)
        tokens[rng.random(per_file) < 1 / 500] = 0
        path = folder / f"part-{number:03d}.npy"
        tokens.tofile(path)
        paths.append(str(path))
    return paths


def write_config(path: Path, paths: list[str], work: Path) -> None:
    """A ``config.json`` as OLMo-core's ``ConfigSaverCallback`` writes it (the dataset, data loader and trainer parts)."""
    from olmo_core.data import NumpyDataLoaderConfig, NumpyFSLDatasetConfig, TokenizerConfig

    dataset = NumpyFSLDatasetConfig(
        paths=paths,
        sequence_length=SEQUENCE,
        tokenizer=TokenizerConfig(vocab_size=50_280, eos_token_id=0, pad_token_id=1),
        dtype="uint16",
        work_dir=str(work),
    )
    loader = NumpyDataLoaderConfig(global_batch_size=INSTANCES_PER_BATCH * SEQUENCE, seed=SEED)
    config = {
        "dataset": dataset.as_config_dict(),
        "data_loader": loader.as_config_dict(),
        "trainer": {"max_duration": {"value": 2, "unit": "epochs"}},
    }
    path.write_text(json.dumps(config))


def olmo_loader(replay: Any, rank: int, work: Path) -> Any:
    """OLMo-core's own data loader for ``rank`` over the same dataset (its own working directory)."""
    from olmo_core.data import DataCollator, NumpyDataLoaderBase

    dataset = replay.dataset
    return NumpyDataLoaderBase.wrap_numpy_dataset(
        dataset,
        global_batch_size=replay.global_batch_size,
        collator=DataCollator(pad_token_id=dataset.pad_token_id, vocab_size=dataset.vocab_size),
        work_dir=work,
        seed=replay.seed,
        dp_world_size=RANKS,
        dp_rank=rank,
        fs_local_rank=0,
    )


def build_indices(replay: Any, root: Path, *, repeats: int) -> dict[str, Any]:
    """Both epochs' global indices built from nothing, ``repeats`` times each way, alternating: by batchscope (a fresh
    replay of the same checkpoint in a fresh work directory: OLMo-core's loader made, each epoch built, stamped) and by
    OLMo-core alone (its loader made in a fresh work directory, then ``reshuffle`` of each epoch). Medians in seconds."""
    from loaders.replay.olmo import OlmoReplay

    ours, theirs = [], []
    for i in range(repeats):
        fresh = OlmoReplay.attach(root / "config.json", work_dir=root / "builds" / f"replay-{i}", dp_world_size=RANKS)
        start = time.perf_counter()
        fresh.prepare()
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        loader = olmo_loader(replay, 0, root / "builds" / f"olmo-{i}")
        loader.reshuffle(epoch=1)
        loader.reshuffle(epoch=2)
        theirs.append(time.perf_counter() - start)
    shutil.rmtree(root / "builds", ignore_errors=True)
    return {"replay_s": statistics.median(ours), "olmo_core_s": statistics.median(theirs), "repeats": repeats}


def iterate_from_start(loader: Any, batches: int) -> float:
    """Seconds for OLMo-core's loader to yield its first ``batches`` batches of epoch 1, as the trainer iterates."""
    loader.reshuffle(epoch=1)
    start = time.perf_counter()
    for count, _ in enumerate(loader, start=1):
        if count == batches:
            break
    elapsed = time.perf_counter() - start
    loader.reset()
    return elapsed


def fast_forward(loader: Any, step: int) -> tuple[float, dict[str, Any]]:
    """Seconds for OLMo-core's loader, resumed at ``step`` of epoch 1 (as ``load_state_dict`` leaves it), to yield a
    batch, and that batch."""
    loader.reshuffle(epoch=1)
    start = time.perf_counter()
    loader.batches_processed = step
    batch = next(iter(loader))
    elapsed = time.perf_counter() - start
    loader.reset()
    return elapsed, batch


def same_batch(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two batches OLMo-core collated hold the same fields and values."""
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a)


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Attach the run, time lookups at the first, target (1e5) and last steps, and OLMo-core's ways to reach the target."""
    try:
        from loaders.replay.olmo import OlmoReplay
        from loaders.replay.olmo.framework import olmo_core

        olmo_core()
    except ImportError as exc:
        return {"benchmark": NAME, "quick": quick, "status": "unavailable", **peers.unavailable(str(exc))}
    instances = (10**5 if quick else 10**6) + 5
    target = QUICK_TARGET_STEP if quick else TARGET_STEP
    at = harness.count_label(target)
    root = Path(workdir) / NAME
    shutil.rmtree(root, ignore_errors=True)
    paths = write_corpus(root / "data", instances)
    write_config(root / "config.json", paths, root / "olmo-work")

    start = time.perf_counter()
    replay = OlmoReplay.attach(root / "config.json", work_dir=root / "replay", dp_world_size=RANKS)
    attach_s = time.perf_counter() - start
    builds = build_indices(replay, root, repeats=3 if quick else BUILD_REPEATS)
    prepare_s, olmo_build_s = builds["replay_s"], builds["olmo_core_s"]
    replay.prepare()

    count = 100 if quick else 400
    rng = np.random.default_rng(SEED)
    last = replay.total_steps - 1
    steps = {"first": 0, "target": target, "last": last}
    lookups: dict[str, Any] = {}
    for label, step in steps.items():
        ranks = [int(r) for r in rng.integers(0, RANKS, size=count)]
        lookups[f"locate_{label}"] = harness.time_calls(lambda r: replay.locate(step, r), ranks, warmup=3).to_json()
        lookups[f"batch_{label}"] = harness.time_calls(lambda r: replay.batch(step, r), ranks, warmup=3).to_json()

    iterated = 2_000 if not quick else 300
    loader = olmo_loader(replay, 1, root / "olmo-work")
    per_batch_s = iterate_from_start(loader, iterated) / iterated
    forward = harness.time_repeated(lambda: fast_forward(loader, target), repeat=5 if quick else 10, warmup=1)
    same = same_batch(fast_forward(loader, target)[1], replay.batch(target, 1).batch)
    iterate_to_target_s = per_batch_s * target
    replay_ms = lookups["batch_target"]["median_ms"]
    argv = ["--checkpoint", str(root / "config.json"), "--dp-world-size", str(RANKS)]
    through = bench_replay.attached(root / "catalog", "olmo", argv, count=30 if quick else 100)
    results = [
        {
            "system": "batchscope OlmoReplay",
            "instances": len(replay.dataset),
            "tokens": len(replay.dataset) * SEQUENCE,
            "target_step": target,
            "total_steps": replay.total_steps,
            "batches_per_epoch": replay.batches_per_epoch,
            "attach_s": round(attach_s, 3),
            "global_indices_2_epochs_s": round(prepare_s, 3),
            **lookups,
        },
        {
            "system": "OLMo-core NumpyFSLDataLoader",
            "version": replay.olmo_core_version,
            "global_indices_2_epochs_s": round(olmo_build_s, 3),
            "iterate_per_batch_ms": round(per_batch_s * 1e3, 4),
            "iterated_batches": iterated,
            "iterate_to_target_s_extrapolated": round(iterate_to_target_s, 1),
            "fast_forward_to_target": forward.to_json(),
            "same_batch_as_replay_at_target": same,
        },
        {"system": "batchscope attach olmo (the replayed run the pages read)", **through},
    ]
    ratios = {
        "locate last step / first step (flatness)": harness.ratio(
            lookups["locate_last"]["median_ms"], lookups["locate_first"]["median_ms"]
        ),
        "batch last step / first step (flatness)": harness.ratio(lookups["batch_last"]["median_ms"], lookups["batch_first"]["median_ms"]),
        "attached run: samples(step, rank) last / first step (flatness)": through["lookup_flatness"],
        f"OLMo-core iterating to step {at} (extrapolated) / replay batch at {at}": harness.ratio(iterate_to_target_s * 1e3, replay_ms),
        f"OLMo-core fast-forward to step {at} / replay batch at {at}": harness.ratio(forward.median * 1e3, replay_ms),
        "replay global indices build / OLMo-core's own build (2 epochs)": harness.ratio(prepare_s, olmo_build_s),
    }
    worst = max(lookups["locate_first"]["median_ms"], lookups["locate_last"]["median_ms"])
    goals = {
        "index_build_vs_framework": harness.goal(
            "<= 1.0 (both epochs' global indices built by the replay / by OLMo-core's own loader)",
            harness.ratio(prepare_s, olmo_build_s),
            prepare_s <= olmo_build_s,
        ),
        "locate_ms": harness.goal(f"<= {GOAL_MS:g} ms median locate(step, rank), first and last step", worst, worst <= GOAL_MS),
        "batch_ms": harness.goal(
            f"<= {GOAL_MS:g} ms median batch(step, rank) at the last step",
            lookups["batch_last"]["median_ms"],
            lookups["batch_last"]["median_ms"] <= GOAL_MS,
        ),
    }
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "OLMo-core NumpyFSLDataLoader",
            "what": f"OLMo-core's own loader over the same files, rank 1 of {RANKS}: iterating from step 0, and fast-forwarding as a resumed trainer does",
        },
        results=results,
        ratios=ratios,
        goals=goals,
        notes=[
            f"run: sequence length {SEQUENCE}, global batch {INSTANCES_PER_BATCH} instances, {RANKS} data-parallel ranks, 2 epochs, {FILES} token files",
            "locate = which instances with token ranges and documents (no token read); batch = OLMo-core's __getitem__ "
            "for the rank (dataset reads, collator) plus a check of every instance against its pinned bytes",
            f"target step {at} (1e5 in full runs, 1e4 in quick ones); iterate_to_target_s_extrapolated = measured per-batch "
            "cost of OLMo-core's iterator over its first batches x the target step (not run)",
            "fast_forward_to_target = batches_processed set to the target step (what load_state_dict does) then the first batch: OLMo-core "
            "copies the rest of the epoch's indices for the rank and starts its reader threads",
            "attach_s: reading the config, OLMo-core building the dataset, and pinning (hashing) every token file once "
            "(OLMo-core already imported); global_indices_2_epochs_s: both epochs' global indices built from nothing, loader "
            "made included, median of alternating builds each way (batchscope's also stamps each epoch's file)",
        ],
    )
